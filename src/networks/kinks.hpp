#pragma once
// The yardstick at a Relu's kink (validate.hpp's second opinion). A training step's gradient
// takes, at each element of a Relu's input v, the branch v > 0 or not. Where float32's error in v
// is larger than |v| itself a correct float32 step may take the other branch than the exact
// yardstick, and its gradients then differ from the exact ones by that element's whole
// contribution: ResNet-20 at batch 8 in float32 channels-last, on oneDNN and on LibTorch, erred
// 0.0078 in a batch normalisation's bias gradient (a sum of large terms of both signs) where one
// input 7e-7 from zero took the other branch. Monte Carlo arithmetic on stored values does not
// take it: it moves v by u|v|, where the step's float32 error comes from the sums before it.
//
// KinkBranches finds those elements and makes the yardstick take their other branch, over three
// kinds of runs of the double yardstick (ExecutorSpec::kinks), each through every Relu, AddRelu
// and BatchNormRelu node (the pre-activation v: Relu's input, AddRelu's sum, BatchNormRelu's
// normalised value):
//   record  (exact):  each node's candidates, the elements with 0 < |v| <= cap x RMS(v);
//   measure (with float32's rounding simulated): each node's largest move of a candidate's v;
//   flip:   the exact step with a chosen set of candidates' v negated (v -> -v: a move of 2|v|,
//           within float32's reach by the choice), so that they, and only they, take the other
//           branch, forward and back.
// An element is ambiguous when |v| <= factor x its node's largest simulated move (choose()).
// A kernel counts its forward calls: the k-th forward of a run (an executor) is micro-batch k.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "backends/graph.hpp"

namespace d500 {

class KinkBranches {
 public:
  enum class Mode { Record, Measure, Flip };
  // Candidates: 0 < |v| <= kCap x the RMS of v over the node's tensor (a node's ambiguous
  // elements are its candidates within reach, so its reach is capped there).
  static constexpr double kCap = 1e-3;

  void set_mode(Mode m) { mode_ = m; }
  // A kink node's pre-activations of one micro-batch (`node`: its index in the graph's nodes):
  // recorded, measured against the record, or, in Flip mode, the chosen ones negated, whose
  // indices it returns (ascending; empty in the other modes).
  const std::vector<std::int64_t>& pre_activations(int node, int micro, std::span<double> v);
  // Flip mode's sets: the candidates with |v| <= factor x their node's largest measured move;
  // `half` false: all of them; true: each with probability one half (a seeded choice).
  // Returns how many are chosen.
  std::int64_t choose(double factor, bool half);
  // Candidates with |v| <= factor x their node's move (choose(factor, false)'s count).
  std::int64_t ambiguous(double factor) const;
  // The elements every recorded run passed through a kink (all micro-batches).
  std::int64_t elements() const { return elements_; }
  // Of the nodes, the smallest and largest measured move relative to its tensor's RMS.
  std::pair<double, double> relative_moves() const;

 private:
  struct Record {
    std::vector<std::int64_t> at;  // indices into the node's tensor, ascending
    std::vector<double> v;         // their exact values
    std::vector<std::int64_t> flip;
    double rms = 0;
  };
  struct Node {
    std::vector<Record> micro;  // by micro-batch
    double move = 0;            // the largest |v_measured - v_exact| of a candidate
  };
  Mode mode_ = Mode::Record;
  std::map<int, Node> nodes_;
  std::int64_t elements_ = 0;
};

// The yardstick's kernel of a Relu, AddRelu or BatchNormRelu node (`k` its reference kernel in
// double, `node` its index) reporting its pre-activations to `kinks` and, in Flip mode, taking
// the other branch where kinks says; `k` itself for any other op.
std::unique_ptr<NodeKernel> with_kinks(std::unique_ptr<NodeKernel> k, const NodeProblem& p, int node,
                                       KinkBranches& kinks);

}  // namespace d500
