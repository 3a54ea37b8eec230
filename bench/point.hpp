#pragma once
// What the benchmark programs start a point from: the workload's defaults on one rank of one
// node, seed 1, as the planner would fill them before a campaign's own values.
#include <cstdint>
#include <string>

#include "common/value.hpp"
#include "workloads/registry.hpp"

namespace d500 {

inline Params default_point(const WorkloadInfo& w, const std::string& backend) {
  Params p{{"workload", w.name},
           {"backend", backend},
           {"seed", std::int64_t{1}},
           {"nodes", std::int64_t{1}},
           {"ranks_per_node", std::int64_t{1}}};
  for (const auto& s : w.params)
    if (s.dflt) p[s.name] = *s.dflt;
  return p;
}

}  // namespace d500
