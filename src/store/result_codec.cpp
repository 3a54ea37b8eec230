#include "store/result_codec.hpp"

#include <cstring>
#include <type_traits>

#include "common/error.hpp"

namespace d500 {

namespace {

class Out {
 public:
  template <class T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    s_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const std::string& v) {
    pod(static_cast<std::uint64_t>(v.size()));
    s_ += v;
  }
  void value(const Value& v) {
    pod(static_cast<std::uint8_t>(v.index()));
    std::visit(
        [&](const auto& x) {
          if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>)
            str(x);
          else
            pod(x);
        },
        v);
  }
  template <class T>
  void rows(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    pod(static_cast<std::uint64_t>(v.size()));
    s_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  template <class M, class F>
  void map(const M& m, F&& each) {
    pod(static_cast<std::uint64_t>(m.size()));
    for (const auto& [k, v] : m) {
      str(k);
      each(v);
    }
  }
  std::string take() { return std::move(s_); }

 private:
  std::string s_;
};

class In {
 public:
  In(const std::string& s, const std::string& what) : s_(s), what_(what) {}
  template <class T>
  T pod() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  // A count of items of at least `item_bytes` each: never more than the bytes left can hold.
  std::size_t count(std::size_t item_bytes) {
    const auto n = pod<std::uint64_t>();
    if (n > (s_.size() - at_) / std::max<std::size_t>(item_bytes, 1)) fail();
    return static_cast<std::size_t>(n);
  }
  std::string str() {
    const std::size_t n = count(1);
    return std::string(take(n), n);
  }
  Value value() {
    switch (pod<std::uint8_t>()) {
      case 0: return pod<std::int64_t>();
      case 1: return pod<double>();
      case 2: return pod<bool>();
      case 3: return str();
      default: fail();
    }
  }
  template <class T>
  std::vector<T> rows() {
    const std::size_t n = count(sizeof(T));
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), take(n * sizeof(T)), n * sizeof(T));
    return v;
  }
  template <class V, class F>
  std::map<std::string, V> map(F&& each) {
    std::map<std::string, V> m;
    for (std::size_t i = 0, n = count(9); i < n; ++i) {
      std::string k = str();
      m.emplace(std::move(k), each());
    }
    return m;
  }
  void end() {
    if (at_ != s_.size()) fail();
  }
  [[noreturn]] void fail() const {
    throw Error(what_ + ": the reader's answer is not a whole results record (" + std::to_string(s_.size()) +
                " bytes); reading it again may tell more");
  }

 private:
  const char* take(std::size_t n) {
    if (n > s_.size() - at_) fail();
    const char* p = s_.data() + at_;
    at_ += n;
    return p;
  }
  const std::string& s_;
  const std::string& what_;
  std::size_t at_ = 0;
};

}  // namespace

std::string encode_job_result(const JobResult& r) {
  Out o;
  for (const auto* s :
       {&r.path, &r.job_id, &r.campaign, &r.campaign_hash, &r.status, &r.d500_version, &r.d500_commit, &r.created_utc})
    o.str(*s);
  o.pod(static_cast<std::int64_t>(r.schema_version));
  o.pod(r.ranks);
  o.pod(r.oversubscribed);
  o.pod(static_cast<std::uint64_t>(r.hosts.size()));
  for (const auto& h : r.hosts) o.str(h);
  o.map(r.env, [&](const std::string& v) { o.str(v); });
  o.pod(static_cast<std::uint64_t>(r.points.size()));
  for (const auto& p : r.points) {
    o.pod(static_cast<std::int32_t>(p.outcome));
    for (const auto* s : {&p.id, &p.canonical, &p.status, &p.status_reason, &p.rate_unit, &p.backend_version,
                          &p.validation_status, &p.validation_method, &p.scaling, &p.scaling_note})
      o.str(*s);
    for (double d : {p.validation_max_rel_error, p.validation_tolerance, p.seconds, p.tta_target, p.tta_budget_s})
      o.pod(d);
    for (std::int64_t i :
         {p.peak_rss_bytes, p.memory_estimate_bytes, p.work_flops, p.work_bytes, p.eval_interval_steps, p.work_items})
      o.pod(i);
    o.pod(p.threads_oversubscribed);
    for (int i : {p.index, p.level, p.warmups, p.repetitions}) o.pod(i);
    o.map(p.params, [&](const Value& v) { o.value(v); });
    o.map(p.facts, [&](const Value& v) { o.value(v); });
    o.map(p.unset, [&](const std::string& v) { o.str(v); });
    o.rows(p.samples);
    o.rows(p.events);
    o.pod(static_cast<std::uint64_t>(p.steps.size()));
    for (const auto& s : p.steps) {
      for (const auto* t : {&s.name, &s.op, &s.direction, &s.impl}) o.str(*t);
      o.pod(s.flops);
    }
    o.rows(p.step_times);
  }
  return o.take();
}

JobResult decode_job_result(const std::string& bytes, const std::string& what) {
  In in(bytes, what);
  JobResult r;
  for (auto* s :
       {&r.path, &r.job_id, &r.campaign, &r.campaign_hash, &r.status, &r.d500_version, &r.d500_commit, &r.created_utc})
    *s = in.str();
  r.schema_version = static_cast<long>(in.pod<std::int64_t>());
  r.ranks = in.pod<int>();
  r.oversubscribed = in.pod<bool>();
  for (std::size_t i = 0, n = in.count(8); i < n; ++i) r.hosts.push_back(in.str());
  r.env = in.map<std::string>([&] { return in.str(); });
  for (std::size_t i = 0, n = in.count(64); i < n; ++i) {
    PointResult p;
    p.outcome = static_cast<Outcome>(in.pod<std::int32_t>());
    for (auto* s : {&p.id, &p.canonical, &p.status, &p.status_reason, &p.rate_unit, &p.backend_version,
                    &p.validation_status, &p.validation_method, &p.scaling, &p.scaling_note})
      *s = in.str();
    for (double* d : {&p.validation_max_rel_error, &p.validation_tolerance, &p.seconds, &p.tta_target, &p.tta_budget_s})
      *d = in.pod<double>();
    for (std::int64_t* v : {&p.peak_rss_bytes, &p.memory_estimate_bytes, &p.work_flops, &p.work_bytes,
                            &p.eval_interval_steps, &p.work_items})
      *v = in.pod<std::int64_t>();
    p.threads_oversubscribed = in.pod<bool>();
    for (int* v : {&p.index, &p.level, &p.warmups, &p.repetitions}) *v = in.pod<int>();
    p.params = in.map<Value>([&] { return in.value(); });
    p.facts = in.map<Value>([&] { return in.value(); });
    p.unset = in.map<std::string>([&] { return in.str(); });
    p.samples = in.rows<Sample>();
    p.events = in.rows<Event>();
    for (std::size_t k = 0, m = in.count(40); k < m; ++k) {
      StepInfo s;
      for (auto* t : {&s.name, &s.op, &s.direction, &s.impl}) *t = in.str();
      s.flops = in.pod<double>();
      p.steps.push_back(std::move(s));
    }
    p.step_times = in.rows<PointResult::StepTime>();
    r.points.push_back(std::move(p));
  }
  in.end();
  return r;
}

}  // namespace d500
