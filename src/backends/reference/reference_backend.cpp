// The `reference` backend: plain C++ loops, the truth that validation compares against. Its
// kernels are the operators' own reference code (OperatorDef::ref_float, in workloads/level0),
// so it registers no kernel source here; every operator runs on it.
#include "backends/registry.hpp"

#include <cstdint>
#include <string>

namespace d500 {

void register_backend_reference(BackendRegistry& r) {
  r.add({.name = "reference",
         .description = "plain C++ loops: the truth that validation compares against",
         .reference = true,
         .version = [] { return std::string("d500 built-in"); },
         .check_point =
             [](const Params& p) {
               const auto t = p.find("threads");
               return t != p.end() && std::holds_alternative<std::int64_t>(t->second) &&
                              std::get<std::int64_t>(t->second) != 1
                          ? std::string("the reference backend is single-threaded: threads must be 1")
                          : std::string();
             }});
}

}  // namespace d500
