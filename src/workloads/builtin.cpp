#include "workloads/level0/operator.hpp"
#include "workloads/registry.hpp"

namespace d500 {

// Each workload file defines one registration function; this list is the only place that
// names them all.
void register_collectives(WorkloadRegistry& r);
void register_network(WorkloadRegistry& r);
void register_train(WorkloadRegistry& r);
OperatorDef gemm_operator();
OperatorDef conv2d_operator();
OperatorDef pool2d_operator();
OperatorDef batchnorm_operator();
OperatorDef relu_operator();
OperatorDef softmax_operator();

const std::vector<OperatorDef>& builtin_operators() {
  static const std::vector<OperatorDef> list = {gemm_operator(),      conv2d_operator(), pool2d_operator(),
                                                batchnorm_operator(), relu_operator(),   softmax_operator()};
  return list;
}

const OperatorDef* find_operator(const std::string& name) {
  for (const auto& d : builtin_operators())
    if (d.info.name == name) return &d;
  return nullptr;
}

const WorkloadRegistry& builtin_workloads() {
  static const WorkloadRegistry registry = [] {
    WorkloadRegistry r;
    for (const auto& d : builtin_operators()) register_operator(r, d);
    register_collectives(r);
    register_network(r);
    register_train(r);
    return r;
  }();
  return registry;
}

}  // namespace d500
