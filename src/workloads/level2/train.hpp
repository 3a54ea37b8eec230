#pragma once
// Level 2's workload, `train` (train.cpp): a network trained on a dataset with an optimizer until
// a step count, a target test accuracy or a training-time budget, its steps timed by phase and its
// test accuracy recorded as events. Exposed for tests and benchmarks.
#include <memory>
#include <string>
#include <vector>

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

// The optimizer's view of a runner's parameters, or of a shadow copy with the runner's gradients.
// (The train workload's own, and d500-bench-train's bare loop's.)
class RunnerParams final : public ParamAccess {
 public:
  RunnerParams(GraphRunner& r, const Graph& g, const std::vector<int>& params) : r_(r) {
    for (int t : params) numel_.push_back(d500::numel(g.info(t).shape));
  }
  std::size_t count() const override { return numel_.size(); }
  float* data(std::size_t k) override { return shadow_ ? (*shadow_)[k].data() : r_.parameter(k); }
  const float* grad(std::size_t k) override { return r_.parameter_gradient(k); }
  std::int64_t numel(std::size_t k) const override { return numel_[k]; }
  void changed() override {
    if (!shadow_) r_.parameters_changed();
  }
  void shadow(std::vector<std::vector<float>>* s) { shadow_ = s; }

 private:
  GraphRunner& r_;
  std::vector<std::int64_t> numel_;
  std::vector<std::vector<float>>* shadow_ = nullptr;
};

// Datasets are read once per process for the points (and plan-time checks) that share them.
std::shared_ptr<Dataset> shared_dataset(const DatasetRequest& r);

}  // namespace d500
