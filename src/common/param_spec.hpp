#pragma once
// A campaign key as something declares it: a workload (its parameters, workloads/registry.hpp)
// or a backend (its settings, backends/settings.hpp). The planner checks every value against it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/value.hpp"

namespace d500 {

struct ParamSpec {
  std::string name;
  ValueType type;
  std::optional<Value> dflt;         // nullopt: required
  std::int64_t min = 0, max = 0;     // for integers, when min < max
  std::vector<std::string> choices;  // for strings, when not empty
  std::string help;
  // What an unset ("") string stands for where it is one value under another name (gemm's and
  // conv2d's dtype: "fp32"): the results file records it (`unset.<name>`) and the report shows it.
  std::string unset_means{};
};

}  // namespace d500
