#include "plan/plan.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>
#include <optional>
#include <set>
#include <utility>
#include <toml++/toml.h>
#include <sstream>

#include "backends/registry.hpp"
#include "common/parallel.hpp"
#include "common/text.hpp"
#include "d500/version.hpp"
#include "plan/jobspec.hpp"
#include "plan/packing.hpp"
#include "plan/sbatch.hpp"
#include "plan/template.hpp"
#include "rundir/layout.hpp"

namespace fs = std::filesystem;

namespace d500 {

namespace {
// A line of /proc/meminfo ("MemTotal:"), in bytes; 0 when absent.
std::int64_t meminfo_bytes(const std::string& wanted) {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::int64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == wanted) return kib * 1024;
  return 0;
}
}  // namespace

std::int64_t host_memory_bytes() { return meminfo_bytes("MemTotal:"); }
std::int64_t available_memory_bytes() { return meminfo_bytes("MemAvailable:"); }


int host_cpus() { return static_cast<int>(rank_cores()); }

namespace {
// Threads for planning's work of `items` (combinations, files): the CPUs this process may use,
// at most 8 (past that, the calling thread's own share bounds the gain); one below `worth_from`.
unsigned planning_threads(std::uint64_t items, std::uint64_t worth_from) {
  return items < worth_from ? 1u : static_cast<unsigned>(std::min<std::int64_t>(8, rank_cores()));
}
}  // namespace

std::string templates_dir() {
  if (const char* env = std::getenv("D500_TEMPLATES")) return env;
  // An installed d500 (cmake --install) has them in share/d500/templates beside its bin/.
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = self.parent_path().parent_path() / "share" / "d500" / "templates";
    if (fs::is_directory(installed, ec)) return installed.string();
  }
  return std::string(D500_SOURCE_DIR) + "/templates";
}

TemplateInfo load_template(const std::string& name, const Location& where, const std::string& user_dir) {
  TemplateInfo t;
  t.name = name;
  // The user's directory first (named in the campaign, reported in the plan), then d500's own.
  std::vector<std::string> dirs;
  if (!user_dir.empty()) dirs.push_back(user_dir);
  dirs.push_back(templates_dir());
  for (const auto& d : dirs) {
    const std::string candidate = d + "/" + name + ".sh.in";
    if (fs::is_regular_file(candidate)) {
      t.path = candidate;
      break;
    }
  }
  if (t.path.empty()) {
    std::set<std::string> have;
    for (const auto& d : dirs)
      if (fs::is_directory(d))
        for (const auto& e : fs::directory_iterator(d)) {
          std::string f = e.path().filename().string();
          if (f.size() > 6 && f.ends_with(".sh.in")) have.insert(f.substr(0, f.size() - 6));
        }
    std::vector<std::string> names(have.begin(), have.end());
    throw Error(where, "key 'template': no template '" + name + "' in " + join(dirs, " or ") + did_you_mean(name, names) +
                           " (available: " + join(names, ", ") + ")");
  }
  t.text = read_file(t.path);
  std::istringstream in(t.text);
  for (std::string line; std::getline(in, line);) {
    auto pos = line.find("# d500: launcher=");
    if (pos != std::string::npos) t.launcher = line.substr(pos + 17);
  }
  if (t.launcher.empty())
    throw Error(Location{t.path, 1, 1}, "template lacks a '# d500: launcher=local|slurm' line");
  check_placeholder_contexts(t.text, t.path);  // also for a dry run, which renders nothing
  // What its #SBATCH lines ask must reach the job description `d500 submit` makes.
  if (t.launcher == "slurm") parse_sbatch_lines(t.text, t.path);
  return t;
}

