#include "workloads/registry.hpp"

#include "backends/kernel.hpp"
#include "backends/registry.hpp"
#include "backends/settings.hpp"
#include "common/mpi_check.hpp"

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
      {"launch",
       ValueType::Int,
       std::nullopt,
       1,
       100,
       {},
       "which launch of a replicated campaign (set by launches = k in [campaign])"},
  };
  return list;
}

std::vector<std::pair<std::string, std::string>> unset_meanings(const WorkloadInfo& w, const Params& p) {
  auto out = unset_settings(p, w.name);
  for (const auto& spec : w.params)
    if (auto it = p.find(spec.name); !spec.unset_means.empty() && it != p.end() && is_unset(it->second))
      out.emplace_back(spec.name, spec.unset_means);
  return out;
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

std::vector<std::pair<std::string, Value>> device_memory_attributes(MPI_Comm comm, std::int64_t mine) {
  // Every rank runs the same kernel: a host kernel's -1 is every rank's, and needs no exchange.
  if (mine < 0) return {};
  long long most = mine;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_LONG_LONG, MPI_MAX, comm), "MPI_Allreduce", "device memory");
  return {
      {"device.peak_memory_bytes", static_cast<std::int64_t>(most)},
      {"device.peak_memory_method",
       std::string(
           "the largest over ranks of the device memory in use (cudaMemGetInfo: total - free) after the last repetition, "
           "beyond the use before the kernel's setup with its context made: the kernel's buffers and its libraries' handles "
           "and workspaces (allocated at setup, nothing freed before the end); device-wide, so another process on the "
           "same device counts too; the driver's allocation granularity; a library's code loaded on first use counts in "
           "the job's first point on it")}};
}

std::vector<std::pair<std::string, Value>> executor_peak_attributes(const BackendInfo& b, const Params& p,
                                                                    bool on_device) {
  if (!on_device || !b.device_peak) return {};
  return b.device_peak(point_math(p));
}

}  // namespace d500
