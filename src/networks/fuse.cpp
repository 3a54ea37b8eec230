#include "networks/fuse.hpp"

#include <algorithm>
#include <vector>

namespace d500 {
namespace {

// What a rewrite needs to know of each tensor: how many nodes read it (a graph output counts as
// two readers, so that it is never joined away) and the last node that does.
struct Readers {
  std::vector<int> count, last;
  explicit Readers(const Graph& g) : count(g.tensors.size(), 0), last(g.tensors.size(), -1) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      for (int t : g.nodes[i].in)
        if (t >= 0) ++count[static_cast<std::size_t>(t)], last[static_cast<std::size_t>(t)] = static_cast<int>(i);
    for (int t : g.outputs) count[static_cast<std::size_t>(t)] += 2;
  }
  // The one Relu that alone reads t (t no graph output), or -1.
  int only_relu(const Graph& g, int t) const {
    if (t < 0 || count[static_cast<std::size_t>(t)] != 1) return -1;
    const int r = last[static_cast<std::size_t>(t)];
    const Node& relu = g.nodes[static_cast<std::size_t>(r)];
    if (relu.op != "Relu" || relu.in.size() != 1 || relu.out.size() != 1 || relu.out[0] < 0) return -1;
    return r;
  }
};

bool float_of(const Graph& g, int t, const Shape& s) {
  return t >= 0 && g.info(t).dtype == DType::F32 && g.info(t).shape == s;
}

// Node `first` takes the joined op's name and the Relu's output; the Relu is dropped.
void join(Graph& g, std::size_t first, int relu, const char* op, std::vector<bool>& drop) {
  Node& n = g.nodes[first];
  const Node& r = g.nodes[static_cast<std::size_t>(relu)];
  n.op = op;
  n.name += "+" + r.name;
  n.out[0] = r.out[0];
  drop[static_cast<std::size_t>(relu)] = true;
}

void remove_dropped(Graph& g, const std::vector<bool>& drop) {
  std::size_t k = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (drop[i]) continue;
    if (k != i) g.nodes[k] = std::move(g.nodes[i]);
    ++k;
  }
  g.nodes.resize(k);
}

}  // namespace

int fuse_add_relu(Graph& g) {
  const Readers readers(g);
  std::vector<bool> drop(g.nodes.size(), false);
  int joined = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    Node& add = g.nodes[i];
    if (add.op != "Add" || add.in.size() != 2 || add.out.size() != 1 || add.out[0] < 0) continue;
    const int t = add.out[0];
    const Shape& s = g.info(t).shape;
    if (g.is_const(t) || !float_of(g, add.in[0], s) || !float_of(g, add.in[1], s) || !float_of(g, t, s)) continue;
    const int r = readers.only_relu(g, t);
    if (r < 0) continue;
    join(g, i, r, "AddRelu", drop);
    add.attrs.clear();
    ++joined;
  }
  remove_dropped(g, drop);
  return joined;
}

int fuse_bn_relu(Graph& g) {
  const Readers readers(g);
  std::vector<bool> drop(g.nodes.size(), false);
  int joined = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& bn = g.nodes[i];
    if (bn.op != "BatchNormalization" || bn.in.size() < 5 || bn.out.empty() || bn.out[0] < 0) continue;
    const int t = bn.out[0];
    if (g.is_const(t) || !float_of(g, bn.in[0], g.info(t).shape) || !float_of(g, t, g.info(t).shape)) continue;
    const int r = readers.only_relu(g, t);
    if (r < 0) continue;
    join(g, i, r, "BatchNormRelu", drop);
    ++joined;
  }
  remove_dropped(g, drop);
  return joined;
}

bool fuses_add_relu(const std::string& fusion) { return fusion == "add_relu" || fusion == "add_relu+bn_relu"; }
bool fuses_bn_relu(const std::string& fusion) { return fusion == "bn_relu" || fusion == "add_relu+bn_relu"; }

}  // namespace d500