namespace {

using Raw = std::map<std::string, const LocatedValue*>;

// Converts and range-checks one value against its spec.
Value checked(const ParamSpec& spec, const LocatedValue& lv, const std::string& workload) {
  Value v = lv.value;
  if (spec.type == ValueType::Real && type_of(v) == ValueType::Int)
    v = static_cast<double>(std::get<std::int64_t>(v));
  if (type_of(v) != spec.type)
    throw Error(lv.where, "key '" + spec.name + "' (" + workload + "): expected " + type_name(spec.type) +
                              ", got " + type_name(type_of(lv.value)) + " " + canonical(lv.value));
  if (spec.type == ValueType::Int && spec.min < spec.max) {
    auto i = std::get<std::int64_t>(v);
    if (i < spec.min || i > spec.max)
      throw Error(lv.where, "key '" + spec.name + "' is " + std::to_string(i) + "; valid for " + workload +
                                ": " + std::to_string(spec.min) + " to " + std::to_string(spec.max));
  }
  if (spec.type == ValueType::String && !spec.choices.empty()) {
    const auto& s = std::get<std::string>(v);
    if (std::find(spec.choices.begin(), spec.choices.end(), s) == spec.choices.end())
      throw Error(lv.where, "key '" + spec.name + "' is " + quote_value(s) + did_you_mean(s, spec.choices) +
                                " (valid: " + join(spec.choices, ", ") + ")");
  }
  return v;
}

void check_backend_exists(const LocatedValue& lv) {
  if (type_of(lv.value) != ValueType::String)
    throw Error(lv.where, "key 'backend': expected a string, got " + canonical(lv.value));
  const std::string& name = std::get<std::string>(lv.value);
  const BackendInfo* b = find_backend(name);
  if (!b) {
    std::vector<std::string> known;
    for (const auto& x : all_backends()) known.push_back(x.name);
    throw Error(lv.where, "key 'backend': unknown backend '" + name + "'" + did_you_mean(name, known) +
                              " (this build has: " + join(built_backend_names(), ", ") + ")");
  }
  if (!b->built)
    throw Error(lv.where, "key 'backend': backend '" + name + "' is not available in this build: " +
                              b->not_built_reason + " (this build has: " + join(built_backend_names(), ", ") +
                              ")");
  if (const std::string why = load_backend(name); !why.empty()) {
    // What to do depends on the loader's words: a library not found, or no room to map it.
    const bool no_room = why.find("failed to map") != std::string::npos || why.find("cannot map") != std::string::npos ||
                         why.find("Cannot allocate memory") != std::string::npos;
    const std::string hint = no_room
                                 ? "this process's address space is too small for its libraries: raise the limit (ulimit -v; "
                                   "they map about 0.5 GB)"
                                 : "its libraries must be found at run time as at build time: LD_LIBRARY_PATH or the site's "
                                   "environment modules";
    throw Error(lv.where, "key 'backend': backend '" + name + "' is in this build, in module " + b->module +
                              ", which did not load here: " + why + " (" + hint + ")");
  }
}

const WorkloadInfo& check_workload_exists(const LocatedValue& lv, const WorkloadRegistry& reg) {
  if (type_of(lv.value) != ValueType::String)
    throw Error(lv.where, "key 'workload': expected a string, got " + canonical(lv.value));
  const std::string& name = std::get<std::string>(lv.value);
  const WorkloadInfo* w = reg.find(name);
  if (!w)
    throw Error(lv.where, "key 'workload': unknown workload '" + name + "'" + did_you_mean(name, reg.names()) +
                              " (available: " + join(reg.names(), ", ") + ")");
  return *w;
}

// What one combination of the axes resolves to: complete parameters (defaults filled,
// normalised, checked), its canonical text and its workload.
struct Resolved {
  Params params;
  std::string canonical;
  const WorkloadInfo* workload = nullptr;
  const Location* where = nullptr;  // where its workload value was written
};

Resolved resolve(const Raw& raw, const WorkloadRegistry& reg, const Campaign& c) {
  auto wit = raw.find("workload");
  if (wit == raw.end())
    throw Error(Location{c.path, 1, 1}, "no workload: set 'workload' in [fixed] or [axes] (available: " +
                                            join(reg.names(), ", ") + ")");
  const WorkloadInfo& w = check_workload_exists(*wit->second, reg);
  auto bit = raw.find("backend");
  if (bit == raw.end())
    throw Error(Location{c.path, 1, 1}, "no backend: set 'backend' in [fixed] or [axes] (this build has: " +
                                            join(built_backend_names(), ", ") + ")");
  check_backend_exists(*bit->second);
  const std::string& backend = std::get<std::string>(bit->second->value);

  Resolved r;
  r.workload = &w;
  r.where = &wit->second->where;
  auto take = [&](const ParamSpec& spec) {
    auto it = raw.find(spec.name);
    if (it != raw.end()) r.params.emplace(spec.name, checked(spec, *it->second, w.name));
    else if (spec.dflt) r.params.emplace(spec.name, *spec.dflt);
    else
      throw Error(*r.where, "workload '" + w.name + "' needs parameter '" + spec.name + "' (" + spec.help +
                                "): set it in [fixed] or [axes]");
  };
  for (const auto& spec : common_params())
    if (spec.name != "launch" || raw.count("launch")) take(spec);
  for (const auto& spec : w.params) take(spec);

  if (!w.backends.count(backend)) {
    std::vector<std::string> impl;
    for (const auto& [b, f] : w.backends) impl.push_back(b);
    throw Error(bit->second->where,
                "impossible combination: workload '" + w.name + "' does not run on backend '" + backend +
                    "' (it runs on: " + join(impl, ", ") + "); drop it with [[exclude]] workload = \"" +
                    w.name + "\", backend = \"" + backend + "\"");
  }
  if (w.normalize) w.normalize(r.params);
  r.canonical = canonical_point(r.params);
  if (w.check) {
    std::string why = w.check(r.params);
    if (!why.empty()) {
      // A reason that begins with a key the campaign wrote ("'math' is only for ...") points at
      // that key's line; any other at the workload's.
      const Location* at = r.where;
      if (why.size() > 2 && why[0] == '\'')
        if (const auto k = raw.find(why.substr(1, why.find('\'', 1) - 1)); k != raw.end()) at = &k->second->where;
      throw Error(*at, "point " + r.canonical + ": " + why);
    }
  }
  return r;
}

// The integer size the campaign gave whose doubling grows a point's memory estimate most: the
// key to name when a point is too big ("" when none does).
std::string memory_driver(const Resolved& r, const Raw& raw, std::int64_t bytes) {
  std::vector<std::pair<std::string, std::int64_t>> sizes;  // a rank count or a seed adds no data per rank
  for (const auto& [name, value] : r.params)
    if (raw.count(name) && std::holds_alternative<std::int64_t>(value) && name != "seed" && name != "ranks_per_node" &&
        name != "nodes")
      sizes.emplace_back(name, std::get<std::int64_t>(value));
  std::string best;
  std::int64_t grown = bytes;
  for (const auto& [name, value] : sizes) {
    Params twice = r.params;
    twice[name] = Value{2 * value};
    std::int64_t b = 0;
    try {
      b = r.workload->memory_bytes(twice);
    } catch (const std::exception&) {
      continue;
    }
    if (b > grown) grown = b, best = name;
  }
  if (best.empty() && bytes == std::numeric_limits<std::int64_t>::max()) {
    // Beyond 64 bits, doubling shows nothing: name the largest size the campaign gave.
    std::int64_t largest = 0;
    for (const auto& [name, value] : sizes)
      if (value > largest) largest = value, best = name;
  }
  return best;
}

// A set of 64-bit point ids: open addressing with linear probing in a power-of-two table kept
// at most half full, one cache line per lookup (std::unordered_set's node per id cost a tenth
// of planning 10^6 points). Ids are FNV-1a hashes, so their low bits are well spread.
class IdSet {
 public:
  explicit IdSet(std::size_t expected) {
    std::size_t n = 16;
    while (n < 2 * expected) n *= 2;
    slots_.assign(n, 0);
  }
  // True when `id` was not in the set (and is now).
  bool insert(std::uint64_t id) {
    if (id == 0) return !std::exchange(has_zero_, true);  // 0 marks an empty slot
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t i = id & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i] == id) return false;
      if (slots_[i] == 0) {
        slots_[i] = id;
        ++size_;
        return true;
      }
    }
  }

 private:
  void grow() {
    std::vector<std::uint64_t> old(2 * slots_.size(), 0);
    old.swap(slots_);
    size_ = 0;
    for (auto id : old)
      if (id) insert(id);
  }
  std::vector<std::uint64_t> slots_;
  std::size_t size_ = 0;
  bool has_zero_ = false;
};

