#include "plan/jobspec.hpp"

#include <toml++/toml.h>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string_view>

#include "common/error.hpp"
#include "common/text.hpp"
#include "plan/plan.hpp"
#include "rundir/layout.hpp"
#include "workloads/registry.hpp"

namespace d500 {

JobSpec make_job_spec(const Plan& plan, const Job& job) {
  JobSpec s;
  s.id = job.id;
  s.campaign = plan.campaign.name;
  s.campaign_hash = plan.campaign.hash;
  s.nodes = job.nodes;
  s.ranks_per_node = job.ranks_per_node;
  s.repetitions = plan.campaign.repetitions;
  s.auto_repetitions = plan.campaign.auto_repetitions;
  s.warmups = plan.campaign.warmups;
  PointResolver resolver(plan);
  s.points.reserve(job.points.size());
  for (auto i : job.points) {
    const Point& p = plan.points[i];
    s.points.push_back({p.id, p.canonical, p.level, resolver.params(p)});
  }
  return s;
}

namespace {
// A key as TOML writes it: bare when it is one (A-Za-z0-9_-), quoted otherwise.
void append_toml_key(std::string& out, const std::string& k) {
  const bool bare = !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (bare)
    out += k;
  else
    out += toml_string(k);
}

// A value as TOML writes it: a string escaped by toml_string; a number or boolean in its
// canonical text, which is already TOML (shortest round-trip reals with ".0" kept, inf, nan).
void append_toml_value(std::string& out, const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v))
    out += toml_string(*s);
  else
    out += canonical(v);
}
}  // namespace

