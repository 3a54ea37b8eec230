#include "workloads/registry.hpp"

namespace d500 {

// Each workload file defines one registration function; this list is the only place that
// names them all.
void register_gemm(WorkloadRegistry& r);
void register_collectives(WorkloadRegistry& r);

const WorkloadRegistry& builtin_workloads() {
  static const WorkloadRegistry registry = [] {
    WorkloadRegistry r;
    register_gemm(r);
    register_collectives(r);
    return r;
  }();
  return registry;
}

}  // namespace d500