// The product of a plan's dimensions, walked by combination: one Raw map (fixed values and the
// current value of every axis) whose axis entries are re-pointed per combination, so that
// walking 10^6 combinations allocates nothing per combination.
struct Product {
  std::vector<std::vector<const Axis*>> dims;
  std::vector<std::uint64_t> stride;  // combination = sum idx[d] * stride[d]
  std::uint64_t size = 1;
  Raw raw;
  std::vector<std::vector<const LocatedValue**>> slots;  // per dimension, per axis: its entry in raw

  Product(const Campaign& c, const std::vector<std::vector<std::size_t>>& dim_axes) {
    for (const auto& a : c.fixed) raw[a.name] = &a.values.front();
    for (const auto& d : dim_axes) {
      dims.emplace_back();
      slots.emplace_back();
      for (auto i : d) {
        dims.back().push_back(&c.axes[i]);
        slots.back().push_back(&raw[c.axes[i].name]);
      }
    }
    stride.assign(dims.size(), 1);
    for (std::size_t d = dims.size(); d-- > 0;) {
      stride[d] = size;
      size *= dims[d].front()->values.size();
    }
  }
  std::size_t extent(std::size_t d) const { return dims[d].front()->values.size(); }
  void set(const std::vector<std::size_t>& idx) {
    for (std::size_t d = 0; d < dims.size(); ++d)
      for (std::size_t k = 0; k < dims[d].size(); ++k) *slots[d][k] = &dims[d][k]->values[idx[d]];
  }
  void set(std::uint64_t combination) {
    std::vector<std::size_t> idx(dims.size());
    for (std::size_t d = 0; d < dims.size(); ++d) idx[d] = static_cast<std::size_t>(combination / stride[d] % extent(d));
    set(idx);
  }
};

// A string value ending in "/*" in [axes] ("resnet50/*") stands for every choice of that
// parameter starting with what precedes the '*', in the workload's order: a named shape set.
Campaign expand_sets(const Campaign& in, const WorkloadRegistry& reg) {
  Campaign c = in;
  std::map<std::string, std::vector<std::string>> choices;  // parameter -> choices, over the named workloads
  for (const auto* list : {&c.fixed, &c.axes})
    for (const auto& a : *list)
      if (a.name == "workload")
        for (const auto& v : a.values)
          if (const WorkloadInfo* w = type_of(v.value) == ValueType::String ? reg.find(std::get<std::string>(v.value)) : nullptr)
            for (const auto& spec : w->params)
              for (const auto& ch : spec.choices)
                if (std::find(choices[spec.name].begin(), choices[spec.name].end(), ch) == choices[spec.name].end())
                  choices[spec.name].push_back(ch);
  auto is_set = [](const LocatedValue& v) {
    return type_of(v.value) == ValueType::String && std::get<std::string>(v.value).size() > 1 &&
           std::get<std::string>(v.value).ends_with("/*");
  };
  for (const auto& a : c.fixed)
    if (is_set(a.values.front()) && choices.count(a.name))
      throw Error(a.values.front().where, "key '" + a.name + "': a set (\"" + std::get<std::string>(a.values.front().value) +
                                              "\") stands for several values: put it in [axes]");
  std::set<std::string> zipped;
  for (const auto& z : c.zips) zipped.insert(z.axes.begin(), z.axes.end());
  for (auto& a : c.axes) {
    if (!choices.count(a.name)) continue;
    std::vector<LocatedValue> out;
    for (const auto& v : a.values) {
      if (!is_set(v)) {
        out.push_back(v);
        continue;
      }
      const std::string& text = std::get<std::string>(v.value);
      const std::string prefix = text.substr(0, text.size() - 1);
      std::vector<std::string> sets;
      std::size_t before = out.size();
      for (const auto& ch : choices.at(a.name)) {
        if (ch.starts_with(prefix)) out.push_back({Value{ch}, v.where});
        auto slash = ch.find('/');
        if (slash != std::string::npos && std::find(sets.begin(), sets.end(), ch.substr(0, slash + 1) + "*") == sets.end())
          sets.push_back(ch.substr(0, slash + 1) + "*");
      }
      if (out.size() == before)
        throw Error(v.where, "key '" + a.name + "': no value matches \"" + text + "\" (sets: " + join(sets, ", ") + ")");
      if (zipped.count(a.name))
        throw Error(v.where, "key '" + a.name + "': a set cannot be zipped (its length is not written in the campaign)");
    }
    a.values = std::move(out);
  }
  return c;
}

}  // namespace

std::string slurm_time(int minutes) {
  char buf[32];
  if (minutes >= 1440) std::snprintf(buf, sizeof buf, "%d-%02d:%02d:00", minutes / 1440, minutes % 1440 / 60, minutes % 60);
  else std::snprintf(buf, sizeof buf, "%02d:%02d:00", minutes / 60, minutes % 60);
  return buf;
}

double job_node_hours(const Plan& plan, const Job& job) {
  return plan.tmpl.launcher == "slurm" ? job.nodes * plan.campaign.slurm.time_limit_min / 60.0 : 0.0;
}

NodeHours node_hours(const Plan& plan) {
  NodeHours h;
  if (plan.tmpl.launcher != "slurm") return h;
  const SlurmSettings& sl = plan.campaign.slurm;
  double retry_minutes = 0;  // per node, over a job's retries
  for (int k = 1; k <= sl.max_retries; ++k) retry_minutes += std::ceil(sl.time_limit_min * std::pow(sl.retry_time_factor, k));
  for (const auto& j : plan.jobs) {
    h.jobs += job_node_hours(plan, j);
    h.retries += j.nodes * retry_minutes / 60.0;
  }
  if (sl.analysis_job)
    h.analysis = (1 + sl.max_retries) * analysis_time_limit_min(plan.campaign, plan.points.size(), plan.jobs.size()) / 60.0;
  return h;
}

double total_node_hours(const Plan& plan) { return node_hours(plan).total(); }

