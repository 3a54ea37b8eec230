// Planning's first stage (src/plan/stages.hpp): what the campaign says must mean something
// before anything is expanded.
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "common/text.hpp"
#include "plan/stages.hpp"
#include "rundir/layout.hpp"

namespace d500::planning {

namespace {

// The template runs jobs, and one for Slurm has a time limit to give them.
void check_template(const Plan& plan) {
  const Campaign& c = plan.campaign;
  if (plan.tmpl.launcher != "local" && plan.tmpl.launcher != "slurm")
    throw Error(c.template_where, "template '" + plan.tmpl.name + "' is for the '" + plan.tmpl.launcher +
                                      "' launcher, not for jobs (use local, slurm or daint)");
  if (plan.tmpl.launcher == "slurm" && c.slurm.time_limit_min <= 0)
    throw Error(
        c.slurm.present ? c.slurm.where : c.template_where,
        "template '" + plan.tmpl.name + "' submits to Slurm: set [slurm] time_limit (e.g. time_limit = \"00:30:00\")");
}

// Every key must mean something to at least one workload the campaign names; a key that none of
// them takes is a typo, not an unused setting.
void check_keys(const Campaign& c, const WorkloadRegistry& reg) {
  std::set<std::string> accepted;
  for (const auto& s : common_params()) accepted.insert(s.name);
  for (const auto* list : {&c.fixed, &c.axes})
    for (const auto& a : *list)
      if (a.name == "workload")
        for (const auto& v : a.values) {
          const WorkloadInfo& w = check_workload_exists(v, reg);
          for (const auto& s : w.params) accepted.insert(s.name);
        }
  const std::vector<std::string> accepted_list(accepted.begin(), accepted.end());
  for (const auto* list : {&c.fixed, &c.axes})
    for (const auto& a : *list) {
      if (!accepted.count(a.name))
        throw Error(a.where, "unknown parameter '" + a.name + "'" + did_you_mean(a.name, accepted_list) +
                                 " (the campaign's workloads take: " + join(accepted_list, ", ") + ")");
      if (a.name == "backend")
        for (const auto& v : a.values) check_backend_exists(v);
    }
}

// Exclude rules may only name axes and fixed keys, and only values those have.
void check_excludes(const Campaign& c, const KeysByName& by_name) {
  std::vector<std::string> axis_names;
  for (const auto& [n, a] : by_name) axis_names.push_back(n);
  for (const auto& r : c.excludes)
    for (const auto& m : r.match) {
      auto it = by_name.find(m.name);
      if (it == by_name.end())
        throw Error(m.where, "[[exclude]] key '" + m.name + "' is not an axis or fixed setting" +
                                 did_you_mean(m.name, axis_names) + " (have: " + join(axis_names, ", ") + ")");
      for (const auto& v : m.values) {
        bool found = false;
        std::vector<std::string> have;
        for (const auto& av : it->second->values) {
          found = found || canonical(av.value) == canonical(v.value);
          have.push_back(canonical(av.value));
        }
        if (!found)
          throw Error(v.where, "[[exclude]] value " + canonical(v.value) + " of '" + m.name +
                                   "' is not one of its values (" + join(have, ", ") + ")");
      }
    }
}

}  // namespace

namespace {
// [packing] times_from names run directories that d500 run measured: each has results/.
void check_times_from(const PackingSettings& p) {
  for (std::size_t i = 0; i < p.times_from.size(); ++i) {
    const RunLayout run(p.times_from[i]);
    if (!std::filesystem::is_directory(run.results_dir()))
      throw Error(i < p.times_from_at.size() ? p.times_from_at[i] : p.times_from_where,
                  "key 'times_from' in [packing]: " + run.root().string() + " is not a run directory (it has no " +
                      run.results_dir().filename().string() + "/); name one that d500 run measured");
  }
}
}  // namespace

KeysByName validate_campaign(const Plan& plan, const WorkloadRegistry& reg) {
  const Campaign& c = plan.campaign;
  check_template(plan);
  check_keys(c, reg);
  KeysByName by_name;
  for (const auto* list : {&c.fixed, &c.axes})
    for (const auto& a : *list) by_name[a.name] = &a;
  check_excludes(c, by_name);
  check_times_from(c.packing);
  return by_name;
}

}  // namespace d500::planning
