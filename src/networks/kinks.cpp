#include "networks/kinks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "backends/graph_ops.hpp"
#include "common/error.hpp"

namespace d500 {

const std::vector<std::int64_t>& KinkBranches::pre_activations(int node, int micro, std::span<double> v) {
  static const std::vector<std::int64_t> none;
  Node& n = nodes_[node];
  const auto m = static_cast<std::size_t>(micro);
  if (mode_ == Mode::Record) {
    if (n.micro.size() <= m) n.micro.resize(m + 1);
    Record& r = n.micro[m];
    r = Record{};
    double sq = 0;
    for (double x : v) sq += x * x;
    r.rms = std::sqrt(sq / static_cast<double>(std::max<std::size_t>(v.size(), 1)));
    const double cap = kCap * r.rms;
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] != 0 && std::abs(v[i]) <= cap) r.at.push_back(static_cast<std::int64_t>(i)), r.v.push_back(v[i]);
    elements_ += static_cast<std::int64_t>(v.size());
    return none;
  }
  if (m >= n.micro.size())
    throw Error("validation: a kink's micro-batch " + std::to_string(micro) + " was not recorded (node " +
                std::to_string(node) + ")");
  Record& r = n.micro[m];
  if (mode_ == Mode::Measure) {
    for (std::size_t k = 0; k < r.at.size(); ++k)
      n.move = std::max(n.move, std::abs(v[static_cast<std::size_t>(r.at[k])] - r.v[k]));
    return none;
  }
  for (std::int64_t i : r.flip) v[static_cast<std::size_t>(i)] = -v[static_cast<std::size_t>(i)];
  return r.flip;
}

namespace {
// A seeded coin for (node, micro-batch, element): splitmix64's finaliser.
bool heads(int node, std::size_t micro, std::int64_t at) {
  std::uint64_t z = (static_cast<std::uint64_t>(node) << 40) ^ (static_cast<std::uint64_t>(micro) << 32) ^
                    static_cast<std::uint64_t>(at);
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return ((z ^ (z >> 31)) & 1u) != 0;
}
}  // namespace

std::int64_t KinkBranches::choose(double factor, bool half) {
  std::int64_t chosen = 0;
  for (auto& [id, n] : nodes_) {
    const double reach = factor * n.move;
    for (std::size_t m = 0; m < n.micro.size(); ++m) {
      Record& r = n.micro[m];
      r.flip.clear();
      for (std::size_t k = 0; k < r.at.size(); ++k)
        if (std::abs(r.v[k]) <= reach && (!half || heads(id, m, r.at[k]))) r.flip.push_back(r.at[k]);
      chosen += static_cast<std::int64_t>(r.flip.size());
    }
  }
  return chosen;
}

std::int64_t KinkBranches::ambiguous(double factor) const {
  std::int64_t count = 0;
  for (const auto& [id, n] : nodes_)
    for (const Record& r : n.micro)
      count += std::count_if(r.v.begin(), r.v.end(), [&](double x) { return std::abs(x) <= factor * n.move; });
  return count;
}

std::pair<double, double> KinkBranches::relative_moves() const {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const auto& [id, n] : nodes_)
    if (!n.micro.empty() && n.micro[0].rms > 0) {
      const double rel = n.move / n.micro[0].rms;
      lo = std::min(lo, rel), hi = std::max(hi, rel);
    }
  return {std::isinf(lo) ? 0.0 : lo, hi};
}