std::string node_hours_text(const Plan& plan, const NodeHours& h) {
  const SlurmSettings& sl = plan.campaign.slurm;
  std::string t = std::to_string(plan.jobs.size()) + (plan.jobs.size() == 1 ? " job" : " jobs") + " at the time limit " + fmt_sig(h.jobs, 3);
  if (sl.max_retries > 0)
    t += " + retries " + fmt_sig(h.retries, 3) + " (max_retries = " + std::to_string(sl.max_retries) +
         ", retry_time_factor = " + fmt_sig(sl.retry_time_factor, 3) + ")";
  if (sl.analysis_job)
    t += " + analysis job " + fmt_sig(h.analysis, 3) + " (1 node, " +
         slurm_time(analysis_time_limit_min(plan.campaign, plan.points.size(), plan.jobs.size())) +
         (sl.max_retries > 0 ? ", once per submission round: " + std::to_string(1 + sl.max_retries) : std::string()) + ")";
  return t;
}

int analysis_time_limit_min(const Campaign& c, std::size_t points, std::size_t jobs) {
  if (c.slurm.analysis.time_limit_min > 0) return c.slurm.analysis.time_limit_min;
  const double seconds = 2 * (60 + 0.005 * static_cast<double>(points) + 0.05 * static_cast<double>(jobs));
  return std::max(5, static_cast<int>(std::ceil(seconds / 60)));
}

int signal_before_limit_s(const Campaign& c, bool has_training) {
  if (c.slurm.signal_before_limit_s >= 0) return c.slurm.signal_before_limit_s;
  return has_training ? std::min(120, c.slurm.time_limit_min * 60 / 4) : 0;
}

std::vector<ShapeGroup> points_by_shape(const std::vector<Point>& points) {
  // Launches never share a job, and launch is the slowest-varying axis: the groups, and so the
  // jobs, come launch after launch (all of launch 1, then all of launch 2, ...).
  std::vector<ShapeGroup> groups;
  std::map<std::tuple<int, int, int>, std::size_t> index;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto [it, fresh] = index.try_emplace({points[i].launch, points[i].nodes, points[i].ranks_per_node}, groups.size());
    if (fresh) groups.push_back(ShapeGroup{points[i].nodes, points[i].ranks_per_node, {}});
    groups[it->second].points.push_back(i);
  }
  return groups;
}

