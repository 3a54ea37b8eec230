#include "workloads/registry.hpp"

namespace d500 {

const std::vector<ParamSpec>& common_params() {
  static const std::vector<ParamSpec> list = {
      {"workload", ValueType::String, std::nullopt, 0, 0, {}, "what to run (see `d500 workloads`)"},
      {"backend", ValueType::String, std::nullopt, 0, 0, {}, "which framework runs it (see `d500 backends`)"},
      {"nodes", ValueType::Int, Value{std::int64_t{1}}, 1, 100000, {}, "nodes of the job"},
      {"ranks_per_node", ValueType::Int, Value{std::int64_t{1}}, 1, 1024, {}, "MPI ranks per node"},
      {"seed", ValueType::Int, Value{std::int64_t{1}}, 0, std::int64_t{1} << 62, {}, "seed of the random inputs"},
      // Set by d500 from [campaign] launches (no default: absent from a campaign without it,
      // so its points keep their ids).
      {"launch", ValueType::Int, std::nullopt, 1, 100, {}, "which launch of a replicated campaign (set by launches = k in [campaign])"},
  };
  return list;
}

void WorkloadRegistry::add(WorkloadInfo info) { list_.push_back(std::move(info)); }

const WorkloadInfo* WorkloadRegistry::find(const std::string& name) const {
  for (const auto& w : list_)
    if (w.name == name) return &w;
  return nullptr;
}

std::vector<std::string> WorkloadRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& w : list_) out.push_back(w.name);
  return out;
}

}  // namespace d500
