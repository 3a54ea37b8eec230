#pragma once
// Making a loaded network runnable as a point: the loss of a training step, and seeded inputs.
#include <cstdint>
#include <string>
#include <vector>

#include "backends/graph.hpp"

namespace d500 {

struct TrainingLoss {
  int loss = -1;                 // the scalar float tensor whose gradient is 1
  int labels = -1, target = -1;  // inputs d500 added for it (-1: none)
  std::string description;       // for the point's record: which loss, on which output
};

// Gives `g` the loss of a training step, as its last output: the model's own when an output is
// a float scalar; else softmax cross-entropy of a [N, C] output against seeded labels (a new int64
// input, "d500_labels"); else the mean squared error of the first output against a seeded
// target ("d500_target").
TrainingLoss add_training_loss(Graph& g);

// Seeded data for every input of `g`, `micro_batches` of them one after another: float inputs
// uniform in [-1, 1); integer inputs used as Gather indices or as a loss's labels uniform over
// their valid range. Throws for an input d500 cannot make sensible data for.
struct InputData {
  std::vector<std::vector<std::byte>> bytes;  // per graph input
  std::vector<const void*> pointers() const;
  std::vector<std::string> descriptions;  // "image [8,3,224,224] float32 uniform in [-1, 1)"
};
InputData make_inputs(const Graph& g, int micro_batches, std::uint64_t seed);

// Training from scratch (level 2): new weights for `params` from `seed`. Every parameter of two or
// more dimensions is drawn He-uniform, U(-sqrt(6 / fan_in), sqrt(6 / fan_in)), with fan_in its
// elements per output (Conv [out, in, kh, kw], Gemm with transB: in x kh x kw; MatMul's and Gemm's
// untransposed [in, out]: in); one-dimensional ones (biases, normalisation scales and shifts)
// keep the model's values. Returns the rule in words.
std::string seeded_weights(Graph& g, const std::vector<int>& params, std::uint64_t seed);

}  // namespace d500
