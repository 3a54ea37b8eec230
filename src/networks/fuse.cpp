#include "networks/fuse.hpp"

#include <algorithm>
#include <vector>

namespace d500 {

int fuse_add_relu(Graph& g) {
  const std::size_t nt = g.tensors.size();
  std::vector<int> readers(nt, 0), reader(nt, -1);
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    for (int t : g.nodes[i].in)
      if (t >= 0) ++readers[static_cast<std::size_t>(t)], reader[static_cast<std::size_t>(t)] = static_cast<int>(i);
  for (int t : g.outputs) readers[static_cast<std::size_t>(t)] += 2;  // an output stays
  auto float_of = [&](int t, const Shape& s) {
    return t >= 0 && g.info(t).dtype == DType::F32 && g.info(t).shape == s;
  };

  std::vector<bool> drop(g.nodes.size(), false);
  int joined = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    Node& add = g.nodes[i];
    if (add.op != "Add" || add.in.size() != 2 || add.out.size() != 1 || add.out[0] < 0) continue;
    const int t = add.out[0];
    const Shape& s = g.info(t).shape;
    if (g.is_const(t) || !float_of(add.in[0], s) || !float_of(add.in[1], s) || !float_of(t, s)) continue;
    if (readers[static_cast<std::size_t>(t)] != 1) continue;
    const auto r = static_cast<std::size_t>(reader[static_cast<std::size_t>(t)]);
    const Node& relu = g.nodes[r];
    if (relu.op != "Relu" || relu.in.size() != 1 || relu.out.size() != 1 || relu.out[0] < 0) continue;
    add.op = "AddRelu";
    add.name += "+" + relu.name;
    add.out = relu.out;
    add.attrs.clear();
    drop[r] = true;
    ++joined;
  }
  std::size_t k = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (drop[i]) continue;
    if (k != i) g.nodes[k] = std::move(g.nodes[i]);
    ++k;
  }
  g.nodes.resize(k);
  return joined;
}

bool fuses_add_relu(const std::string& fusion) { return fusion == "add_relu"; }

}  // namespace d500
