#include "analysis/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "analysis/format.hpp"
#include "analysis/summary.hpp"
#include "common/error.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {
// The hosts a run's points ran on, once each.
std::string hosts_of(const Report& r) {
  std::set<std::string> h;
  for (const auto& row : r.rows)
    for (std::istringstream in(row.hosts); in;) {
      std::string x;
      if (in >> x) h.insert(x);
    }
  return h.empty() ? "unknown" : join(std::vector<std::string>(h.begin(), h.end()), " ");
}

PointChange compare_point(const PointRow& a, const PointRow& b, const CompareOptions& opt) {
  PointChange c;
  c.id = a.id;
  c.canonical = a.canonical;
  c.base_n = a.time.n;
  c.other_n = b.time.n;
  c.base_median = a.time.median;
  c.other_median = b.time.median;
  if (!a.has_timings() || !b.has_timings()) {
    c.why = std::string(a.has_timings() ? "other" : "base") + " run: " + (a.has_timings() ? b.status : a.status);
    return c;
  }
  // An independent resampling stream per point, from the seed and the point's identity.
  const std::uint64_t seed = opt.seed ^ fnv1a64(a.id);
  c.ratio = stats::bootstrap_median_ratio(b.costs, a.costs, opt.confidence, kRatioMethod, kBootstrapResamples, seed);
  // The same policy as a point's own interval (stats: none below the smallest n that has one).
  if (!c.ratio.withheld.empty()) {
    c.why = c.ratio.withheld;
    return c;
  }
  const double t = opt.threshold;
  if (c.ratio.bounded && c.ratio.lo > 1)
    c.change = c.ratio.estimate >= 1 + t ? Change::Regression : Change::Slower;
  else if (c.ratio.bounded && c.ratio.hi < 1)
    c.change = c.ratio.estimate <= 1 / (1 + t) ? Change::Improvement : Change::Faster;
  else
    c.change = Change::Unchanged;
  return c;
}

std::string ratio_words(const PointChange& p) {
  const auto& r = p.ratio;
  if (r.estimate >= 1)
    return fmt_sig(r.estimate, 3) + "x the time [" + fmt_sig(r.lo, 3) + ", " + fmt_sig(r.hi, 3) + "]";
  return fmt_sig(r.estimate, 3) + "x the time [" + fmt_sig(r.lo, 3) + ", " + fmt_sig(r.hi, 3) + "] (" +
         fmt_sig(1 / r.estimate, 3) + "x faster)";
}
}  // namespace

const char* change_name(Change c) {
  switch (c) {
    case Change::Regression: return "regression";
    case Change::Slower: return "slower (within threshold)";
    case Change::Unchanged: return "no significant change";
    case Change::Faster: return "faster (within threshold)";
    case Change::Improvement: return "improvement";
    case Change::NotComparable: return "not comparable";
  }
  return "?";
}

int RunComparison::count(Change c) const {
  return static_cast<int>(
      std::count_if(points.begin(), points.end(), [&](const PointChange& p) { return p.change == c; }));
}

std::vector<RunComparison> compare_runs(const std::string& base, const std::vector<std::string>& others,
                                        const CompareOptions& opt) {
  if (!(opt.confidence > 0.5 && opt.confidence < 1))
    throw Error("--confidence must lie between 0.5 and 1 (e.g. 0.95), got " + fmt_sig(opt.confidence, 4));
  if (!(opt.threshold >= 0))
    throw Error("--threshold must be 0 or more (a fraction: 0.05 is 5%), got " + fmt_sig(opt.threshold, 4));
  auto analyse = [&](const std::string& dir) {
    Report r = analyze_run(dir, AnalysisOptions{opt.confidence, opt.seed, {}});
    if (r.files.empty())
      throw Error(dir + ": no results files to compare (run it first: d500 run " + shell_quote(dir) + ")");
    return r;
  };
  const Report a = analyse(base);
  std::vector<RunComparison> out;
  for (const auto& dir : others) {
    const Report b = analyse(dir);
    RunComparison rc;
    rc.base_dir = base;
    rc.other_dir = dir;
    rc.base_version = a.d500_version;
    rc.other_version = b.d500_version;
    rc.base_hosts = hosts_of(a);
    rc.other_hosts = hosts_of(b);
    std::map<std::string, const PointRow*> in_b;
    for (const auto& r : b.rows) in_b[r.id] = &r;
    std::set<std::string> matched;
    for (const auto& r : a.rows) {
      auto it = in_b.find(r.id);
      if (it == in_b.end()) {
        ++rc.only_base;
        continue;
      }
      matched.insert(r.id);
      rc.points.push_back(compare_point(r, *it->second, opt));
    }
    rc.only_other = static_cast<int>(b.rows.size() - matched.size());
    if (rc.points.empty())
      throw Error(base + " and " + dir +
                  " share no point (points match by id, the hash of their canonical text: were they planned "
                  "from campaigns with any point in common?)");
    out.push_back(std::move(rc));
  }
  return out;
}

