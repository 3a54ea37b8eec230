#include "plan/resolve.hpp"

#include <algorithm>
#include <exception>
#include <limits>
#include <set>

#include "backends/registry.hpp"
#include "common/parallel.hpp"
#include "common/text.hpp"
#include "plan/jobspec.hpp"

namespace d500::planning {

unsigned planning_threads(std::uint64_t items, std::uint64_t worth_from) {
  return items < worth_from ? 1u : static_cast<unsigned>(std::min<std::int64_t>(8, rank_cores()));
}

namespace {

// Converts and range-checks one value against its spec.
Value checked(const ParamSpec& spec, const LocatedValue& lv, const std::string& workload) {
  Value v = lv.value;
  if (spec.type == ValueType::Real && type_of(v) == ValueType::Int) v = static_cast<double>(std::get<std::int64_t>(v));
  if (type_of(v) != spec.type)
    throw Error(lv.where, "key '" + spec.name + "' (" + workload + "): expected " + type_name(spec.type) + ", got " +
                              type_name(type_of(lv.value)) + " " + canonical(lv.value));
  if (spec.type == ValueType::Int && spec.min < spec.max) {
    auto i = std::get<std::int64_t>(v);
    if (i < spec.min || i > spec.max)
      throw Error(lv.where, "key '" + spec.name + "' is " + std::to_string(i) + "; valid for " + workload + ": " +
                                std::to_string(spec.min) + " to " + std::to_string(spec.max));
  }
  if (spec.type == ValueType::String && !spec.choices.empty()) {
    const auto& s = std::get<std::string>(v);
    if (std::find(spec.choices.begin(), spec.choices.end(), s) == spec.choices.end())
      throw Error(lv.where, "key '" + spec.name + "' is " + quote_value(s) + did_you_mean(s, spec.choices) +
                                " (valid: " + join(spec.choices, ", ") + ")");
  }
  return v;
}

}  // namespace

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
                              b->not_built_reason + " (this build has: " + join(built_backend_names(), ", ") + ")");
  if (const std::string why = load_backend(name); !why.empty()) {
    // What to do depends on the loader's words: a library not found, or no room to map it.
    const bool no_room = why.find("failed to map") != std::string::npos ||
                         why.find("cannot map") != std::string::npos ||
                         why.find("Cannot allocate memory") != std::string::npos;
    const std::string hint =
        no_room ? "this process's address space is too small for its libraries: raise the limit (ulimit -v; "
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

Resolved resolve(const Raw& raw, const WorkloadRegistry& reg, const Campaign& c) {
  auto wit = raw.find("workload");
  if (wit == raw.end())
    throw Error(Location{c.path, 1, 1},
                "no workload: set 'workload' in [fixed] or [axes] (available: " + join(reg.names(), ", ") + ")");
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
    if (it != raw.end())
      r.params.emplace(spec.name, checked(spec, *it->second, w.name));
    else if (spec.dflt)
      r.params.emplace(spec.name, *spec.dflt);
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
    throw Error(bit->second->where, "impossible combination: workload '" + w.name + "' does not run on backend '" +
                                        backend + "' (it runs on: " + join(impl, ", ") +
                                        "); drop it with [[exclude]] workload = \"" + w.name + "\", backend = \"" +
                                        backend + "\"");
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
      throw Error(*at, "point " + point_words(r.params, c) + ": " + why);
    }
  }
  return r;
}

std::string point_words(const Params& p, const Campaign& c) {
  std::vector<std::string> swept;
  for (const Axis& a : c.axes) swept.push_back(a.name);
  return short_point_text(p, swept, {"workload", "backend"});
}

std::string point_words(const std::string& canonical, const Campaign& c) {
  return point_words(parse_canonical_point(canonical), c);
}

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

// A string value ending in "/*" in [axes] ("resnet50/*") stands for every choice of that
// parameter starting with what precedes the '*', in the workload's order: a named shape set.
Campaign expand_sets(const Campaign& in, const WorkloadRegistry& reg) {
  Campaign c = in;
  std::map<std::string, std::vector<std::string>> choices;  // parameter -> choices, over the named workloads
  for (const auto* list : {&c.fixed, &c.axes})
    for (const auto& a : *list)
      if (a.name == "workload")
        for (const auto& v : a.values)
          if (const WorkloadInfo* w =
                  type_of(v.value) == ValueType::String ? reg.find(std::get<std::string>(v.value)) : nullptr)
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
      throw Error(a.values.front().where, "key '" + a.name + "': a set (\"" +
                                              std::get<std::string>(a.values.front().value) +
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
        if (slash != std::string::npos &&
            std::find(sets.begin(), sets.end(), ch.substr(0, slash + 1) + "*") == sets.end())
          sets.push_back(ch.substr(0, slash + 1) + "*");
      }
      if (out.size() == before)
        throw Error(v.where,
                    "key '" + a.name + "': no value matches \"" + text + "\" (sets: " + join(sets, ", ") + ")");
      if (zipped.count(a.name))
        throw Error(v.where,
                    "key '" + a.name + "': a set cannot be zipped (its length is not written in the campaign)");
    }
    a.values = std::move(out);
  }
  return c;
}
}  // namespace d500::planning
