#pragma once
// Level 1's workload, `network` (network.cpp), and what it loads: exposed for tests and
// benchmarks, which run the same networks as a campaign does.
#include <memory>
#include <string>
#include <vector>

#include "backends/graph.hpp"
#include "networks/builtin.hpp"
#include "networks/prepare.hpp"
#include "networks/validate.hpp"
#include "workloads/registry.hpp"

namespace d500 {

// A network as a point runs it: loaded at one batch (the micro-batch when micro-batching), with
// the training loss appended for the training pass.
struct LoadedNetwork {
  Graph graph;
  ModelFacts facts;
  TrainingLoss loss;        // loss.loss < 0: inference
  std::vector<int> params;  // training: the weights that get gradients
  GraphWork work;
  ToleranceBasis tolerance;
  std::string model_hash;  // FNV-1a of a model file's bytes, "built-in" for d500's own
  int fused_add_relu = 0;  // Add+Relu pairs joined into AddRelu nodes (the point's fusion: add_relu)
  int fused_bn_relu = 0;   // BatchNormalization+Relu pairs joined into BatchNormRelu nodes (bn_relu)
  int joined() const { return fused_add_relu + fused_bn_relu; }  // nodes the rewrites removed
};
// Loaded once per (network, batch, pass, fusion) for the points and plan-time checks that share it.
// `weights` false: a built-in network's weights are 0 (LoadOptions::weights), for the planner's
// checks and estimates, which read shapes and sizes only; never run such a graph. `fusion`: the
// point's (networks/fuse.hpp's fuses_add_relu, fuses_bn_relu); the work and the validation tolerance are the
// unfused graph's, whose arithmetic the fused one repeats.
std::shared_ptr<const LoadedNetwork> load_point_network(const std::string& network, std::int64_t batch, bool training,
                                                        bool weights = true, const std::string& fusion = "");

// What a loaded network's tensors take at its batch: constants (weights), every other tensor
// (activations), the graph inputs, the trainable parameters; and the planner's figure from a
// byte count (saturating at int64's range).
struct NetworkBytes {
  double weights = 0, activations = 0, inputs = 0, params = 0;
};
NetworkBytes network_bytes(const LoadedNetwork& n);
std::int64_t memory_figure(double bytes);

// A point's `network` as jobs see it: a model file by its absolute path (jobs run elsewhere than
// `d500 plan`); built-in names unchanged.
void absolute_network_path(std::string& network);

class GraphExecutor;
// The executor's steps that ran on d500's reference (the backend has no kernel for them; on a
// device, through host mirrors) in its graph g as a point's attributes: executor.reference_fallback_steps, and
// executor.reference_fallback_ops, their operators each once in schedule order ("" when none).
std::vector<std::pair<std::string, Value>> fallback_attributes(const GraphExecutor& e, const Graph& g);

void register_network(WorkloadRegistry& r);

}  // namespace d500