std::string comparison_text(const std::vector<RunComparison>& cmp, const CompareOptions& opt) {
  std::ostringstream o;
  const std::string level = std::to_string(static_cast<int>(100 * opt.confidence + 0.5)) + "%";
  for (const auto& rc : cmp) {
    o << "base  " << rc.base_dir << " (d500 " << rc.base_version << "; hosts " << rc.base_hosts << ")\n"
      << "other " << rc.other_dir << " (d500 " << rc.other_version << "; hosts " << rc.other_hosts << ")\n";
    o << rc.points.size() << " points in both";
    if (rc.only_base || rc.only_other)
      o << " (" << rc.only_base << " only in base, " << rc.only_other << " only in other: not compared)";
    o << ": " << rc.count(Change::Regression) << " regression(s), " << rc.count(Change::Improvement)
      << " improvement(s), " << rc.count(Change::Slower) << " slower and " << rc.count(Change::Faster)
      << " faster within the threshold, " << rc.count(Change::Unchanged) << " without significant change, "
      << rc.count(Change::NotComparable) << " not comparable\n";
    for (Change c : {Change::Regression, Change::Improvement, Change::Slower, Change::Faster, Change::NotComparable})
      for (const auto& p : rc.points) {
        if (p.change != c) continue;
        o << "  " << change_name(c) << ": " << p.canonical << "  ";
        if (c == Change::NotComparable)
          o << p.why << "\n";
        else
          o << fmt_time(p.base_median) << " -> " << fmt_time(p.other_median) << ", " << ratio_words(p) << "\n";
      }
    o << "\n";
  }
  o << "Method: per point, the other run's median time over the base run's (both: per repetition the slowest "
       "rank), with a "
    << level << " " << (kRatioMethod == stats::BootstrapMethod::BCa ? "BCa" : "percentile") << " bootstrap interval ("
    << kBootstrapResamples
    << " resamples of each run's repetitions, seeded by --seed and the point's id). A regression: the interval "
       "lies above 1 and the ratio is at least 1 + threshold ("
    << fmt_sig(1 + opt.threshold, 4) << "); an improvement: the interval lies below 1 and the ratio is at most 1 / "
    << fmt_sig(1 + opt.threshold, 4) << ". Intervals cover variation within each run only, not between launches.\n";
  return o.str();
}

std::string comparison_csv(const std::vector<RunComparison>& cmp) {
  std::ostringstream o;
  o << "point_id,canonical,base_run,other_run,change,base_n,other_n,base_median_s,other_median_s,time_ratio,ratio_lo,ratio_hi,why\n";
  for (const auto& rc : cmp)
    for (const auto& p : rc.points) {
      const bool has = p.change != Change::NotComparable;
      o << p.id << "," << csv_field(p.canonical) << "," << csv_field(rc.base_dir) << "," << csv_field(rc.other_dir)
        << "," << csv_field(change_name(p.change)) << "," << p.base_n << "," << p.other_n << ","
        << fmt_sig(p.base_median, 6) << "," << fmt_sig(p.other_median, 6) << ","
        << (has ? fmt_sig(p.ratio.estimate, 6) : "") << "," << (has ? fmt_sig(p.ratio.lo, 6) : "") << ","
        << (has ? fmt_sig(p.ratio.hi, 6) : "") << "," << csv_field(p.why) << "\n";
    }
  return o.str();
}

}  // namespace d500
