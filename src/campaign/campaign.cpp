#include "campaign/campaign.hpp"

#include <toml++/toml.h>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

#include "common/text.hpp"

namespace d500 {
namespace {

Location loc(const std::string& path, const toml::source_region& r) {
  return Location{path, static_cast<int>(r.begin.line), static_cast<int>(r.begin.column)};
}

// The keys each table takes, as they read best; clang-format would put kSlurmKeys one a line.
// clang-format off
const std::vector<std::string> kTopLevel = {"campaign", "fixed", "axes", "zip", "exclude", "slurm", "auto_repetitions", "packing"};
const std::vector<std::string> kPackingKeys = {"margin", "job_time", "times_from", "gflops", "gbps", "point_overhead_s", "default_point_s"};
const std::vector<std::string> kAutoRepetitionKeys = {"ci_rel_width", "confidence", "min", "max", "max_time"};
const std::vector<std::string> kSlurmKeys = {"partition",   "account",      "qos",          "constraint",
                                             "gres",        "mpi",          "time_limit",   "cpus_per_task",
                                             "modules",     "array",        "throttle",     "analysis_job",
                                             "retry_time_factor", "max_retries", "budget_node_hours", "mem_per_node",
                                             "reservation", "module_init", "signal_before_limit", "analysis"};
const std::vector<std::string> kSlurmAnalysisKeys = {"partition", "account", "qos", "reservation", "time_limit"};
const std::vector<std::string> kCampaignKeys = {"name", "description", "repetitions",
                                                "warmups", "template", "templates_dir", "points_per_job",
                                                "launches"};
// clang-format on

void reject_unknown(const toml::table& t, const std::vector<std::string>& valid, const std::string& path,
                    const std::string& where) {
  for (auto&& [k, v] : t) {
    std::string key(k.str());
    bool ok = false;
    for (const auto& x : valid) ok = ok || x == key;
    if (!ok)
      throw Error(loc(path, k.source()), "unknown key " + quote_value(key, '\'') + " in " + where +
                                             did_you_mean(key, valid) + " (valid keys: " + join(valid, ", ") + ")");
  }
}

std::string toml_type_name(const toml::node& n) {
  std::ostringstream s;
  s << n.type();
  return s.str();
}

LocatedValue scalar(const toml::node& n, const std::string& path, const std::string& key) {
  Location where = loc(path, n.source());
  if (auto i = n.as_integer()) return {Value{std::int64_t{i->get()}}, where};
  if (auto f = n.as_floating_point()) return {Value{f->get()}, where};
  if (auto b = n.as_boolean()) return {Value{b->get()}, where};
  if (auto s = n.as_string()) return {Value{s->get()}, where};
  throw Error(where, "key '" + key + "': expected an integer, float, boolean or string, got " + toml_type_name(n));
}

// An axis: a non-empty array of scalars of one type (a lone scalar is an axis of one value).
Axis axis(const toml::key& k, const toml::node& n, const std::string& path, bool allow_array) {
  Axis a{std::string(k.str()), {}, loc(path, k.source())};
  if (auto arr = n.as_array()) {
    if (!allow_array)
      throw Error(a.where, "key '" + a.name +
                               "' in [fixed] takes one value, not an array "
                               "(sweep it under [axes] instead)");
    if (arr->empty()) throw Error(loc(path, n.source()), "axis '" + a.name + "' is empty: give at least one value");
    for (auto&& e : *arr) {
      a.values.push_back(scalar(e, path, a.name));
      if (type_of(a.values.back().value) != type_of(a.values.front().value))
        throw Error(a.values.back().where, "axis '" + a.name + "' mixes " + type_name(type_of(a.values.front().value)) +
                                               " and " + type_name(type_of(a.values.back().value)) +
                                               " values: all values of an axis must have one type");
    }
  } else {
    a.values.push_back(scalar(n, path, a.name));
  }
  return a;
}

const toml::table& as_table(const toml::node& n, const std::string& path, const std::string& what) {
  if (auto t = n.as_table()) return *t;
  throw Error(loc(path, n.source()), what + " must be a table, got " + toml_type_name(n));
}

std::int64_t get_int(const toml::table& t, const char* key, std::int64_t dflt, std::int64_t lo, std::int64_t hi,
                     const std::string& path, const char* section = "[campaign]") {
  const toml::node* n = t.get(key);
  if (!n) return dflt;
  auto i = n->as_integer();
  if (!i)
    throw Error(loc(path, n->source()),
                std::string("key '") + key + "' in " + section + ": expected an integer, got " + toml_type_name(*n));
  if (i->get() < lo || i->get() > hi)
    throw Error(loc(path, n->source()), std::string("key '") + key + "' in " + section + " is " +
                                            std::to_string(i->get()) + "; valid: " + std::to_string(lo) + " to " +
                                            std::to_string(hi));
  return i->get();
}

std::string get_string(const toml::table& t, const char* key, const std::string& dflt, const std::string& path,
                       Location* where = nullptr) {
  const toml::node* n = t.get(key);
  if (!n) return dflt;
  auto s = n->as_string();
  if (!s)
    throw Error(loc(path, n->source()),
                std::string("key '") + key + "' in [campaign]: expected a string, got " + toml_type_name(*n));
  if (where) *where = loc(path, n->source());
  return s->get();
}

// A word of 1 to `most` letters, digits and the characters of `extra`: checked character by
// character (std::regex recursed per character, and a megabyte-long value overflowed its stack).
struct Word {
  const char* extra;
  std::size_t most;
  bool matches(const std::string& s) const {
    if (s.empty() || s.size() > most) return false;
    for (unsigned char c : s)
      if (!std::isalnum(c) && (c == 0 || !std::strchr(extra, c))) return false;
    return true;
  }
};

// A string of a Slurm option: only the characters that option needs.
std::string slurm_word(const toml::table& t, const char* key, const std::string& path, const char* allowed_desc,
                       const Word& allowed) {
  const toml::node* n = t.get(key);
  if (!n) return "";
  auto s = n->as_string();
  if (!s)
    throw Error(loc(path, n->source()),
                std::string("key '") + key + "' in [slurm]: expected a string, got " + toml_type_name(*n));
  if (!allowed.matches(s->get()))
    throw Error(loc(path, n->source()), std::string("key '") + key + "' in [slurm] is " + quote_value(s->get()) +
                                            ", which Slurm would not accept in a job script; valid: " + allowed_desc);
  return s->get();
}

// A number of either TOML type, within [lo, hi]; `dflt` when the key is absent.
double get_number(const toml::table& t, const char* key, double dflt, double lo, double hi, const std::string& path,
                  const char* section, const char* valid) {
  const toml::node* n = t.get(key);
  if (!n) return dflt;
  double v = std::nan("");
  if (auto i = n->as_integer())
    v = static_cast<double>(i->get());
  else if (auto f = n->as_floating_point())
    v = f->get();
  else
    throw Error(loc(path, n->source()),
                std::string("key '") + key + "' in " + section + ": expected a number, got " + toml_type_name(*n));
  if (!(v >= lo && v <= hi))
    throw Error(loc(path, n->source()),
                std::string("key '") + key + "' in " + section + " is " + canonical(Value{v}) + "; valid: " + valid);
  return v;
}

// Seconds from a string "90s", "2.5 min", "1h", "MM:SS" or "HH:MM:SS" (at most 9 digits a
// field); -1 if it is none of them.
double parse_duration_s(const std::string& text) {
  std::size_t at = 0;
  const long long whole = digits_at(text, at, 9);
  if (whole < 0) return -1;
  if (at < text.size() && text[at] == ':') {  // a clock: H:MM or H:MM:SS, minutes and seconds below 60
    std::vector<long long> f{whole};
    while (at < text.size() && text[at] == ':' && f.size() < 3) {
      const std::size_t start = ++at;
      const long long v = digits_at(text, at, 2);
      if (v < 0 || v > 59 || at - start != 2) return -1;
      f.push_back(v);
    }
    if (at != text.size() || whole > 999) return -1;
    return f.size() == 3 ? static_cast<double>(f[0] * 3600 + f[1] * 60 + f[2]) : static_cast<double>(f[0] * 60 + f[1]);
  }
  double v = static_cast<double>(whole);
  if (at < text.size() && text[at] == '.') {
    const std::size_t start = ++at;
    const long long frac = digits_at(text, at, 9);
    if (frac < 0) return -1;
    v += static_cast<double>(frac) / std::pow(10.0, static_cast<double>(at - start));
  }
  if (at < text.size() && text[at] == ' ') ++at;
  const std::string unit = text.substr(at);
  if (unit == "s") return v;
  if (unit == "min") return v * 60;
  if (unit == "h") return v * 3600;
  return -1;
}

// A duration key's value in seconds: a number of either TOML type, or a string parse_duration_s
// reads; -1 when it is neither.
double duration_s(const toml::node& n) {
  if (auto i = n.as_integer()) return static_cast<double>(i->get());
  if (auto f = n.as_floating_point()) return f->get();
  if (auto str = n.as_string()) return parse_duration_s(str->get());
  return -1;
}

void parse_auto_repetitions(const toml::table& t, const std::string& path, AutoRepetitions& a) {
  const char* section = "[auto_repetitions]";
  reject_unknown(t, kAutoRepetitionKeys, path, section);
  a.ci_rel_width = get_number(t, "ci_rel_width", a.ci_rel_width, 1e-6, 10, path, section,
                              "the interval's width relative to the median, e.g. 0.02 (2%), from 1e-6 to 10");
  a.confidence = get_number(t, "confidence", a.confidence, 0.5, 0.9999, path, section, "0.5 to 0.9999, e.g. 0.95");
  const int least = smallest_n_with_median_ci(a.confidence);
  a.min = static_cast<int>(get_int(t, "min", std::max(a.min, least), 1, 1000000, path, section));
  if (a.min < least)
    throw Error(loc(path, t.get("min")->source()),
                "key 'min' in [auto_repetitions] is " + std::to_string(a.min) + "; the median's exact " +
                    canonical(Value{a.confidence * 100}) + "% interval needs at least " + std::to_string(least) +
                    " repetitions, so valid: " + std::to_string(least) + " to 1000000");
  a.max = static_cast<int>(get_int(t, "max", std::max(a.max, a.min), 1, 1000000, path, section));
  if (a.max < a.min)
    throw Error(loc(path, t.get("max")->source()), "key 'max' in [auto_repetitions] is " + std::to_string(a.max) +
                                                       ", below min = " + std::to_string(a.min) +
                                                       "; valid: " + std::to_string(a.min) + " to 1000000");
  if (const toml::node* n = t.get("max_time")) {
    const double v = duration_s(*n);
    if (!(v > 0 && v <= 7 * 24 * 3600.0))
      throw Error(loc(path, n->source()),
                  "key 'max_time' in [auto_repetitions] is not a duration of a point's repetitions; "
                  "valid: seconds (e.g. 90 or 0.5), or \"90s\", \"2min\", \"1h\", \"MM:SS\", "
                  "\"HH:MM:SS\", more than 0 and at most a week");
    a.max_time_s = v;
  }
}

PackingSettings parse_packing(const toml::table& t, const std::string& path, const std::filesystem::path& base) {
  const char* section = "[packing]";
  reject_unknown(t, kPackingKeys, path, section);
  PackingSettings s;
  s.present = true;
  s.where = loc(path, t.source());
  s.margin = get_number(t, "margin", s.margin, 0, 0.9, path, section,
                        "a fraction of the time limit kept free, 0 to 0.9, e.g. 0.2");
  s.gflops =
      get_number(t, "gflops", s.gflops, 1e-6, 1e9, path, section, "a rank's GFLOP/s for the time model, more than 0");
  s.gbps = get_number(t, "gbps", s.gbps, 1e-6, 1e9, path, section, "a rank's GB/s for the time model, more than 0");
  s.point_overhead_s =
      get_number(t, "point_overhead_s", s.point_overhead_s, 0, 1e6, path, section, "seconds, 0 or more");
  s.default_point_s = get_number(t, "default_point_s", s.default_point_s, 0, 1e7, path, section,
                                 "seconds for a point nothing else estimates, 0 (refuse such points) or more");
  if (const toml::node* n = t.get("job_time")) {
    s.job_time_where = loc(path, n->source());
    const double v = duration_s(*n);
    if (!(v >= 1 && v <= 365 * 24 * 3600.0))
      throw Error(s.job_time_where,
                  "key 'job_time' in [packing] is not a job's time; valid: seconds (e.g. 3600), or \"90s\", "
                  "\"30min\", \"2h\", \"MM:SS\", \"HH:MM:SS\", at least 1 s");
    s.job_time_s = v;
  }
  if (const toml::node* n = t.get("times_from")) {
    s.times_from_where = loc(path, n->source());
    const toml::array* arr = n->as_array();
    if (!arr)
      throw Error(s.times_from_where,
                  "key 'times_from' in [packing]: expected an array of run directories, e.g. [\"runs/last-week\"]");
    for (auto&& e : *arr) {
      auto str = e.as_string();
      if (!str || str->get().empty() || has_control_chars(str->get()))
        throw Error(loc(path, e.source()),
                    "key 'times_from' in [packing]: each entry must be a run directory's path "
                    "(relative paths are relative to the campaign file)");
      std::filesystem::path d(str->get());
      if (d.is_relative()) d = base / d;
      s.times_from.push_back(d.lexically_normal().string());
      s.times_from_at.push_back(loc(path, e.source()));
    }
  }
  return s;
}

// A Slurm time limit key ("time_limit") of `section`: minutes; 0 when absent.
int time_limit_key(const toml::table& t, const std::string& path, const char* section) {
  const toml::node* n = t.get("time_limit");
  if (!n) return 0;
  std::string text;
  if (auto i = n->as_integer())
    text = std::to_string(i->get());
  else if (auto str = n->as_string())
    text = str->get();
  const int minutes = parse_time_limit(text);
  if (minutes <= 0)
    throw Error(loc(path, n->source()),
                std::string("key 'time_limit' in ") + section + " is " +
                    (text.empty() ? std::string("not a time") : quote_value(text)) +
                    "; valid: minutes (e.g. 30) or \"HH:MM:SS\", \"D-HH:MM:SS\", at least one minute");
  return minutes;
}

SlurmSettings parse_slurm(const toml::table& t, const std::string& path) {
  reject_unknown(t, kSlurmKeys, path, "[slurm]");
  SlurmSettings s;
  s.present = true;
  s.where = loc(path, t.source());
  const Word name_re{"_.-", 128}, constraint_re{"_.&|*:,()[]-", 256}, gres_re{"_.:,=-", 256}, module_re{"_.+/@-", 256};
  const char* names = "1-128 letters, digits, '_', '.', '-'";
  s.partition = slurm_word(t, "partition", path, names, name_re);
  s.account = slurm_word(t, "account", path, names, name_re);
  s.qos = slurm_word(t, "qos", path, names, name_re);
  s.constraint = slurm_word(t, "constraint", path,
                            "a feature expression of letters, digits and _ . & | * : , ( ) [ ] -", constraint_re);
  s.gres = slurm_word(t, "gres", path, "e.g. gpu:1 (letters, digits, _ . : , = -)", gres_re);
  if (t.get("mpi")) s.mpi = slurm_word(t, "mpi", path, "an srun --mpi plugin name, e.g. pmix, pmi2, none", name_re);
  s.time_limit_min = time_limit_key(t, path, "[slurm]");
  s.reservation = slurm_word(t, "reservation", path, names, name_re);
  if (const toml::node* n = t.get("module_init")) {
    auto str = n->as_string();
    if (!str || str->get().empty() || str->get()[0] != '/' || has_control_chars(str->get()))
      throw Error(loc(path, n->source()),
                  "key 'module_init' in [slurm]: valid: the absolute path of the site's script that "
                  "defines `module` for bash (e.g. \"/etc/profile.d/modules.sh\", "
                  "\"/opt/cray/pe/modules/default/init/bash\")");
    s.module_init = str->get();
  }
  if (const toml::node* n = t.get("signal_before_limit")) {
    const double v = duration_s(*n);
    s.signal_where = loc(path, n->source());
    if (!(v >= 0) || v > 65535)
      throw Error(s.signal_where,
                  "key 'signal_before_limit' in [slurm] is not a duration Slurm can signal before a limit; valid: "
                  "e.g. \"120s\", \"2min\" or a number of seconds from 0 (no signal) to 65535");
    s.signal_before_limit_s = static_cast<int>(std::ceil(v));
  }
  if (const toml::node* n = t.get("analysis")) {
    const toml::table* a = n->as_table();
    if (!a)
      throw Error(loc(path, n->source()),
                  "key 'analysis' in [slurm]: expected a table ([slurm.analysis]) of the analysis job's "
                  "partition, account, qos, reservation and time_limit");
    reject_unknown(*a, kSlurmAnalysisKeys, path, "[slurm.analysis]");
    s.analysis.partition = slurm_word(*a, "partition", path, names, name_re);
    s.analysis.account = slurm_word(*a, "account", path, names, name_re);
    s.analysis.qos = slurm_word(*a, "qos", path, names, name_re);
    s.analysis.reservation = slurm_word(*a, "reservation", path, names, name_re);
    s.analysis.time_limit_min = time_limit_key(*a, path, "[slurm.analysis]");
  }
  s.cpus_per_task = static_cast<int>(get_int(t, "cpus_per_task", 1, 1, 4096, path, "[slurm]"));
  if (const toml::node* n = t.get("mem_per_node")) {
    std::string text;
    if (auto i = n->as_integer())
      text = std::to_string(i->get());
    else if (auto str = n->as_string())
      text = str->get();
    s.mem_per_node_bytes = parse_memory_size(text);
    s.mem_where = loc(path, n->source());
    if (s.mem_per_node_bytes <= 0)
      throw Error(s.mem_where,
                  "key 'mem_per_node' in [slurm] is " + (text.empty() ? std::string("not a size") : quote_value(text)) +
                      "; valid: the memory of one node as Slurm writes it, e.g. 64G, 512000M, 1T, or a number of MiB");
  }
  s.throttle = static_cast<int>(get_int(t, "throttle", 0, 0, 100000, path, "[slurm]"));
  s.max_retries = static_cast<int>(get_int(t, "max_retries", 0, 0, 100, path, "[slurm]"));
  if (const toml::node* n = t.get("modules")) {
    auto arr = n->as_array();
    if (!arr) throw Error(loc(path, n->source()), "key 'modules' in [slurm]: expected an array of module names");
    for (auto&& m : *arr) {
      auto str = m.as_string();
      if (!str || !module_re.matches(str->get()))
        throw Error(loc(path, m.source()),
                    "key 'modules' in [slurm]: each module must be a name of letters, digits and _ . + / @ -");
      s.modules.push_back(str->get());
    }
  }
  for (const char* key : {"array", "analysis_job"})
    if (const toml::node* n = t.get(key)) {
      auto b = n->as_boolean();
      if (!b) throw Error(loc(path, n->source()), std::string("key '") + key + "' in [slurm]: expected true or false");
      (std::string(key) == "array" ? s.array : s.analysis_job) = b->get();
    }
  for (const char* key : {"retry_time_factor", "budget_node_hours"})
    if (const toml::node* n = t.get(key)) {
      double v = n->is_integer() ? static_cast<double>(n->as_integer()->get()) : n->value_or(-1.0);
      const bool factor = std::string(key) == "retry_time_factor";
      if (!(v >= (factor ? 1.0 : 0.0)) || v > 1e9)
        throw Error(loc(path, n->source()),
                    std::string("key '") + key + "' in [slurm]: valid: " +
                        (factor ? "a number >= 1 (1: keep the limit)" : "a number of node-hours >= 0 (0: no budget)"));
      (factor ? s.retry_time_factor : s.budget_node_hours) = v;
    }
  return s;
}

}  // namespace

std::int64_t parse_memory_size(const std::string& text) { return parse_size(text, 20); }  // Slurm's: MiB bare

int parse_time_limit(const std::string& text) {
  // Slurm's forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS; at most 7 digits a field
  // (19 years in minutes), so nothing below overflows.
  std::size_t at = 0;
  long long days = -1;
  const std::size_t dash = text.find('-');
  if (dash != std::string::npos) {
    days = digits_at(text, at, 7);
    if (days < 0 || at != dash) return -1;
    ++at;
  }
  std::vector<long long> f;
  for (;;) {
    const long long v = digits_at(text, at, 7);
    if (v < 0) return -1;
    f.push_back(v);
    if (at == text.size()) break;
    if (text[at] != ':' || f.size() == 3) return -1;
    ++at;
  }
  auto num = [&](std::size_t i) { return i < f.size() ? f[i] : 0LL; };
  long long minutes = 0;
  if (days >= 0)
    minutes = days * 1440 + num(0) * 60 + num(1) + (num(2) > 0 ? 1 : 0);  // D-HH[:MM[:SS]]
  else if (f.size() == 3)
    minutes = num(0) * 60 + num(1) + (num(2) > 0 ? 1 : 0);  // HH:MM:SS
  else if (f.size() == 2)
    minutes = num(0) + (num(1) > 0 ? 1 : 0);  // MM:SS
  else
    minutes = num(0);  // MM
  return minutes > 0 && minutes < 100000000 ? static_cast<int>(minutes) : -1;
}

namespace {

// The [[zip]] groups: each names two or more axes of equal length, each axis in one group at most,
// and no combination twice. Returns the zipped axes' names.
std::set<std::string> parse_zips(const toml::array& zips, Campaign& c, const std::string& path) {
  std::set<std::string> zipped;
  for (auto&& z : zips) {
    const toml::table& zt = *z.as_table();
    reject_unknown(zt, {"axes"}, path, "[[zip]]");
    ZipGroup g{{}, loc(path, zt.source())};
    auto arr = zt.get_as<toml::array>("axes");
    if (!arr || arr->size() < 2)
      throw Error(g.where, "[[zip]] needs axes = [\"a\", \"b\", ...] naming at least two axes");
    size_t len = 0;
    std::vector<const Axis*> members;
    for (auto&& e : *arr) {
      auto s = e.as_string();
      if (!s) throw Error(loc(path, e.source()), "[[zip]] axes must be axis names (strings)");
      std::string n = s->get();
      const Axis* found = nullptr;
      for (const auto& a : c.axes) found = a.name == n ? &a : found;
      if (!found) {
        std::vector<std::string> an;
        for (const auto& a : c.axes) an.push_back(a.name);
        throw Error(loc(path, e.source()), "[[zip]] names '" + n + "', which is not an axis" + did_you_mean(n, an) +
                                               " (axes: " + join(an, ", ") + ")");
      }
      if (!zipped.insert(n).second)
        throw Error(loc(path, e.source()), "axis '" + n + "' is in more than one [[zip]] group");
      if (len && found->values.size() != len)
        throw Error(loc(path, e.source()), "[[zip]] axes must have equal lengths: '" + n + "' has " +
                                               std::to_string(found->values.size()) + " values, '" + g.axes.front() +
                                               "' has " + std::to_string(len));
      len = found->values.size();
      g.axes.push_back(n);
      members.push_back(found);
    }
    // Zipped axes may repeat a value (m = [256, 256], n = [128, 256]); the group may not repeat a
    // combination.
    std::set<std::string> tuples;
    for (std::size_t i = 0; i < len; ++i) {
      std::string tuple;
      for (const Axis* a : members) tuple += (tuple.empty() ? "" : ", ") + canonical(a->values[i].value);
      if (!tuples.insert(tuple).second)
        throw Error(members.front()->values[i].where, "[[zip]] group (" + join(g.axes, ", ") + ") lists (" + tuple +
                                                          ") twice, at position " + std::to_string(i + 1));
    }
    c.zips.push_back(std::move(g));
  }
  return zipped;
}

// [campaign]'s repetitions: a count, or "auto" (the count then comes from [auto_repetitions]).
void parse_repetitions(const toml::table& ct, const std::string& path, Campaign& c) {
  c.repetitions_where = ct.get("repetitions") ? loc(path, ct.get("repetitions")->source()) : loc(path, ct.source());
  if (const toml::node* rn = ct.get("repetitions"); rn && rn->is_string()) {
    if (rn->value_or(std::string()) != "auto")
      throw Error(c.repetitions_where, "key 'repetitions' in [campaign] is " +
                                           quote_value(rn->value_or(std::string())) +
                                           "; valid: an integer 1 to 1000000, or \"auto\" (repeat until the median's "
                                           "interval is narrow enough; settings in [auto_repetitions])");
    c.auto_repetitions.on = true;
  } else {
    c.repetitions = static_cast<int>(get_int(ct, "repetitions", 10, 1, 1000000, path));
  }
}

// [campaign]'s template, a name, never a path ("../../x" must not run a file outside the template
// directories), and templates_dir, relative to the campaign file.
void parse_template(const toml::table& ct, const std::string& path, const std::filesystem::path& base, Campaign& c) {
  c.template_where = loc(path, ct.source());
  c.template_name = get_string(ct, "template", "local", path, &c.template_where);
  if (!Word{"_-", 64}.matches(c.template_name))
    throw Error(c.template_where, "key 'template' in [campaign] is " + quote_value(c.template_name) +
                                      "; valid: a template's name, 1-64 letters, digits, '_', '-' (not a path: "
                                      "templates are looked up in d500's templates/ and in templates_dir)");
  if (ct.get("templates_dir")) {
    c.templates_dir = get_string(ct, "templates_dir", "", path, &c.templates_dir_where);
    if (c.templates_dir.empty() || has_control_chars(c.templates_dir))
      throw Error(c.templates_dir_where,
                  "key 'templates_dir' in [campaign] must be a directory's path without control "
                  "characters (relative paths are relative to the campaign file)");
    std::filesystem::path d(c.templates_dir);
    if (d.is_relative()) d = base / d;
    c.templates_dir = d.lexically_normal().string();
    if (!std::filesystem::is_directory(c.templates_dir))
      throw Error(c.templates_dir_where,
                  "key 'templates_dir' in [campaign]: " + c.templates_dir + " is not a directory");
  }
}

}  // namespace

Campaign parse_campaign_text(const std::string& text, const std::string& path, const std::string& base_dir) {
  // Relative paths in the campaign (templates_dir, times_from) are relative to its own file,
  // or to where the copy in a run directory was first planned from.
  const std::filesystem::path base =
      base_dir.empty() ? std::filesystem::absolute(path).parent_path() : std::filesystem::path(base_dir);
  Campaign c;
  c.path = path;
  c.text = text;
  c.hash = hex64(fnv1a64(text));

  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw Error(loc(path, e.source()), "TOML syntax error: " + std::string(e.description()));
  }
  reject_unknown(root, kTopLevel, path, "the campaign file");

