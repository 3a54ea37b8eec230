#include "analysis/names.hpp"

#include <algorithm>

#include "analysis/summary.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

// PointNames::own: per workload, each key some backend sets and another never does.
std::map<std::string, std::set<std::string>> backend_keys(const std::vector<PointRow>& rows) {
  std::map<std::string, std::map<std::string, std::set<std::string>>> set_by;  // workload -> backend -> keys set
  for (const auto& r : rows) {
    auto& keys = set_by[r.workload][r.backend];
    for (const auto& [k, v] : r.params)
      if (!is_unset(v) && k != "backend" && k != "workload") keys.insert(k);
  }
  std::map<std::string, std::set<std::string>> own;
  for (const auto& [workload, by_backend] : set_by)
    for (const auto& [backend, keys] : by_backend)
      for (const std::string& k : keys)
        for (const auto& [other, other_keys] : by_backend)
          if (!other_keys.count(k)) own[workload].insert(k);
  return own;
}

std::string param_text(const PointRow& r, const std::string& k) {
  const auto it = r.params.find(k);
  return it == r.params.end() || is_unset(it->second) ? "unset" : canonical(it->second);
}

}  // namespace

PointNames point_names(const std::vector<PointRow>& rows) {
  PointNames n;
  std::map<std::string, std::vector<const Params*>> by_workload;
  std::map<std::string, std::set<std::string>> backends;
  for (const auto& r : rows) {
    by_workload[r.workload].push_back(&r.params);
    backends[r.workload].insert(r.backend);
  }
  for (const auto& [w, b] : backends)
    if (b.size() == 1) n.lone_backend[w] = *b.begin();
  for (const auto& [w, points] : by_workload) {
    ParamSpread s = param_spread(points);
    if (!s.varying.empty()) n.varying[w] = std::move(s.varying);
    n.shared[w] = std::move(s.shared);
  }
  n.own = backend_keys(rows);
  for (const auto& [w, keys] : n.own)
    for (const std::string& k : keys) {
      std::map<std::string, std::set<std::string>> values;  // backend -> its points' values of k
      for (const auto& r : rows)
        if (r.workload == w) values[r.backend].insert(param_text(r, k));
      if (std::all_of(values.begin(), values.end(), [](const auto& v) { return v.second.size() == 1; })) {
        n.by_backend[w].insert(k);
        auto& vary = n.varying[w];
        vary.erase(std::remove(vary.begin(), vary.end(), k), vary.end());
      }
    }
  for (auto it = n.varying.begin(); it != n.varying.end();)
    it = it->second.empty() ? n.varying.erase(it) : std::next(it);
  for (const auto& [w, keys] : n.varying) {
    for (std::string& k : fixed_by_another(by_workload[w], keys)) n.fixed[w].insert(std::move(k));
    std::vector<const PointRow*> of;
    for (const auto& r : rows)
      if (r.workload == w) of.push_back(&r);
    for (const auto& same : same_value_groups(of, keys))
      for (std::size_t i = 1; i < same.size(); ++i) n.same_as[w][same[i]] = same[0];
  }
  return n;
}

std::string label_workload(const std::string& label) { return label.substr(0, label.find_first_of(":, ")); }

std::string label_rest(const std::string& label) {
  const std::size_t at = label.find_first_of(": ");
  return at == std::string::npos ? label : label.substr(at + 1);
}

std::string value_text(const PointRow& r, const std::string& k) {
  if (k == "ranks") return std::to_string(r.ranks);
  auto v = r.params.find(k);
  if (v == r.params.end()) return "-";
  return is_unset(v->second) ? "default" : canonical(v->second);
}

std::vector<std::vector<std::string>> same_value_groups(const std::vector<const PointRow*>& rows,
                                                        const std::vector<std::string>& keys) {
  std::vector<std::vector<std::string>> out;
  for (const auto& k : keys) {
    auto same = std::find_if(out.begin(), out.end(), [&](const std::vector<std::string>& g) {
      return std::all_of(rows.begin(), rows.end(),
                         [&](const PointRow* r) { return value_text(*r, g[0]) == value_text(*r, k); });
    });
    if (same == out.end())
      out.push_back({k});
    else
      same->push_back(k);
  }
  return out;
}

const std::set<std::string>* PointNames::own_of(const PointRow& r) const {
  const auto it = own.find(r.workload);
  return it == own.end() ? nullptr : &it->second;
}

std::string PointNames::who(const PointRow& r, const std::vector<const PointRow*>& group) const {
  const std::set<std::string>* keys = own_of(r);
  std::vector<const PointRow*> same;
  for (const auto* o : group)
    if (o->backend == r.backend) same.push_back(o);
  if (!keys || same.size() < 2) return r.backend;
  std::vector<std::string> parts;
  for (const std::string& k : *keys) {
    bool differs = false;
    for (const auto* o : same) differs = differs || param_text(*o, k) != param_text(r, k);
    if (differs) parts.push_back(k + "=" + param_text(r, k));
  }
  return parts.empty() ? r.backend : r.backend + " (" + join(parts, ", ") + ")";
}

bool PointNames::varies(const std::string& workload, const std::string& name) const {
  auto it = varying.find(workload);
  return it != varying.end() && std::find(it->second.begin(), it->second.end(), name) != it->second.end();
}

std::string PointNames::varying_text(const PointRow& r, std::initializer_list<const char*> without) const {
  auto it = varying.find(r.workload);
  return it == varying.end()
             ? ""
             : d500::varying_text(r.params, it->second, std::vector<std::string>(without.begin(), without.end()));
}

std::string PointNames::label(const PointRow& r, std::initializer_list<const char*> without, bool with_backend) const {
  return label(r, without, with_backend, {});
}

std::string PointNames::label(const PointRow& r, std::initializer_list<const char*> without, bool with_backend,
                              const std::set<std::string>& also) const {
  std::vector<std::string> less(without.begin(), without.end());
  less.insert(less.end(), also.begin(), also.end());
  if (const auto f = fixed.find(r.workload); f != fixed.end())
    less.insert(less.end(), f->second.begin(), f->second.end());
  auto left_out = [&](const std::string& k) { return std::find(less.begin(), less.end(), k) != less.end(); };
  const auto it = varying.find(r.workload);
  const auto same = same_as.find(r.workload);
  std::string rest;
  if (it != varying.end())
    for (const auto& k : it->second) {
      if (left_out(k) || (same != same_as.end() && same->second.count(k))) continue;
      const auto v = r.params.find(k);
      if (v == r.params.end() || is_unset(v->second)) continue;
      std::string name = k;  // and those with its value on every point: "k=m=n=256"
      if (same != same_as.end())
        for (const auto& [alias, first] : same->second)
          if (first == k && !left_out(alias)) name += "=" + alias;
      rest += (rest.empty() ? "" : " ") + name + "=" + canonical(v->second);
    }
  const bool lone = lone_backend.count(r.workload) > 0;
  return r.workload + (with_backend && !lone ? ":" + r.backend : "") + (rest.empty() ? "" : " " + rest);
}

std::string PointNames::shared_text(const std::string& workload) const {
  std::vector<std::string> parts;
  if (const auto lone = lone_backend.find(workload); lone != lone_backend.end())
    parts.push_back("backend=" + lone->second);
  auto it = shared.find(workload);
  if (it != shared.end())
    for (const auto& [k, v] : it->second) parts.push_back(k + "=" + canonical(v));
  return join(parts, " ");
}

}  // namespace d500
