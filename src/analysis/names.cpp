#include "analysis/names.hpp"

#include <algorithm>

#include "analysis/summary.hpp"
#include "common/text.hpp"

namespace d500 {

PointNames point_names(const std::vector<PointRow>& rows) {
  PointNames n;
  std::map<std::string, std::vector<const Params*>> by_workload;
  for (const auto& r : rows) by_workload[r.workload].push_back(&r.params);
  for (const auto& [w, points] : by_workload) {
    ParamSpread s = param_spread(points);
    if (!s.varying.empty()) n.varying[w] = std::move(s.varying);
    n.shared[w] = std::move(s.shared);
  }
  return n;
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
  const auto it = varying.find(r.workload);
  const std::string rest = it == varying.end() ? "" : d500::varying_text(r.params, it->second, less);
  return r.workload + (with_backend ? ":" + r.backend : "") + (rest.empty() ? "" : " " + rest);
}

std::string PointNames::shared_text(const std::string& workload) const {
  std::vector<std::string> parts;
  auto it = shared.find(workload);
  if (it != shared.end())
    for (const auto& [k, v] : it->second) parts.push_back(k + "=" + canonical(v));
  return join(parts, " ");
}

}  // namespace d500