  const toml::node* cn = root.get("campaign");
  if (!cn) throw Error(Location{path, 1, 1}, "missing [campaign] table (it needs at least name = \"...\")");
  const toml::table& ct = as_table(*cn, path, "[campaign]");
  reject_unknown(ct, kCampaignKeys, path, "[campaign]");

  const toml::node* name = ct.get("name");
  if (!name) throw Error(loc(path, ct.source()), "[campaign] needs a name, e.g. name = \"scaling-study\"");
  c.name = get_string(ct, "name", "", path);
  if (!Word{"_.-", 64}.matches(c.name) || c.name.find_first_not_of('.') == std::string::npos)
    throw Error(loc(path, name->source()), "key 'name' in [campaign] is " + quote_value(c.name) +
                                               "; valid: 1-64 letters, digits, '_', '.', '-', not only dots "
                                               "(the name is a directory: runs/<name>)");
  c.description = get_string(ct, "description", "", path);
  parse_repetitions(ct, path, c);
  if (const toml::node* pn = root.get("packing"))
    c.packing = parse_packing(as_table(*pn, path, "[packing]"), path, base);
  if (const toml::node* an = root.get("auto_repetitions")) {
    const toml::table& at = as_table(*an, path, "[auto_repetitions]");
    if (!c.auto_repetitions.on)
      throw Error(loc(path, at.source()),
                  "[auto_repetitions] applies only with repetitions = \"auto\" in [campaign] (it is " +
                      std::to_string(c.repetitions) + "); set that, or remove the table");
    parse_auto_repetitions(at, path, c.auto_repetitions);
  }
  if (c.auto_repetitions.on) c.repetitions = c.auto_repetitions.max;
  c.warmups = static_cast<int>(get_int(ct, "warmups", 2, 0, 100000, path));
  c.points_per_job = static_cast<int>(get_int(ct, "points_per_job", 0, 0, 1000000, path));
  c.points_per_job_where =
      ct.get("points_per_job") ? loc(path, ct.get("points_per_job")->source()) : loc(path, ct.source());
  parse_template(ct, path, base, c);

