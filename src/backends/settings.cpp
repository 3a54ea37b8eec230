#include "backends/settings.hpp"

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/error.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

bool applies(const BackendSetting& s, const std::string& workload) {
  return s.workloads.empty() || std::find(s.workloads.begin(), s.workloads.end(), workload) != s.workloads.end();
}

// Whether some backend's declaration of setting `key` changes `workload`'s points.
bool any_applies(const std::string& key, const std::string& workload) {
  for (const auto& b : all_backends())
    for (const auto& s : b.settings)
      if (s.spec.name == key && applies(s, workload)) return true;
  return false;
}

std::string neutral_value(const BackendSetting& s, const std::string& workload) {
  for (const auto& [w, v] : s.neutral_for)
    if (w == workload) return v;
  return s.neutral;
}

// The backends that declare setting `key`, by name.
std::vector<const BackendInfo*> declaring(const std::string& key) {
  std::vector<const BackendInfo*> out;
  for (const auto& b : all_backends())
    for (const auto& s : b.settings)
      if (s.spec.name == key) out.push_back(&b);
  std::sort(out.begin(), out.end(), [](const BackendInfo* a, const BackendInfo* b) { return a->name < b->name; });
  return out;
}

const BackendSetting* setting_of(const BackendInfo& b, const std::string& key) {
  for (const auto& s : b.settings)
    if (s.spec.name == key) return &s;
  return nullptr;
}

std::string quoted_list(const std::vector<const BackendInfo*>& bs) {
  std::string out;
  for (std::size_t i = 0; i < bs.size(); ++i)
    out += (i == 0 ? "" : i + 1 == bs.size() ? " and " : ", ") + std::string("\"") + bs[i]->name + "\"";
  return out;
}

}  // namespace

std::vector<ParamSpec> backend_setting_params() {
  std::vector<const BackendInfo*> by_name;
  for (const auto& b : all_backends()) by_name.push_back(&b);
  std::sort(by_name.begin(), by_name.end(),
            [](const BackendInfo* a, const BackendInfo* b) { return a->name < b->name; });
  std::vector<ParamSpec> out;
  std::map<std::string, std::size_t> at;
  for (const BackendInfo* bp : by_name)
    for (const auto& s : bp->settings) {
      const BackendInfo& b = *bp;
      const std::string help = "backend = \"" + b.name + "\": " + s.spec.help;
      auto [it, fresh] = at.try_emplace(s.spec.name, out.size());
      if (fresh) {
        ParamSpec p = s.spec;
        p.dflt = Value{std::string()};
        p.help = help;
        out.push_back(std::move(p));
        continue;
      }
      ParamSpec& p = out[it->second];
      if (p.type != s.spec.type)
        throw Error("internal error: backend setting '" + s.spec.name + "' is declared with two types");
      for (const auto& c : s.spec.choices)
        if (std::find(p.choices.begin(), p.choices.end(), c) == p.choices.end()) p.choices.push_back(c);
      p.help += "; " + help;
    }
  return out;
}

void normalize_backend_settings(Params& p, const std::string& workload) {
  // Per point, on the planner's threads: nothing allocated beyond a path made absolute.
  // First a changed default (BackendSetting::planned) where the point leaves its backend's key
  // unset (""), before `neutral` clears the old default a campaign writes out.
  const auto bit = p.find("backend");
  if (const BackendInfo* own = bit != p.end() && std::holds_alternative<std::string>(bit->second)
                                   ? find_backend(std::get<std::string>(bit->second))
                                   : nullptr)
    for (const auto& s : own->settings) {
      if (s.planned.empty() || !applies(s, workload)) continue;
      Value& v = p[s.spec.name];
      if (!std::holds_alternative<std::string>(v) || std::get<std::string>(v).empty()) v = s.planned;
    }
  for (const auto& b : all_backends())
    for (const auto& s : b.settings) {
      auto it = p.find(s.spec.name);
      if (it == p.end() || !std::holds_alternative<std::string>(it->second)) continue;
      auto& v = std::get<std::string>(it->second);
      if (v.empty()) continue;
      if (!any_applies(s.spec.name, workload)) {
        v.clear();
        continue;
      }
      if (!applies(s, workload)) continue;  // another backend's declaration applies
      if (v == neutral_value(s, workload))
        v.clear();
      else if (s.path)
        v = std::filesystem::absolute(v).lexically_normal().string();
    }
}

