#include "plan/jobspec.hpp"

#include <sstream>
#include <toml++/toml.h>

#include "common/text.hpp"
#include "plan/plan.hpp"

namespace d500 {

JobSpec make_job_spec(const Plan& plan, const Job& job) {
  JobSpec s;
  s.id = job.id;
  s.campaign = plan.campaign.name;
  s.campaign_hash = plan.campaign.hash;
  s.nodes = job.nodes;
  s.ranks_per_node = job.ranks_per_node;
  s.repetitions = plan.campaign.repetitions;
  s.warmups = plan.campaign.warmups;
  for (auto i : job.points) {
    const Point& p = plan.points[i];
    s.points.push_back({p.id, p.canonical, p.level, p.params});
  }
  return s;
}

std::string toml_string(const std::string& s) {
  std::ostringstream o;
  o << toml::value<std::string>(s);
  return o.str();
}

std::string job_spec_toml(const JobSpec& s) {
  toml::table job{{"id", s.id},
                  {"campaign", s.campaign},
                  {"campaign_hash", s.campaign_hash},
                  {"nodes", s.nodes},
                  {"ranks_per_node", s.ranks_per_node},
                  {"repetitions", s.repetitions},
                  {"warmups", s.warmups}};
  toml::array points;
  for (const auto& p : s.points) {
    toml::table params;
    for (const auto& [k, v] : p.params)
      std::visit([&](const auto& x) { params.insert(k, x); }, v);
    points.push_back(toml::table{{"id", p.id}, {"canonical", p.canonical}, {"level", p.level}, {"params", params}});
  }
  toml::table root{{"job", job}, {"point", points}};
  std::ostringstream o;
  o << "# Written by d500 plan: the points of one job, read by d500-worker.\n" << root << "\n";
  return o.str();
}

JobSpec read_job_spec(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw Error(Location{path, static_cast<int>(e.source().begin.line), static_cast<int>(e.source().begin.column)},
                "job spec: " + std::string(e.description()));
  }
  auto need = [&](auto opt, const char* key) {
    if (!opt) throw Error(path + ": job spec lacks '" + key + "' (was it written by d500 plan?)");
    return *opt;
  };
  JobSpec s;
  s.id = need(root["job"]["id"].value<std::string>(), "job.id");
  s.campaign = need(root["job"]["campaign"].value<std::string>(), "job.campaign");
  s.campaign_hash = need(root["job"]["campaign_hash"].value<std::string>(), "job.campaign_hash");
  s.nodes = need(root["job"]["nodes"].value<int>(), "job.nodes");
  s.ranks_per_node = need(root["job"]["ranks_per_node"].value<int>(), "job.ranks_per_node");
  s.repetitions = need(root["job"]["repetitions"].value<int>(), "job.repetitions");
  s.warmups = need(root["job"]["warmups"].value<int>(), "job.warmups");
  const toml::array* pts = root["point"].as_array();
  if (!pts) throw Error(path + ": job spec has no [[point]] entries");
  for (auto&& n : *pts) {
    const toml::table* t = n.as_table();
    if (!t) throw Error(path + ": [[point]] entries must be tables");
    PointSpec p;
    p.id = need((*t)["id"].value<std::string>(), "point.id");
    p.canonical = need((*t)["canonical"].value<std::string>(), "point.canonical");
    p.level = need((*t)["level"].value<int>(), "point.level");
    const toml::table* params = (*t)["params"].as_table();
    if (!params) throw Error(path + ": point " + p.id + " has no params table");
    for (auto&& [k, v] : *params) {
      std::string key(k.str());
      if (auto i = v.as_integer()) p.params[key] = std::int64_t{i->get()};
      else if (auto f = v.as_floating_point()) p.params[key] = f->get();
      else if (auto b = v.as_boolean()) p.params[key] = b->get();
      else if (auto str = v.as_string()) p.params[key] = str->get();
      else throw Error(path + ": point " + p.id + ": parameter '" + key + "' is not a scalar");
    }
    if (canonical_point(p.params) != p.canonical)
      throw Error(path + ": point " + p.id + ": parameters do not match its canonical form '" + p.canonical +
                  "' (was the spec edited?)");
    s.points.push_back(std::move(p));
  }
  return s;
}

}  // namespace d500