  std::set<std::string> names;
  auto note_name = [&](const Axis& a) {
    if (!names.insert(a.name).second)
      throw Error(a.where, "key '" + a.name + "' is set in both [fixed] and [axes]; keep one");
  };
  if (const toml::node* fn = root.get("fixed")) {
    for (auto&& [k, v] : as_table(*fn, path, "[fixed]")) {
      c.fixed.push_back(axis(k, v, path, false));
      note_name(c.fixed.back());
    }
  }
  if (const toml::node* an = root.get("axes")) {
    for (auto&& [k, v] : as_table(*an, path, "[axes]")) {
      c.axes.push_back(axis(k, v, path, true));
      note_name(c.axes.back());
    }
  }
  // Replicated launches: an implicit first (slowest-varying) axis `launch` = 1..k, so each
  // launch of a point is its own point (own id, own record) and the planner keeps launches in
  // separate jobs, launch after launch.
  c.launches = static_cast<int>(get_int(ct, "launches", 1, 1, 100, path));
  if (c.launches > 1 || names.count("launch")) {
    const Location lw = ct.get("launches") ? loc(path, ct.get("launches")->source()) : loc(path, ct.source());
    for (const auto* list : {&c.fixed, &c.axes})
      for (const auto& a : *list)
        if (a.name == "launch")
          throw Error(a.where,
                      "key 'launch' is set by d500 (launches = k in [campaign] gives launch = 1..k); "
                      "remove it and set launches instead");
    Axis launch{"launch", {}, lw};
    for (int k = 1; k <= c.launches; ++k) launch.values.push_back(LocatedValue{Value{std::int64_t{k}}, lw});
    c.axes.insert(c.axes.begin(), launch);
  }

