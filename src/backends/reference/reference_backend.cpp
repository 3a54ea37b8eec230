// The `reference` backend: plain C++ loops, the truth that validation compares against. Its
// kernels are the operators' own reference code (OperatorDef::ref_float, in workloads/level0),
// so it registers no kernel source here; every operator runs on it.
#include "backends/registry.hpp"

namespace d500 {

void register_backend_reference(BackendRegistry& r) {
  r.add({.name = "reference",
         .description = "plain C++ loops: the truth that validation compares against",
         .version = [] { return std::string("d500 built-in"); }});
}

}  // namespace d500