namespace {

std::span<double> doubles(const TensorView& t) {
  return {static_cast<double*>(t.data), static_cast<std::size_t>(t.numel())};
}

// Relu: its input is v, negated in place where the other branch is taken; Relu's own kernel
// then computes, and its gradient tests, the nudged input. AddRelu: v = a + b, written into y
// first to be read; where the other branch is taken a becomes -a - 2b (so that a + b = -v; -a
// where a and b are one tensor), and
// AddRelu's own kernel computes from there (its gradient tests y, then positive exactly where -v
// is).
class KinkedRelu final : public NodeKernel {
 public:
  KinkedRelu(std::unique_ptr<NodeKernel> k, const NodeProblem& p, int node, KinkBranches& kinks)
      : k_(std::move(k)), p_(p), node_(node), sum_(p.node->op == "AddRelu"), kinks_(kinks) {}
  void forward() override {
    if (!sum_) {
      kinks_.pre_activations(node_, micro_++, doubles(p_.in[0]));
    } else {
      auto* a = static_cast<double*>(p_.in[0].data);
      const auto* b = static_cast<const double*>(p_.in[1].data);
      const std::span<double> v = doubles(p_.out[0]);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = a[i] + b[i];
      const bool same = static_cast<const void*>(a) == static_cast<const void*>(b);  // Add(x, x): 2x
      for (std::int64_t i : kinks_.pre_activations(node_, micro_++, v)) a[i] = same ? -a[i] : -a[i] - 2 * b[i];
    }
    k_->forward();
  }
  void backward() override { k_->backward(); }
  void constants_changed() override { k_->constants_changed(); }
  std::string impl() const override { return k_->impl() + ", kink branches"; }

 private:
  std::unique_ptr<NodeKernel> k_;
  NodeProblem p_;
  int node_, micro_ = 0;
  bool sum_;  // AddRelu
  KinkBranches& kinks_;
};

// BatchNormRelu: its normalisation computed apart (the reference BatchNormalization kernel,
// writing v into y), v reported (and negated where the other branch is taken), then Relu in
// place; backward, dy where y > 0 into a gradient of v the normalisation's backward reads.
class KinkedBatchNormRelu final : public NodeKernel {
 public:
  KinkedBatchNormRelu(const NodeProblem& p, int node, KinkBranches& kinks)
      : bn_node_(*p.node), p_(p), node_(node), kinks_(kinks) {
    bn_node_.op = "BatchNormalization";
    NodeProblem inner = p;
    inner.node = &bn_node_;
    if (!inner.dout.empty() && inner.dout[0].present()) {
      dv_.resize(static_cast<std::size_t>(p.out[0].numel()));
      inner.dout[0].data = dv_.data();
    }
    bn_ = make_reference_node_kernel(inner, true);
  }
  void forward() override {
    bn_->forward();
    const std::span<double> v = doubles(p_.out[0]);
    kinks_.pre_activations(node_, micro_++, v);
    for (double& x : v) x = x > 0 ? x : 0;
  }
  void backward() override {
    if (!dv_.empty()) {
      const auto* y = static_cast<const double*>(p_.out[0].data);
      const auto* dy = static_cast<const double*>(p_.dout[0].data);
      for (std::size_t i = 0; i < dv_.size(); ++i) dv_[i] = y[i] > 0 ? dy[i] : 0;
    }
    bn_->backward();
  }
  void constants_changed() override { bn_->constants_changed(); }
  std::string impl() const override { return bn_->impl() + " then Relu, kink branches"; }

 private:
  Node bn_node_;
  NodeProblem p_;
  int node_, micro_ = 0;
  KinkBranches& kinks_;
  std::vector<double> dv_;
  std::unique_ptr<NodeKernel> bn_;
};

}  // namespace

std::unique_ptr<NodeKernel> with_kinks(std::unique_ptr<NodeKernel> k, const NodeProblem& p, int node,
                                       KinkBranches& kinks) {
  const std::string& op = p.node->op;
  if (!p.training) return k;  // an inference's outputs are continuous at a kink
  if (op == "Relu" || op == "AddRelu") return std::make_unique<KinkedRelu>(std::move(k), p, node, kinks);
  if (op == "BatchNormRelu") return std::make_unique<KinkedBatchNormRelu>(p, node, kinks);
  return k;
}

}  // namespace d500
