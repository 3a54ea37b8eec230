#pragma once
// Level 2's workload, `train` (train.cpp): a network trained on a dataset with an optimizer until
// a step count, a target test accuracy or a training-time budget, its steps timed by phase and its
// test accuracy recorded as events. Exposed for tests and benchmarks.
#include <memory>
#include <string>

#include "backends/optimizer.hpp"
#include "common/value.hpp"
#include "training/data.hpp"
#include "workloads/level1/network.hpp"
#include "workloads/registry.hpp"

namespace d500 {

void register_train(WorkloadRegistry& r);

// A training step's runner spec over `g` (the point's copy of n.graph, with its own weights):
// n's loss and trainable parameters, the data in `inputs`, one micro-batch.
RunnerSpec training_spec(const Graph& g, const LoadedNetwork& n, const InputData& inputs, int threads);

// A point's optimizer from its parameters (optimizer, lr, momentum, ...).
OptimizerSpec optimizer_spec(const Params& p, std::int64_t total_steps);

// Datasets are read once per process for the points (and plan-time checks) that share them.
std::shared_ptr<Dataset> shared_dataset(const DatasetRequest& r);

}  // namespace d500