std::string toml_string(const std::string& s) {
  // A TOML basic string: quotes, backslashes and control characters escaped, the rest (UTF-8,
  // as every campaign value is: toml++ read it) as is.
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04X", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

void append_toml_params(std::string& out, const Params& params) {
  bool first = true;
  for (const auto& [k, v] : params) {
    if (!first) out += ", ";
    first = false;
    append_toml_key(out, k);
    out += " = ";
    append_toml_value(out, v);
  }
}

namespace {
// Written directly rather than through a toml::table: a job of 10^4 points is written in
// milliseconds. Every string goes through toml_string; the plan's tests read specs back with
// toml++ (read_job_spec), hostile strings included.
std::string spec_head(const std::string& id, const std::string& campaign, const std::string& hash, int nodes, int rpn,
                      int repetitions, const AutoRepetitions& a, int warmups, std::size_t points) {
  std::string o;
  o.reserve(256 + points * 320);
  o += "# Written by d500 plan: the points of one job, read by d500-worker.\n[job]\n";
  o += "campaign = " + toml_string(campaign) + "\n";
  o += "campaign_hash = " + toml_string(hash) + "\n";
  o += "id = " + toml_string(id) + "\n";
  o += "nodes = " + std::to_string(nodes) + "\n";
  o += "ranks_per_node = " + std::to_string(rpn) + "\n";
  o += "repetitions = " + std::to_string(repetitions) + "\n";
  if (a.on)
    o += "auto_repetitions = { ci_rel_width = " + canonical(Value{a.ci_rel_width}) +
         ", confidence = " + canonical(Value{a.confidence}) + ", min = " + std::to_string(a.min) +
         ", max = " + std::to_string(a.max) + ", max_time_s = " + canonical(Value{a.max_time_s}) + " }\n";
  o += "warmups = " + std::to_string(warmups) + "\n";
  return o;
}

void append_point(std::string& o, const std::string& id, const std::string& canonical, int level,
                  std::string_view params) {
  o += "\n[[point]]\nid = ";
  o += toml_string(id);
  o += "\ncanonical = ";
  o += toml_string(canonical);
  o += "\nlevel = ";
  o += std::to_string(level);
  o += "\nparams = { ";
  o += params;
  o += " }\n";
}
}  // namespace

std::string job_spec_toml(const JobSpec& s) {
  std::string o = spec_head(s.id, s.campaign, s.campaign_hash, s.nodes, s.ranks_per_node, s.repetitions,
                            s.auto_repetitions, s.warmups, s.points.size());
  std::string params;
  for (const auto& p : s.points) {
    params.clear();
    append_toml_params(params, p.params);
    append_point(o, p.id, p.canonical, p.level, params);
  }
  return o;
}

std::string job_spec_text(const Plan& plan, const Job& job, std::uint64_t offset) {
  const Campaign& c = plan.campaign;
  std::string o =
      spec_head(job.id, c.name, c.hash, job.nodes, job.ranks_per_node, c.repetitions, c.auto_repetitions, c.warmups, 0);
  o += "\n# This job's points: `count` rows of the plan's points.csv from byte `offset`.\n[rows]\nfile = "
       "\"points.csv\"\n";
  o += "offset = " + std::to_string(offset) + "\ncount = " + std::to_string(job.points.size()) + "\n";
  return o;
}

namespace {
// The text of parameter `key` in a canonical text, as written (a bare word: one that reads as a
// number or boolean was written bare).
std::string bare_token(const std::string& canonical, const std::string& key) {
  const std::string at = " " + key + "=";
  const std::size_t from = canonical.find(at);
  if (from == std::string::npos) return "";
  const std::size_t begin = from + at.size(), end = canonical.find(' ', begin);
  return canonical.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}
}  // namespace

Params params_of_canonical(const std::string& canonical, const std::string& where) {
  Params p = parse_canonical_point(canonical);
  const std::string workload = std::get<std::string>(p.at("workload"));
  const WorkloadInfo* w = builtin_workloads().find(workload);
  if (!w) throw Error(where + ": unknown workload '" + workload + "' in point '" + canonical + "'");
  auto give_type = [&](const ParamSpec& spec) {
    auto it = p.find(spec.name);
    if (it == p.end()) {
      if (spec.type == ValueType::String) p[spec.name] = std::string();  // left out: unset
      return;
    }
    Value& v = it->second;
    if (type_of(v) == spec.type) return;
    if (spec.type == ValueType::String)
      v = bare_token(canonical, spec.name);
    else if (spec.type == ValueType::Real && type_of(v) == ValueType::Int)
      v = static_cast<double>(std::get<std::int64_t>(v));
    else
      throw Error(where + ": parameter '" + spec.name + "' of point '" + canonical + "' is " + type_name(type_of(v)) +
                  ", not " + type_name(spec.type));
  };
  for (const auto& spec : common_params()) give_type(spec);
  for (const auto& spec : w->params) give_type(spec);
  return p;
}

namespace {
// A spec's value `key`, which d500 writes: its absence says the file is not a spec d500 wrote.
template <class T>
T need(std::optional<T> value, const std::string& path, const std::string& key) {
  if (!value) throw Error(path + ": job spec lacks '" + key + "' (was it written by d500 plan?)");
  return *value;
}

// The rows of points.csv a spec names, as points: each row the spec's job's, its id its text's.
std::vector<PointSpec> read_rows(const std::string& spec_path, const std::string& job, const toml::table& rows) {
  const std::string file = need(rows["file"].value<std::string>(), spec_path, "rows.file");
  const std::int64_t offset = need(rows["offset"].value<std::int64_t>(), spec_path, "rows.offset");
  const std::int64_t count = need(rows["count"].value<std::int64_t>(), spec_path, "rows.count");
  if (file != "points.csv")
    throw Error(spec_path + ": rows.file is \"" + printable(file) + "\"; valid: \"points.csv\"");
  const RunLayout layout = RunLayout::of_spec(spec_path);
  const std::string csv = layout.points_csv().string();
  std::ifstream in(csv, std::ios::binary);
  if (!in) throw Error(csv + ": cannot open the plan's points, which job spec " + spec_path + " names");
  in.seekg(0, std::ios::end);
  const std::int64_t size = static_cast<std::int64_t>(in.tellg());
  if (offset < 0 || offset > size || count < 0 || count > size)
    throw Error(spec_path + ": rows offset = " + std::to_string(offset) + ", count = " + std::to_string(count) +
                " do not fit " + csv + " (" + std::to_string(size) + " bytes; was the plan edited?)");
  std::string header;
  in.seekg(0);
  std::getline(in, header);
  const bool estimates = points_csv_has_estimates(header);
  in.seekg(offset);
  std::vector<PointSpec> points;
  points.reserve(static_cast<std::size_t>(count));
  std::string line;
  for (std::int64_t r = 0; r < count; ++r) {
    PlannedPoint x;
    if (!std::getline(in, line) || !parse_points_csv_row(line, estimates, x) || x.job != job)
      throw Error(csv + ": row " + std::to_string(r + 1) + " of the " + std::to_string(count) + " from byte " +
                  std::to_string(offset) + " that job spec " + spec_path + " names is not a point of job " + job +
                  " (was the plan edited?)");
    const std::string where = csv + " (job " + job + ", row " + std::to_string(r + 1) + ")";
    if (hex64(fnv1a64(x.canonical)) != x.id)
      throw Error(where + ": point " + x.id + " is not the id of its canonical text '" + x.canonical +
                  "' (was the plan edited?)");
    points.push_back({x.id, x.canonical, x.level, params_of_canonical(x.canonical, where)});
  }
  return points;
}

// A spec's [[point]] tables (the form a resubmission writes), as points.
std::vector<PointSpec> read_point_tables(const std::string& path, const toml::array& pts) {
  std::vector<PointSpec> points;
  for (auto&& n : pts) {
    const toml::table* t = n.as_table();
    if (!t) throw Error(path + ": [[point]] entries must be tables");
    PointSpec p;
    p.id = need((*t)["id"].value<std::string>(), path, "point.id");
    p.canonical = need((*t)["canonical"].value<std::string>(), path, "point.canonical");
    p.level = need((*t)["level"].value<int>(), path, "point.level");
    const toml::table* params = (*t)["params"].as_table();
    if (!params) throw Error(path + ": point " + p.id + " has no params table");
    for (auto&& [k, v] : *params) {
      std::string key(k.str());
      if (auto i = v.as_integer())
        p.params[key] = std::int64_t{i->get()};
      else if (auto f = v.as_floating_point())
        p.params[key] = f->get();
      else if (auto b = v.as_boolean())
        p.params[key] = b->get();
      else if (auto str = v.as_string())
        p.params[key] = str->get();
      else
        throw Error(path + ": point " + p.id + ": parameter '" + key + "' is not a scalar");
    }
    points.push_back(std::move(p));
  }
  return points;
}
}  // namespace

JobSpec read_job_spec(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw Error(Location{path, static_cast<int>(e.source().begin.line), static_cast<int>(e.source().begin.column)},
                "job spec: " + std::string(e.description()));
  }
  JobSpec s;
  s.id = need(root["job"]["id"].value<std::string>(), path, "job.id");
  s.campaign = need(root["job"]["campaign"].value<std::string>(), path, "job.campaign");
  s.campaign_hash = need(root["job"]["campaign_hash"].value<std::string>(), path, "job.campaign_hash");
  s.nodes = need(root["job"]["nodes"].value<int>(), path, "job.nodes");
  s.ranks_per_node = need(root["job"]["ranks_per_node"].value<int>(), path, "job.ranks_per_node");
  s.repetitions = need(root["job"]["repetitions"].value<int>(), path, "job.repetitions");
  s.warmups = need(root["job"]["warmups"].value<int>(), path, "job.warmups");
  if (const toml::table* a = root["job"]["auto_repetitions"].as_table()) {
    AutoRepetitions& r = s.auto_repetitions;
    r.on = true;
    r.ci_rel_width = need((*a)["ci_rel_width"].value<double>(), path, "job.auto_repetitions.ci_rel_width");
    r.confidence = need((*a)["confidence"].value<double>(), path, "job.auto_repetitions.confidence");
    r.min = need((*a)["min"].value<int>(), path, "job.auto_repetitions.min");
    r.max = need((*a)["max"].value<int>(), path, "job.auto_repetitions.max");
    r.max_time_s = need((*a)["max_time_s"].value<double>(), path, "job.auto_repetitions.max_time_s");
    if (r.max != s.repetitions)
      throw Error(path + ": job.auto_repetitions.max differs from job.repetitions (was the spec edited?)");
  }
  if (const toml::table* rows = root["rows"].as_table()) {
    s.points = read_rows(path, s.id, *rows);
  } else {
    const toml::array* pts = root["point"].as_array();
    if (!pts) throw Error(path + ": job spec has neither [rows] nor [[point]] entries");
    s.points = read_point_tables(path, *pts);
  }
  // Either way, every point's parameters give back its canonical text (its identity).
  for (const auto& p : s.points)
    if (canonical_point(p.params) != p.canonical)
      throw Error(path + ": point " + p.id + ": parameters do not match its canonical form '" + p.canonical +
                  "' (was the spec edited?)");
  return s;
}

}  // namespace d500