Plan make_plan(const Campaign& campaign, const WorkloadRegistry& reg, const PlanOptions& opt) {
  Plan plan;
  plan.campaign = expand_sets(campaign, reg);
  plan.registry = &reg;
  const Campaign& c = plan.campaign;
  plan.tmpl = load_template(c.template_name, c.template_where, c.templates_dir);
  if (plan.tmpl.launcher != "local" && plan.tmpl.launcher != "slurm")
    throw Error(c.template_where, "template '" + plan.tmpl.name + "' is for the '" + plan.tmpl.launcher +
                                      "' launcher, not for jobs (use local, slurm or daint)");
  if (plan.tmpl.launcher == "slurm" && c.slurm.time_limit_min <= 0)
    throw Error(c.slurm.present ? c.slurm.where : c.template_where,
                "template '" + plan.tmpl.name + "' submits to Slurm: set [slurm] time_limit (e.g. time_limit = \"00:30:00\")");

  // Every key must mean something to at least one workload the campaign names; a key that
  // none of them takes is a typo, not an unused setting.
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

  // Exclude rules may only name axes and fixed keys, and only values those have.
  std::map<std::string, const Axis*> by_name;
  for (const auto* list : {&c.fixed, &c.axes})
    for (const auto& a : *list) by_name[a.name] = &a;
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

  std::set<std::string> zipped;
  for (const auto& z : c.zips) {
    plan.dims.emplace_back();
    for (const auto& n : z.axes) {
      plan.dims.back().push_back(static_cast<std::size_t>(by_name.at(n) - c.axes.data()));
      zipped.insert(n);
    }
  }
  for (std::size_t i = 0; i < c.axes.size(); ++i)
    if (!zipped.count(c.axes[i].name)) plan.dims.push_back({i});
  // Axes are combined in name order (the last varies fastest) so that plan order, and so job
  // contents, depend only on the campaign's content, never on the order of its lines.
  std::sort(plan.dims.begin(), plan.dims.end(), [&](const auto& x, const auto& y) {
    return c.axes[x.front()].name < c.axes[y.front()].name;
  });
  Product product(c, plan.dims);
  // Packing by time: earlier runs read once, each point estimated as it is resolved.
  std::optional<TimeModel> model;
  if (c.packing.present) model.emplace(c);

  // Before anything is expanded: would the combinations fit in memory? (An upper bound: exclude
  // rules and duplicates only remove points.)
  const std::int64_t avail = opt.available_memory_bytes > 0 ? opt.available_memory_bytes : available_memory_bytes();
  double combinations = 1;
  for (std::size_t d = 0; d < product.dims.size(); ++d) combinations *= static_cast<double>(product.extent(d));
  auto plan_cost = [](double points, double largest_job) {
    return points * static_cast<double>(kPlanBytesPerPoint) + largest_job * static_cast<double>(kSpecBytesPerPoint);
  };
  // What is refused when a cost is over half of the memory available ("" when it fits).
  auto too_big = [&](double cost) {
    return avail > 0 && cost > 0.5 * static_cast<double>(avail)
               ? "needs about " + fmt_bytes(static_cast<std::int64_t>(cost)) + " of memory, more than half of the " +
                     fmt_bytes(avail) + " available"
               : std::string();
  };
  const double per_job_bound = c.points_per_job > 0 ? std::min<double>(c.points_per_job, combinations) : combinations;
  if (const std::string why = too_big(plan_cost(combinations, std::min<double>(per_job_bound, kMaxPointsPerJob))); !why.empty())
    throw Error(Location{c.path, 1, 1}, "the campaign expands to " + fmt_sig(combinations, 4) +
                                            " combinations of its axes; planning them " + why +
                                            " (MemAvailable): split it into several campaigns, or remove axis values");

  // Each exclude rule as tables: per key it names, which values of that key's dimension it
  // matches (a fixed key matches always or never), so that testing a combination compares no text.
  struct KeyTest {
    std::size_t dim;
    std::vector<char> hit;  // per value index of the dimension
  };
  struct RuleTest {
    bool possible = true;  // false when a fixed key's value is not among the rule's
    std::vector<KeyTest> keys;
  };
  std::vector<RuleTest> rules(c.excludes.size());
  for (std::size_t r = 0; r < c.excludes.size(); ++r)
    for (const auto& m : c.excludes[r].match) {
      auto matches = [&](const Value& v) {
        const std::string have = canonical(v);
        return std::any_of(m.values.begin(), m.values.end(), [&](const auto& x) { return canonical(x.value) == have; });
      };
      bool on_axis = false;
      for (std::size_t d = 0; d < product.dims.size(); ++d)
        for (const Axis* a : product.dims[d])
          if (a->name == m.name) {
            KeyTest t{d, {}};
            for (const auto& v : a->values) t.hit.push_back(matches(v.value));
            rules[r].keys.push_back(std::move(t));
            on_axis = true;
          }
      if (!on_axis) rules[r].possible = rules[r].possible && matches(by_name.at(m.name)->values.front().value);
    }

  // The resource checks' settings: a node's memory, and the CPUs of this machine.
  if (plan.tmpl.launcher == "local") {
    plan.node_memory_bytes = opt.host_memory_bytes > 0 ? opt.host_memory_bytes : host_memory_bytes();
    plan.node_memory_source = "this machine's memory (" + fmt_bytes(plan.node_memory_bytes) + ", MemTotal)";
  } else if (c.slurm.mem_per_node_bytes > 0) {
    plan.node_memory_bytes = c.slurm.mem_per_node_bytes;
    plan.node_memory_source = "[slurm] mem_per_node (" + fmt_bytes(plan.node_memory_bytes) + ", " + c.slurm.mem_where.str() + ")";
  }
  const int cpus = opt.host_cpus > 0 ? opt.host_cpus : host_cpus();
  std::int64_t largest_per_node = -1;
  std::set<std::pair<std::int64_t, std::int64_t>> threads_said;  // (ranks per node, threads) already warned of
  std::set<std::string> gpus_said;                                // backends whose GPU request was warned of
  std::int64_t gpus_asked = -1;  // GPUs per node the Slurm jobs' gres asks for; -1: none
  for (const auto& g : split(c.slurm.gres, ','))
    if (g.rfind("gpu", 0) == 0) {
      const auto colon = g.rfind(':');
      gpus_asked = colon == std::string::npos ? 1 : std::atoll(g.c_str() + colon + 1);
    }
  // Refusals found while expanding, thrown afterwards in the order of the checks.
  std::optional<Error> nodes_refusal, memory_refusal;

  plan.value_counts.resize(c.axes.size());
  for (std::size_t a = 0; a < c.axes.size(); ++a) plan.value_counts[a].assign(c.axes[a].values.size(), 0);
  std::vector<int> rule_hits(c.excludes.size(), 0);
  IdSet seen(static_cast<std::size_t>(std::min<double>(combinations, 2e6)));
  plan.points.reserve(static_cast<std::size_t>(std::min<double>(combinations, 2e6)));
  // For the rare point that needs its resolution again (a refusal's words): the calling
  // thread's own product.
  auto resolve_again = [&](std::uint64_t combination) {
    product.set(combination);
    return resolve(product.raw, reg, c);
  };

  // A run of combinations, worked out on any thread: what is independent of the others (the
  // exclude rules, resolution and its checks, the memory estimate, the time estimate, the
  // parameters' text). What depends on the points before it (duplicates, the first refusal,
  // warnings said once, the counts) is decided by the calling thread, taking the runs in order.
  struct Made {
    std::uint64_t key = 0;
    Point point;  // all but where its parameters' text lies
    std::int64_t threads = 1;
    std::string backend;
  };
  struct Chunk {
    std::vector<Made> points;   // those no exclude rule drops, in combination order
    std::vector<char> present;  // per point, per axis (campaign order): its parameters hold the axis
    std::vector<int> rule_hits;
    std::exception_ptr error;  // the first combination of the run that failed: points end before it
  };
  constexpr std::uint64_t kChunk = 2048;
  const std::uint64_t chunks = (product.size + kChunk - 1) / kChunk;
  auto make_chunk = [&](std::size_t chunk_index) {
    Chunk ch;
    ch.rule_hits.assign(rules.size(), 0);
    Product mine(c, plan.dims);
    const std::uint64_t begin = chunk_index * kChunk, end = std::min(product.size, begin + kChunk);
    std::vector<std::size_t> idx(mine.dims.size(), 0);
    for (std::size_t d = 0; d < idx.size(); ++d) idx[d] = static_cast<std::size_t>(begin / mine.stride[d] % mine.extent(d));
    try {
      for (std::uint64_t combination = begin; combination < end; ++combination) {
        if (combination > begin)  // the next combination: the last dimension varies fastest
          for (std::size_t d = idx.size(); d-- > 0;) {
            if (++idx[d] < mine.extent(d)) break;
            idx[d] = 0;
          }
        bool excluded = false;
        for (std::size_t r = 0; r < rules.size(); ++r) {
          bool all = rules[r].possible;
          for (std::size_t k = 0; all && k < rules[r].keys.size(); ++k) all = rules[r].keys[k].hit[idx[rules[r].keys[k].dim]];
          if (all) ++ch.rule_hits[r], excluded = true;
        }
        if (excluded) continue;
        mine.set(idx);
        // Drop what this point's workload does not take: a gemm point ignores the allreduce
        // `bytes` axis, and the duplicates that leaves are planned once (by the calling thread).
        Resolved res = resolve(mine.raw, reg, c);
        Made m;
        m.key = fnv1a64(res.canonical);
        Point& p = m.point;
        p.id = hex64(m.key);
        p.canonical = std::move(res.canonical);
        p.level = res.workload->level;
        p.nodes = static_cast<int>(std::get<std::int64_t>(res.params.at("nodes")));
        p.ranks_per_node = static_cast<int>(std::get<std::int64_t>(res.params.at("ranks_per_node")));
        if (auto l = res.params.find("launch"); l != res.params.end()) p.launch = static_cast<std::uint8_t>(std::get<std::int64_t>(l->second));
        p.combination = combination;
        if (model) {
          const TimeModel::Estimate e = model->estimate(p.id, p.level, *res.workload, res.params);
          p.estimate_s = static_cast<float>(e.seconds);
          p.estimate_source = static_cast<std::uint8_t>(e.source);
        }
        if (res.workload->memory_bytes) p.memory_bytes = res.workload->memory_bytes(res.params);
        m.threads = int_param_or(res.params, "threads", 1);
        m.backend = std::get<std::string>(res.params.at("backend"));
        for (const auto& axis : c.axes) ch.present.push_back(static_cast<char>(res.params.count(axis.name) > 0));
        ch.points.push_back(std::move(m));
      }
    } catch (...) {
      ch.error = std::current_exception();
    }
    return ch;
  };

  auto take_chunk = [&](std::size_t, Chunk&& ch) {
    for (std::size_t r = 0; r < rules.size(); ++r) rule_hits[r] += ch.rule_hits[r];
    // A duplicate of an earlier point is planned once.
    for (std::size_t q = 0; q < ch.points.size(); ++q) {
      Made& m = ch.points[q];
      if (!seen.insert(m.key)) continue;
      Point& p = m.point;
      if (!nodes_refusal && plan.tmpl.launcher == "local" && p.nodes != 1)
        nodes_refusal = Error(*resolve_again(p.combination).where, "point " + p.canonical + ": template '" + plan.tmpl.name +
                                                                        "' runs on this machine only, so nodes must be 1 (use a Slurm template for more)");

      // Memory per point against a node's: refused (unless --force) before anything is written.
      const std::int64_t rpn = p.ranks_per_node;
      if (p.memory_bytes >= 0) {
        const std::int64_t per_node = p.memory_bytes * rpn;
        if (per_node > largest_per_node) largest_per_node = per_node, plan.largest_memory_point = static_cast<long>(plan.points.size());
        if (plan.node_memory_bytes > 0 && per_node > plan.node_memory_bytes && !memory_refusal) {
          const Resolved res = resolve_again(p.combination);
          const std::string driver = memory_driver(res, product.raw, p.memory_bytes);
          const std::string why =
              "point " + p.canonical + ": needs about " + fmt_bytes(p.memory_bytes) + " of memory per rank" +
              (rpn > 1 ? " (" + fmt_bytes(per_node) + " for its " + std::to_string(rpn) + " ranks per node)" : "") +
              " for its tensors, their validation copies and the backend's workspace, more than " +
              plan.node_memory_source +
              (driver.empty() ? "" : "; key '" + driver + "' = " + canonical(res.params.at(driver)) + " makes it so");
          if (!opt.force)
            memory_refusal = Error(driver.empty() ? *res.where : product.raw.at(driver)->where,
                                   why + "; lower it, or plan with --force to run it anyway (nothing was written)");
          else
            plan.warnings.push_back(why + " (planned anyway: --force)");
        }
      }
      // Threads: ranks x threads beyond the CPUs makes the library's threads share cores.
      const std::int64_t threads = m.threads;
      const bool local_over = plan.tmpl.launcher == "local" && rpn * threads > cpus;
      const bool slurm_over = plan.tmpl.launcher == "slurm" && threads > c.slurm.cpus_per_task;
      if ((local_over || slurm_over) && threads_said.insert({local_over ? rpn : 0, threads}).second) {
        const std::string w =
            local_over ? std::to_string(rpn) + " rank(s) x " + std::to_string(threads) + " thread(s) = " +
                             std::to_string(rpn * threads) + " on this machine's " + std::to_string(cpus) + " CPUs"
                       : std::to_string(threads) + " thread(s) per rank, but [slurm] cpus_per_task = " +
                             std::to_string(c.slurm.cpus_per_task) + " CPUs per rank";
        plan.warnings.push_back("threads oversubscribed: " + w + " (e.g. point " + p.canonical +
                                "): its timings will measure threads sharing cores; the worker flags such points");
      }
      // GPUs: a point on a device backend wants one GPU per rank of its node; a Slurm job gets
      // them only if it asks (gres), and a node's GPUs are shared by its ranks otherwise.
      if (plan.tmpl.launcher == "slurm" && gpus_asked < rpn) {
        const std::string& backend = m.backend;
        const BackendInfo* b = find_backend(backend);
        if (b && b->no_device && gpus_said.insert(backend).second) {
          const std::string eg = " (e.g. point " + p.canonical + ")";
          if (gpus_asked < 0)
            plan.warnings.push_back("point(s) on backend " + backend + " run on a GPU, but [slurm] asks for none: set gres = \"gpu:" +
                                    std::to_string(rpn) + "\" (one per rank), or their jobs may land where there is none" + eg);
          else
            plan.warnings.push_back("point(s) on backend " + backend + " run " + std::to_string(rpn) + " ranks per node on " +
                                    std::to_string(gpus_asked) + " GPU(s) (gres = \"" + c.slurm.gres + "\"): ranks will share a GPU" +
                                    (backend == "nccl" ? ", which NCCL refuses" : ", and time each other's work") + eg);
        }
      }
      for (std::size_t d = 0; d < plan.dims.size(); ++d) {
        const std::size_t value = static_cast<std::size_t>(p.combination / product.stride[d] % product.extent(d));
        for (auto a : plan.dims[d])
          if (ch.present[q * c.axes.size() + a]) ++plan.value_counts[a][value];
      }
      plan.points.push_back(std::move(p));
    }
    if (ch.error) std::rethrow_exception(ch.error);
  };
  const unsigned threads = opt.threads > 0 ? static_cast<unsigned>(opt.threads) : planning_threads(product.size, 4 * kChunk);
  ordered_parallel<Chunk>(static_cast<std::size_t>(chunks), threads, 4 * static_cast<std::size_t>(threads), make_chunk, take_chunk);
  for (std::size_t r = 0; r < c.excludes.size(); ++r)
    if (!rule_hits[r])
      throw Error(c.excludes[r].where, "this [[exclude]] rule matches no point: check its values");
  if (plan.points.empty()) throw Error(Location{c.path, 1, 1}, "the campaign has no points left after [[exclude]] rules");
  if (nodes_refusal) throw *nodes_refusal;
  if (memory_refusal) throw *memory_refusal;

  // A training point (level 2 and up) is one run of many steps: its steps are the samples.
  const bool timed_by_repetitions = std::any_of(plan.points.begin(), plan.points.end(), [](const auto& p) { return p.level < 2; });
  if (c.repetitions <= 5 && timed_by_repetitions)
    plan.warnings.push_back(c.path + ": repetitions = " + std::to_string(c.repetitions) +
                            ": no distribution-free 95% confidence interval of a median exists for n <= 5, so the report "
                            "will give none; use 6 or more (10 or more for a useful width)");

  // Jobs: points of one shape share an allocation, packed by time or split by points_per_job.
  if (model) {
    pack_by_time(plan, opt, *model);
  } else {
    for (const ShapeGroup& shape : points_by_shape(plan.points)) {
      const auto& pts = shape.points;
      std::size_t per = c.points_per_job > 0 ? static_cast<std::size_t>(c.points_per_job) : pts.size();
      for (std::size_t s = 0; s < pts.size(); s += per) {
        Job j;
        char id[32];
        std::snprintf(id, sizeof id, "job-%04zu", plan.jobs.size());
        j.id = id;
        j.nodes = shape.nodes;
        j.ranks_per_node = shape.ranks_per_node;
        j.points.assign(pts.begin() + static_cast<long>(s), pts.begin() + static_cast<long>(std::min(pts.size(), s + per)));
        plan.jobs.push_back(std::move(j));
      }
    }
  }
  std::size_t largest = 0;
  for (const auto& j : plan.jobs) largest = std::max(largest, j.points.size());
  if (static_cast<std::int64_t>(largest) > kMaxPointsPerJob) {
    // A job this size is one spec every rank reads whole, one results file, one allocation
    // lost to one failure: suggest the split that keeps each job under the limit.
    const std::int64_t jobs_needed = (static_cast<std::int64_t>(largest) + kMaxPointsPerJob - 1) / kMaxPointsPerJob;
    const std::int64_t suggest = (static_cast<std::int64_t>(largest) + jobs_needed - 1) / jobs_needed;
    const std::string what = "a job of " + std::to_string(largest) + " points (" +
                             (c.points_per_job > 0 ? "points_per_job = " + std::to_string(c.points_per_job)
                                                   : std::string("points_per_job = 0 puts every point of one shape in one job")) +
                             ")";
    if (!opt.force)
      throw Error(c.points_per_job_where, "the plan has " + what + ", over the " + std::to_string(kMaxPointsPerJob) +
                                              " points a job may hold: set points_per_job = " + std::to_string(suggest) +
                                              " (" + std::to_string(jobs_needed) + " jobs of that shape), or plan with --force");
    if (const std::string why = too_big(plan_cost(static_cast<double>(plan.points.size()), static_cast<double>(largest)));
        !why.empty())
      throw Error(c.points_per_job_where, "the plan has " + what + "; writing its spec " + why +
                                              ", even with --force: set points_per_job = " + std::to_string(suggest));
    plan.warnings.push_back("a job of " + std::to_string(largest) + " points (over " + std::to_string(kMaxPointsPerJob) +
                            ", planned because of --force); points_per_job = " + std::to_string(suggest) + " would split it");
  }
  const NodeHours nh = node_hours(plan);
  if (c.slurm.budget_node_hours > 0 && nh.total() > c.slurm.budget_node_hours && !opt.force)
    throw Error(c.slurm.where, "the campaign may use " + fmt_sig(nh.total(), 4) + " node-hours (" + node_hours_text(plan, nh) +
                                   "), over its budget_node_hours = " + fmt_sig(c.slurm.budget_node_hours, 4) +
                                   "; lower the time limit, sizes or max_retries, or plan with --force");
  if (plan.tmpl.launcher == "slurm" && c.slurm.signal_before_limit_s > 0 && c.slurm.time_limit_min > 0 &&
      c.slurm.signal_before_limit_s >= c.slurm.time_limit_min * 60)
    throw Error(c.slurm.signal_where, "key 'signal_before_limit' in [slurm] is " + std::to_string(c.slurm.signal_before_limit_s) +
                                          " s, not less than the time limit (" + slurm_time(c.slurm.time_limit_min) +
                                          "): the signal would come at the start; valid: 0 (no signal) to " +
                                          std::to_string(c.slurm.time_limit_min * 60 - 1) + " s");
  return plan;
}

