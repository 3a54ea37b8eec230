#include "common/value.hpp"

#include <algorithm>
#include <charconv>

namespace d500 {

const char* type_name(ValueType t) {
  switch (t) {
    case ValueType::Int: return "integer";
    case ValueType::Real: return "float";
    case ValueType::Bool: return "boolean";
    case ValueType::String: return "string";
  }
  return "?";
}

ValueType type_of(const Value& v) { return static_cast<ValueType>(v.index()); }

std::int64_t int_param_or(const Params& p, const std::string& name, std::int64_t dflt) {
  auto it = p.find(name);
  return it != p.end() && type_of(it->second) == ValueType::Int ? std::get<std::int64_t>(it->second) : dflt;
}

std::string str_param_or(const Params& p, const std::string& name, const std::string& dflt) {
  auto it = p.find(name);
  return it != p.end() && type_of(it->second) == ValueType::String ? std::get<std::string>(it->second) : dflt;
}

static bool plain_word(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.' || c == '+' || c == '/';
    if (!ok) return false;
  }
  return true;
}

namespace {
void append_canonical(std::string& out, const Value& v) {
  switch (type_of(v)) {
    case ValueType::Int: {
      char buf[24];
      auto r = std::to_chars(buf, buf + sizeof buf, std::get<std::int64_t>(v));
      out.append(buf, r.ptr);
      return;
    }
    case ValueType::Real: {
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof buf, std::get<double>(v));
      const std::string_view s(buf, static_cast<std::size_t>(r.ptr - buf));
      out += s;
      // Keep reals distinguishable from integers in the canonical form.
      if (s.find_first_of(".eEn") == std::string_view::npos) out += ".0";
      return;
    }
    case ValueType::Bool: out += std::get<bool>(v) ? "true" : "false"; return;
    case ValueType::String: {
      const auto& s = std::get<std::string>(v);
      if (plain_word(s)) {
        out += s;
        return;
      }
      out += '"';
      for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      out += '"';
      return;
    }
  }
}
}  // namespace

std::string canonical(const Value& v) {
  std::string s;
  append_canonical(s, v);
  return s;
}

std::string canonical_point(const Params& p) {
  std::string s;
  s.reserve(96);
  append_canonical(s, p.at("workload"));
  s += ':';
  append_canonical(s, p.at("backend"));
  for (const auto& [k, v] : p)
    if (k != "workload" && k != "backend" && !is_unset(v)) {
      s += ' ';
      s += k;
      s += '=';
      append_canonical(s, v);
    }
  return s;
}

CanonicalHead canonical_head(const std::string& text) {
  const auto colon = text.find(':'), space = text.find(' ');
  if (colon == std::string::npos || (space != std::string::npos && space < colon)) return {text, ""};
  return {text.substr(0, colon),
          text.substr(colon + 1, space == std::string::npos ? std::string::npos : space - colon - 1)};
}

ParamSpread param_spread(const std::vector<const Params*>& points) {
  ParamSpread s;
  std::map<std::string, std::pair<std::string, std::size_t>> first;  // name -> (canonical value, how many have it)
  std::map<std::string, bool> differs;
  for (const Params* p : points)
    for (const auto& [k, v] : *p) {
      if (k == "workload" || k == "backend" || is_unset(v)) continue;
      auto [it, fresh] = first.try_emplace(k, canonical(v), 0);
      ++it->second.second;
      if (!fresh && it->second.first != canonical(v)) differs[k] = true;
    }
  for (const auto& [k, seen] : first) {
    if (differs[k] || seen.second < points.size()) {
      s.varying.push_back(k);
      continue;
    }
    for (const Params* p : points)
      if (auto it = p->find(k); it != p->end()) {
        s.shared[k] = it->second;
        break;
      }
  }
  return s;
}

std::vector<std::string> fixed_by_another(const std::vector<const Params*>& points,
                                          const std::vector<std::string>& keys) {
  auto numeric = [&](const std::string& k) {
    return std::all_of(points.begin(), points.end(), [&](const Params* p) {
      const auto it = p->find(k);
      return it != p->end() && !std::holds_alternative<std::string>(it->second);
    });
  };
  auto text = [](const Params& p, const std::string& k) {
    const auto it = p.find(k);
    return it == p.end() ? std::string("\x1f") : canonical(it->second);  // absent: a value of its own
  };
  std::vector<std::string> out;
  for (const auto& b : keys) {
    if (b == "backend" || !numeric(b)) continue;
    for (const auto& a : keys) {
      if (a == b || a == "backend" || numeric(a)) continue;
      std::map<std::string, std::string> fn;
      const bool fixes = std::all_of(points.begin(), points.end(), [&](const Params* p) {
        return fn.emplace(text(*p, a), text(*p, b)).first->second == text(*p, b);
      });
      if (fixes && fn.size() > 1) {
        out.push_back(b);
        break;
      }
    }
  }
  return out;
}

std::string varying_text(const Params& p, const std::vector<std::string>& varying,
                         const std::vector<std::string>& without) {
  std::string s;
  for (const auto& k : varying) {
    if (std::find(without.begin(), without.end(), k) != without.end()) continue;
    auto it = p.find(k);
    if (it != p.end() && !is_unset(it->second)) s += (s.empty() ? "" : " ") + k + "=" + canonical(it->second);
  }
  return s;
}

std::string short_point_text(const Params& p, const std::vector<std::string>& varying,
                             const std::vector<std::string>& without) {
  const std::string rest = varying_text(p, varying, without);
  return str_param_or(p, "workload", "?") + ":" + str_param_or(p, "backend", "?") + (rest.empty() ? "" : " " + rest);
}

Params parse_canonical_point(const std::string& text) {
  Params p;
  const CanonicalHead head = canonical_head(text);
  p["workload"] = head.workload;
  if (!head.backend.empty()) p["backend"] = head.backend;
  std::size_t i = text.find(' ');
  while (i != std::string::npos && i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    const std::size_t eq = text.find('=', i);
    if (eq == std::string::npos) break;
    const std::string key = text.substr(i, eq - i);
    std::string raw;
    bool quoted = false;
    i = eq + 1;
    if (i < text.size() && text[i] == '"') {  // a quoted string: backslash escapes '"' and '\\'
      quoted = true;
      for (++i; i < text.size() && text[i] != '"'; ++i)
        raw += text[i] == '\\' && i + 1 < text.size() ? text[++i] : text[i];
      ++i;
    } else {
      const std::size_t end = text.find(' ', i);
      raw = text.substr(i, end == std::string::npos ? std::string::npos : end - i);
      i = end;
    }
    Value v = raw;
    if (!quoted) {
      std::int64_t n = 0;
      double d = 0;
      const char* b = raw.data();
      const char* e = raw.data() + raw.size();
      if (raw == "true" || raw == "false")
        v = raw == "true";
      else if (auto r = std::from_chars(b, e, n); r.ec == std::errc() && r.ptr == e)
        v = n;
      else if (auto r2 = std::from_chars(b, e, d); r2.ec == std::errc() && r2.ptr == e)
        v = d;
    }
    p[key] = std::move(v);
  }
  return p;
}

}  // namespace d500