std::vector<std::pair<std::string, std::string>> unset_settings(const Params& p, const std::string& workload) {
  const auto bit = p.find("backend");
  const BackendInfo* own = bit != p.end() && std::holds_alternative<std::string>(bit->second)
                               ? find_backend(std::get<std::string>(bit->second))
                               : nullptr;
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, v] : p) {
    if (!is_unset(v) || declaring(key).empty()) continue;
    const BackendSetting* s = nullptr;
    if (own)
      for (const auto& x : own->settings)
        if (x.spec.name == key && applies(x, workload)) s = &x;
    if (!s) {
      out.emplace_back(key, "");
      continue;
    }
    const auto& follows = s->unset_follows;
    if (std::find(follows.begin(), follows.end(), workload) != follows.end()) continue;
    if (const std::string means = neutral_value(*s, workload); !means.empty()) out.emplace_back(key, means);
  }
  return out;
}

std::string check_backend_settings(const Params& p) {
  const auto bit = p.find("backend");
  if (bit == p.end()) return "";
  const std::string& backend = std::get<std::string>(bit->second);
  const BackendInfo* b = find_backend(backend);
  if (!b) return "";
  for (const auto& s : b->settings) {
    auto it = p.find(s.spec.name);
    if (s.required && (it == p.end() || std::get<std::string>(it->second).empty()))
      return "backend \"" + backend + "\" needs '" + s.spec.name + "': " + s.spec.help;
    // A key several backends declare takes the union of their choices in a campaign; each backend
    // its own.
    if (it == p.end() || s.spec.choices.empty() || !std::holds_alternative<std::string>(it->second)) continue;
    const std::string& v = std::get<std::string>(it->second);
    if (!v.empty() && std::find(s.spec.choices.begin(), s.spec.choices.end(), v) == s.spec.choices.end())
      return "'" + s.spec.name + "' \"" + v + "\" is not one backend \"" + backend +
             "\" takes (valid: " + join(s.spec.choices, ", ") + (s.choices_note.empty() ? "" : "; " + s.choices_note) +
             ")";
  }
  // A key several backends declare is looked at once per declaration, with the same answer.
  for (const auto& other : all_backends())
    for (const auto& s : other.settings) {
      const std::string& key = s.spec.name;
      auto it = p.find(key);
      if (it == p.end() || !std::holds_alternative<std::string>(it->second) ||
          std::get<std::string>(it->second).empty())
        continue;
      if (setting_of(*b, key)) continue;
      const auto owners = declaring(key);
      std::string note;
      for (const BackendInfo* o : owners)
        if (const BackendSetting* d = setting_of(*o, key); d && !d->other_note.empty()) note = "; " + d->other_note;
      return "'" + key + "' is only for backend" + (owners.size() > 1 ? "s " : " ") + quoted_list(owners) +
             " (this point's backend is \"" + backend + "\"" + note + ")";
    }
  if (b->built && b->check_point) return b->check_point(p);
  return "";
}

BackendSetting fusion_setting(const std::string& how, const std::string& dflt) {
  BackendSetting s{
      .spec = {"fusion",
               ValueType::String,
               Value{std::string()},
               0,
               0,
               {"off", "add_relu", "bn_relu", "add_relu+bn_relu"},
               "networks (levels 1-3, d500's executor): which nodes run joined, each joined node computing the "
               "values the two compute: add_relu (each Add of two same-shape tensors whose result only a Relu reads, "
               "with that Relu, as one AddRelu node -- a residual network's join, 16 in ResNet-50), bn_relu (each "
               "BatchNormalization whose output only a Relu reads, with that Relu, as one BatchNormRelu node -- "
               "conv-bn-relu, 33 in ResNet-50), add_relu+bn_relu (both) or off (every node as the model has it): " +
                   how +
                   "; the point's step table names a joined node '<first>+<relu>', and executor.fused_add_relu and "
                   "executor.fused_bn_relu count them; default: " +
                   dflt +
                   (dflt == "add_relu" ? " (a point that leaves it unset is planned with fusion = add_relu "
                                         "in its id, and off keeps the ids points had before 2026-12)"
                                       : "")},
      .workloads = {"network", "train", "distributed"},
      .neutral = "off",
      .other_note = "the other backends run each node as the model has it"};
  if (dflt == "add_relu") s.planned = dflt;
  return s;
}

const std::string& reference_backend_name() {
  static const std::string name = [] {
    for (const auto& b : all_backends())
      if (b.reference) return b.name;
    throw Error("internal error: no backend is the reference");
  }();
  return name;
}

}  // namespace d500