struct PointResolver::Impl {
  const Plan& plan;
  Product product;
  explicit Impl(const Plan& p) : plan(p), product(p.campaign, p.dims) {}
};

PointResolver::PointResolver(const Plan& plan) : impl_(std::make_unique<Impl>(plan)) {}
PointResolver::~PointResolver() = default;

Params PointResolver::params(const Point& p) {
  impl_->product.set(p.combination);
  Resolved r = resolve(impl_->product.raw, *impl_->plan.registry, impl_->plan.campaign);
  if (r.canonical != p.canonical)  // the plan was changed after planning: never write another point
    throw Error("internal: point " + p.id + " (" + p.canonical + ") resolves to " + r.canonical + " again");
  return std::move(r.params);
}

namespace {

// Parses what was just written and compares it with what was meant: a plan file that d500 run
// could not read, or that says something else, is never moved into place.
void read_back_plan_file(const std::string& path, const toml::table& meant) {
  toml::table got;
  try {
    got = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw Error(path + ": the plan file just written does not parse (" + std::string(e.description()) +
                "); nothing was written");
  }
  const toml::table* p = got["plan"].as_table();
  if (!p || *p != meant) throw Error(path + ": the plan file just written does not read back as written; nothing was written");
}

}  // namespace

void write_plan(const Plan& plan, const std::string& dir, const std::string& worker) {
  // Every path that reaches a job script, a job list or a plan file: no control characters.
  refuse_control_chars(fs::absolute(dir).string(), "the run directory");
  refuse_control_chars(plan.campaign.path, "the campaign file's path");
  refuse_control_chars(worker, "the worker's path");
  refuse_control_chars(plan.tmpl.path, "the template path");
  fs::path target = fs::absolute(dir).lexically_normal();
  if (fs::exists(target) && !(fs::is_directory(target) && fs::is_empty(target)))
    throw Error(dir + ": exists and is not empty; plan into a new directory (nothing was written)");
  fs::path tmp = target;
  tmp += ".planning-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  // The outermost directory this call creates (runs/ on a first plan): removed on failure, so
  // that a refusal leaves nothing behind.
  fs::path created = target.parent_path();
  while (!created.empty() && created.has_parent_path() && !fs::exists(created.parent_path()))
    created = created.parent_path();
  if (fs::exists(created)) created.clear();
  auto clean_up = [&] {
    fs::remove_all(tmp, ec);
    if (!created.empty()) fs::remove_all(created, ec);
  };
  try {
    // Built under the temporary name, naming the final paths in what it writes.
    const RunLayout at(tmp.string()), final_dir(target.string());
    fs::create_directories(at.jobs_dir());
    fs::create_directories(at.results_dir());
    fs::create_directories(at.logs_dir());
    write_file_atomic(at.campaign_file().string(), plan.campaign.text);

    // Written by the TOML library's serializer and read back before the plan moves into place:
    // no path or name can change what the file says.
    toml::table pt{{"campaign", plan.campaign.name},
                   {"campaign_hash", plan.campaign.hash},
                   {"campaign_path", plan.campaign.path},
                   {"campaign_dir", fs::absolute(plan.campaign.path).parent_path().lexically_normal().string()},
                   {"template", plan.tmpl.name},
                   {"template_path", plan.tmpl.path},
                   {"launcher", plan.tmpl.launcher},
                   {"d500_version", std::string(kVersion)},
                   {"d500_commit", std::string(kGitCommit)},
                   {"created_utc", utc_now_iso8601()},
                   {"points", static_cast<std::int64_t>(plan.points.size())},
                   {"jobs", static_cast<std::int64_t>(plan.jobs.size())},
                   {"node_hours", total_node_hours(plan)}};
    if (plan.job_capacity_s > 0) {
      pt.insert("packing", "time");
      pt.insert("job_limit_s", plan.job_limit_s);
      pt.insert("job_capacity_s", plan.job_capacity_s);
    }
    std::ostringstream pt_text;
    pt_text << "# Written by d500 plan; do not edit.\n" << toml::table{{"plan", pt}} << "\n";
    write_file_atomic(at.plan_file().string(), pt_text.str());
    read_back_plan_file(at.plan_file().string(), pt);

    // The points' list first, each job's rows consecutive (its spec names their byte range),
    // streamed: 10^6 points are ~100 MB of text, never held whole.
    std::vector<std::uint64_t> job_offset(plan.jobs.size());
    {
      std::ofstream csv(at.points_csv(), std::ios::binary | std::ios::trunc);
      std::string line = std::string(kPointsCsvHeader) + "\n";
      csv.write(line.data(), static_cast<std::streamsize>(line.size()));
      std::uint64_t offset = line.size();
      for (std::size_t k = 0; k < plan.jobs.size(); ++k) {
        const Job& j = plan.jobs[k];
        job_offset[k] = offset;
        for (auto i : j.points) {
          const Point& p = plan.points[i];
          line = p.id + "," + j.id + "," + std::to_string(p.level) + "," + (p.estimate_s >= 0 ? fmt_sig(p.estimate_s, 4) : "") + "," +
                 csv_field(p.canonical) + "\n";
          csv.write(line.data(), static_cast<std::streamsize>(line.size()));
          offset += line.size();
        }
      }
      csv.close();
      if (!csv) throw Error(at.points_csv().string() + ": write failed (disk full?); nothing was written");
    }
    // Each job's files (item: its index), written on the CPUs this process may use; a failure is
    // rethrown in that order once every thread has stopped.
    auto write_item = [&](std::size_t item) {
      const Job& j = plan.jobs[item];
      // The spec names its rows of points.csv; read_job_spec derives each point's parameters from
      // its canonical text there (params_of_canonical, whose agreement with the planner's own
      // parameters is tested for every workload) and checks the id and text of each row.
      // Not fsync'd one by one (10^4 jobs would take seconds): the directory is synced once below,
      // before it is renamed into place.
      write_file_atomic(at.job_spec(j.id).string(), job_spec_text(plan, j, job_offset[item]), false);
      write_file_atomic(at.job_list(j.id).string(), final_dir.job_spec(j.id).string() + "\n", false);
      const SlurmSettings& sl = plan.campaign.slurm;
      const int signal_s = signal_before_limit_s(plan.campaign, std::any_of(j.points.begin(), j.points.end(), [&](std::size_t i) {
                                                   return plan.points[i].level >= 2;
                                                 }));
      std::map<std::string, std::string> vars = {
          {"job_id", j.id},
          {"job_name", plan.campaign.name + "." + j.id},
          {"cpus_per_task", std::to_string(sl.cpus_per_task)},
          {"time_limit", sl.time_limit_min > 0 ? slurm_time(sl.time_limit_min) : ""},
          {"partition", sl.partition},
          {"account", sl.account},
          {"qos", sl.qos},
          {"constraint", sl.constraint},
          {"gres", sl.gres},
          {"reservation", sl.reservation},
          {"modules", join(sl.modules, " ")},
          {"module_init", sl.module_init},
          {"signal", signal_s > 0 ? "TERM@" + std::to_string(signal_s) : ""},
          {"mpi", sl.mpi},
          {"log", (final_dir.logs_dir() / (j.id + ".slurm-%j.out")).string()},
          {"spec_list", final_dir.job_list(j.id).string()},
          {"campaign", plan.campaign.name},
          {"points", std::to_string(j.points.size())},
          {"nodes", std::to_string(j.nodes)},
          {"ranks", std::to_string(j.ranks())},
          {"ranks_per_node", std::to_string(j.ranks_per_node)},
          {"run_dir", target.string()},
          {"worker", worker},
          {"spec", final_dir.job_spec(j.id).string()},
          {"output", final_dir.results_file(j.id).string()},
          {"slurm_attempt", templates_dir() + "/slurm-attempt.bash"},
      };
      std::string script = render_template(plan.tmpl.text, plan.tmpl.path, vars);
      fs::path sp = at.job_script(j.id);
      write_file_atomic(sp.string(), script, false);
      fs::permissions(sp, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
      return true;
    };
    const unsigned threads = planning_threads(plan.jobs.size(), 4);
    // Any window: what is made ahead is a bool, and no thread waits on the long points' list.
    ordered_parallel<bool>(plan.jobs.size(), threads, plan.jobs.size(), write_item, [](std::size_t, bool) {});
    sync_file_system(tmp);  // every file above on disk before the plan appears under its name
    if (fs::exists(target)) fs::remove(target);  // the empty directory checked above
    fs::rename(tmp, target);
  } catch (const fs::filesystem_error& e) {
    clean_up();
    throw Error(dir + ": cannot write the plan: " + e.code().message() + " (nothing was written)");
  } catch (...) {
    clean_up();
    throw;
  }
}

}  // namespace d500
