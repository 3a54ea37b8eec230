#pragma once
// The networks built into d500, written as ONNX models with the ONNX protobuf API (no downloads)
// and loaded through the same path as a user's .onnx file. Weights are seeded (He-uniform for
// convolutions and matrices), fixed per network, so that every run of a network computes on the
// same model; a point's seed drives its input data.
#include <cstdint>
#include <string>
#include <vector>

#include "backends/graph.hpp"
#include "networks/onnx.hpp"

namespace d500 {

struct BuiltinNetwork {
  std::string name, description;
  std::string input;  // the data input in words: "[N,3,224,224] float32 images"
  int classes = 0;
};

const std::vector<BuiltinNetwork>& builtin_networks();
const BuiltinNetwork* find_builtin_network(const std::string& name);

// The serialized ONNX model (batch axis symbolic, "N").
std::string builtin_network_onnx(const std::string& name);
// The network as a graph, at `batch` (the ONNX model built and loaded in memory).
Graph load_builtin_network(const std::string& name, const LoadOptions& opt, ModelFacts* facts = nullptr);

// Loads a point's `network`: a built-in name, or the path of an .onnx file.
Graph load_network(const std::string& network, const LoadOptions& opt, ModelFacts* facts = nullptr);

// The work of one pass over a graph at its batch: forward, and a training step (forward and the
// backward passes of the nodes that need one, towards the parameters of `loss`).
struct GraphWork {
  double forward_flops = 0, training_flops = 0;
};
GraphWork graph_work(const Graph& g, int loss);

// What `d500 networks` prints of a graph loaded at batch 1.
struct NetworkFacts {
  std::int64_t params = 0;        // trainable weights' elements (BatchNormalization statistics excluded)
  std::int64_t weight_bytes = 0;  // every constant the model holds
  double forward_flops = 0;       // per sample
  double training_flops = 0;      // per sample, forward and backward, with the loss d500 appends
  int nodes = 0;
  std::vector<std::string> ops;  // operator types, sorted
};
NetworkFacts network_facts(const Graph& g_at_batch_1);

}  // namespace d500