  auto array_of_tables = [&](const char* key) -> const toml::array* {
    const toml::node* n = root.get(key);
    if (!n) return nullptr;
    auto arr = n->as_array();
    if (!arr || !arr->is_array_of_tables())
      throw Error(loc(path, n->source()),
                  std::string("'") + key + "' must be an array of tables: write [[" + key + "]]");
    return arr;
  };

  std::set<std::string> zipped;  // the axes in a [[zip]] group
  if (auto zips = array_of_tables("zip")) zipped = parse_zips(*zips, c, path);
  for (const auto& a : c.axes) {
    if (zipped.count(a.name)) continue;
    std::set<std::string> seen;
    for (const auto& v : a.values)
      if (!seen.insert(canonical(v.value)).second)
        throw Error(v.where, "axis '" + a.name + "' lists the value " + canonical(v.value) + " twice");
  }

  if (const toml::node* sn = root.get("slurm")) c.slurm = parse_slurm(as_table(*sn, path, "[slurm]"), path);

  if (auto excl = array_of_tables("exclude")) {
    for (auto&& e : *excl) {
      const toml::table& et = *e.as_table();
      Rule r{{}, loc(path, et.source())};
      if (et.empty()) throw Error(r.where, "an [[exclude]] rule with no keys would drop every point");
      for (auto&& [k, v] : et) r.match.push_back(axis(k, v, path, true));
      c.excludes.push_back(std::move(r));
    }
  }
  return c;
}

Campaign load_campaign(const std::string& path, const std::string& base_dir) {
  return parse_campaign_text(read_file(path), path, base_dir);
}

}  // namespace d500
