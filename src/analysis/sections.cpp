// Comparisons between backends and scaling series: the parts of the report that relate points
// to each other. Ratios of medians get seeded bootstrap intervals (kRatioMethod) (STATISTICS: "Ratios").
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "analysis/summary.hpp"
#include "common/parallel.hpp"
#include "common/text.hpp"
#include "metrics/stopping.hpp"

namespace d500 {

namespace {

// `also`: more parameters left out (a backend's own settings: PointNames::own).
std::string key_without(const Params& p, std::initializer_list<const char*> drop,
                        const std::set<std::string>* also = nullptr) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : p) {
    bool skip = also && also->count(k);
    for (const char* d : drop) skip = skip || k == d;
    if (!skip && !is_unset(v)) parts.push_back(k + "=" + canonical(v));
  }
  return join(parts, " ");
}

// How a group reads in the report: like a point (by what varies among the report's points of its
// workload), without what varies inside the group; the rank count where the workload's vary.
std::string label(const PointNames& names, const PointRow& r, bool with_backend, bool with_ranks,
                  const char* also_without = "", const std::set<std::string>* own = nullptr) {
  std::string s =
      names.label(r, {"nodes", "ranks_per_node", also_without}, with_backend, own ? *own : std::set<std::string>{});
  if (with_ranks && (names.varies(r.workload, "nodes") || names.varies(r.workload, "ranks_per_node")))
    s += ", " + std::to_string(r.ranks) + (r.ranks == 1 ? " rank" : " ranks");
  return s;
}

// The rows `keep` accepts, grouped by their parameters less `drop` (what varies inside a group),
// the groups in the order first seen and the rows of each in plan order.
template <class Keep>
std::vector<std::vector<const PointRow*>> group_rows(const std::vector<PointRow>& rows,
                                                     std::initializer_list<const char*> drop, Keep keep,
                                                     const PointNames* also = nullptr) {
  std::map<std::string, std::size_t> index;
  std::vector<std::vector<const PointRow*>> groups;
  for (const auto& r : rows) {
    if (!keep(r)) continue;
    const auto [it, fresh] = index.try_emplace(
        r.workload + ": " + key_without(r.params, drop, also ? also->own_of(r) : nullptr), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(&r);
  }
  // One workload's groups together, workloads in the order they first appear (the order of the
  // Results tables), however the jobs interleaved their points.
  std::map<std::string, std::size_t> first;
  for (const auto& r : rows) first.try_emplace(r.workload, first.size());
  std::stable_sort(groups.begin(), groups.end(), [&](const auto& a, const auto& b) {
    return first[a.front()->workload] < first[b.front()->workload];
  });
  return groups;
}

// A point's launch (campaign.launches), and whether a point was measured in one and has timings.
int launch_of(const PointRow* r) { return static_cast<int>(int_param_or(r->params, "launch", 0)); }
bool timed_launch(const PointRow& r) { return r.params.count("launch") && r.has_timings(); }

// The points a scaling series is made of: timed, and not a collective on one rank, which moves
// nothing between ranks (its time no base for the others'; PointRow::lone_collective).
bool scaled(const PointRow& r) { return r.has_timings() && !r.lone_collective(); }
bool scaled_launch(const PointRow& r) { return timed_launch(r) && !r.lone_collective(); }

// A weak-scaling collective's workload, whose efficiency is then on bus bandwidth; "" otherwise.
std::string bus_of(const PointRow& r) {
  return r.level == 0 && r.scaling == "weak" && collective_bus_factor(r.workload, 2) ? r.workload : "";
}

// Which of two backends is the baseline of a comparison: the reference backend when present (the
// truth), else the one first in name order (stable whatever order the files were read in); a, b as
// PointNames::who names them.
bool baseline_before(const std::string& a, const std::string& b) {
  const bool ra = a.rfind("reference", 0) == 0, rb = b.rfind("reference", 0) == 0;
  return ra != rb ? ra : a < b;
}

}  // namespace

// Each comparison's own bootstrap stream, from the report's seed and the two points' ids: two
// comparisons of equal-sized samples never share their resamples, and a report is reproducible.
std::uint64_t comparison_seed(std::uint64_t seed, const std::string& base_id, const std::string& other_id) {
  return fnv1a64(std::to_string(seed) + "/" + base_id + "/" + other_id);
}

std::vector<Comparison> compare_backends(const std::vector<PointRow>& rows, double confidence, std::uint64_t seed) {
  std::vector<Comparison> out;
  std::vector<std::pair<const PointRow*, const PointRow*>> pairs;  // (baseline, other) of out's entries
  const PointNames names = point_names(rows);
  for (const auto& g : group_rows(
           rows, {"backend"}, [](const PointRow& r) { return r.has_timings(); }, &names)) {
    if (g.size() < 2) continue;
    const PointRow* base = g.front();
    for (const auto* r : g)
      if (baseline_before(names.who(*r, g), names.who(*base, g))) base = r;
    for (const auto* r : g) {
      if (r == base) continue;
      Comparison c;
      c.group = label(names, *base, false, true, "", names.own_of(*base));
      c.baseline = names.who(*base, g);
      c.other = names.who(*r, g);
      c.baseline_id = base->id;
      c.other_id = r->id;
      c.confidence = confidence;
      auto normal = [](const PointRow* x) { return x->mean_trusted(); };
      if (normal(base) && normal(r)) {
        c.has_mean_ratio = true;
        c.mean_ratio = stats::fieller_ratio(base->costs, r->costs, confidence);
      }
      out.push_back(c);
      pairs.emplace_back(base, r);
    }
  }
  // The bootstraps (most of a large report's time) on the cores this process may use: each
  // comparison has its own seed, so the figures do not depend on how many threads there are.
  parallel_ranges(static_cast<std::int64_t>(out.size()),
                  std::min<std::int64_t>(rank_cores(), static_cast<std::int64_t>(out.size()) / 64 + 1),
                  [&](std::int64_t begin, std::int64_t end) {
                    for (auto i = static_cast<std::size_t>(begin); i < static_cast<std::size_t>(end); ++i) {
                      const auto [base, r] = pairs[i];
                      out[i].speedup =
                          stats::bootstrap_median_ratio(base->costs, r->costs, confidence, kRatioMethod,
                                                        kBootstrapResamples, comparison_seed(seed, base->id, r->id));
                    }
                  });
  return out;
}

std::vector<LaunchGroup> launch_groups(const std::vector<PointRow>& rows, double confidence) {
  std::vector<LaunchGroup> out;
  const PointNames names = point_names(rows);
  for (auto& g : group_rows(rows, {"launch"}, timed_launch)) {
    if (g.size() < 2) continue;
    std::stable_sort(g.begin(), g.end(), [&](auto* a, auto* b) { return launch_of(a) < launch_of(b); });
    LaunchGroup lg;
    lg.group = label(names, *g.front(), true, true, "launch");
    std::vector<std::vector<double>> per;
    for (const auto* r : g) {
      lg.ids.push_back(r->id);
      lg.launch_numbers.push_back(launch_of(r));
      lg.within.push_back(r->time);
      per.push_back(r->costs);
    }
    lg.interval = stats::launch_interval(per, confidence);
    out.push_back(std::move(lg));
  }
  return out;
}

namespace {

// `other` against `base` in the launches (seeds) both were measured in, paired by launch; nullopt
// when they share fewer than two (one launch's comparison then says all there is).
std::optional<LaunchComparison> paired(const std::map<int, const PointRow*>& base,
                                       const std::map<int, const PointRow*>& other, double confidence,
                                       const std::string& replicate = "launch") {
  LaunchComparison c;
  c.replicate = replicate;
  c.confidence = confidence;
  for (const auto& [launch, r] : other) {
    const auto b = base.find(launch);
    if (b == base.end()) continue;
    c.launches.push_back(launch);
    c.baseline_medians.push_back(b->second->time.median);
    c.other_medians.push_back(r->time.median);
  }
  if (c.launches.size() < 2) return std::nullopt;
  c.speedup = stats::launch_ratio(c.baseline_medians, c.other_medians, confidence);
  if (replicate != "launch")
    c.speedup.method = "paired by " + replicate + ": Student's t on the log ratios of the " + replicate + "s' medians";
  return c;
}

}  // namespace

std::vector<LaunchComparison> compare_backends_across(const std::vector<PointRow>& rows, double confidence,
                                                      const std::string& replicate) {
  std::vector<LaunchComparison> out;
  const PointNames names = point_names(rows);
  auto timed = [&](const PointRow& r) { return r.params.count(replicate) && r.has_timings(); };
  auto number = [&](const PointRow* r) { return static_cast<int>(int_param_or(r->params, replicate, 0)); };
  for (const auto& g : group_rows(rows, {"backend", replicate.c_str()}, timed, &names)) {
    // ranks -> backend (PointNames::who) -> replicate -> point (the ranks apart, whatever the parameters say of them)
    std::map<int, std::map<std::string, std::map<int, const PointRow*>>> by_ranks;
    for (const auto* r : g) by_ranks[r->ranks][names.who(*r, g)][number(r)] = r;
    for (auto& [ranks, by_backend] : by_ranks) {
      if (by_backend.size() < 2) continue;
      std::string base = by_backend.begin()->first;  // the baseline as compare_backends chooses it
      for (const auto& [backend, launches] : by_backend)
        if (baseline_before(backend, base)) base = backend;
      for (const auto& [backend, launches] : by_backend) {
        if (backend == base) continue;
        auto c = paired(by_backend[base], launches, confidence, replicate);
        if (!c) continue;
        const PointRow& first = *by_backend[base].begin()->second;
        c->group = label(names, first, false, true, replicate.c_str(), names.own_of(first));
        c->baseline = base;
        c->other = backend;
        out.push_back(std::move(*c));
      }
    }
  }
  return out;
}

std::vector<LaunchComparison> scaling_across_launches(const std::vector<PointRow>& rows, double confidence) {
  std::vector<LaunchComparison> out;
  const PointNames names = point_names(rows);
  auto ranks_text = [](int n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); };
  for (const auto& g : group_rows(rows, {"nodes", "ranks_per_node", "launch"}, scaled_launch)) {
    std::map<int, std::map<int, const PointRow*>> by_ranks;  // ranks -> launch -> point
    for (const auto* r : g) by_ranks[r->ranks][launch_of(r)] = r;
    if (by_ranks.size() < 2) continue;
    const auto& [base_ranks, base] = *by_ranks.begin();
    const PointRow& first = *base.begin()->second;
    for (const auto& [ranks, launches] : by_ranks) {
      if (ranks == base_ranks) continue;
      auto c = paired(base, launches, confidence);
      if (!c) continue;
      c->varies = "ranks";
      c->group = label(names, first, true, false, "launch");
      c->baseline = ranks_text(base_ranks);
      c->other = ranks_text(ranks);
      // As ScalingSeries: strong scaling's ideal is p / p_base, weak scaling's 1, a collective's
      // its bus factor's growth.
      c->ideal = 1 / ideal_load(first.scaling, bus_of(first), base_ranks, ranks);
      out.push_back(std::move(*c));
    }
  }
  return out;
}

std::vector<TtaConfig> tta_configs(const std::vector<PointRow>& rows, double confidence) {
  std::vector<TtaConfig> out;
  const PointNames names = point_names(rows);
  for (auto& runs : group_rows(rows, {"seed"}, [](const PointRow& r) { return r.tta_target > 0; })) {
    auto seed_of = [](const PointRow* r) { return int_param_or(r->params, "seed", 0); };
    std::stable_sort(runs.begin(), runs.end(), [&](auto* a, auto* b) { return seed_of(a) < seed_of(b); });
    const PointRow& first = *runs.front();
    // The configuration's targets: further ones (report_targets) first, read off the same curves.
    std::vector<double> targets;
    for (const auto& [t, s] : first.tta_more) targets.push_back(t);
    targets.push_back(first.tta_target);
    for (std::size_t q = 0; q < targets.size(); ++q) {
      TtaConfig c;
      c.group = label(names, first, true, true, "seed");
      c.eval_interval_steps = first.eval_interval_steps;
      std::vector<double> t, cut;
      for (const auto* r : runs) {
        const double reached = q + 1 == targets.size()  ? r->tta_s
                               : q < r->tta_more.size() ? r->tta_more[q].second
                                                        : std::numeric_limits<double>::infinity();
        c.ids.push_back(r->id);
        c.seeds.push_back(seed_of(r));
        if (q + 1 == targets.size() && !r->eval_disagreement.empty())
          c.disagreements.push_back("seed " + std::to_string(seed_of(r)) + ": " + r->eval_disagreement);
        // A run cut off by its job (killed, timed out) before the target or the budget is
        // right-censored at the training time it reached, neither dropped nor coded as a miss.
        const bool budget_spent = first.tta_budget_s > 0 && r->tta_trained_s >= first.tta_budget_s;
        if (r->outcome != Outcome::Complete && !std::isfinite(reached) && !budget_spent) {
          ++c.cut_off;
          cut.push_back(r->tta_trained_s);
          continue;
        }
        t.push_back(reached);
      }
      c.summary = summarize_tta(t, targets[q], first.tta_budget_s, confidence, cut);
      out.push_back(c);
    }
  }
  return out;
}

namespace {

// (s, k) of the USL (k = 0: Amdahl) fitted to capacities c at relative counts n (n > 1 only),
// least squares on n/c - 1 = s (n-1) + k n (n-1), both >= 0.
std::pair<double, double> fit_usl(const std::vector<double>& n, const std::vector<double>& c, bool usl) {
  double sxx = 0, sxz = 0, szz = 0, sxy = 0, szy = 0;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const double x = n[i] - 1, z = n[i] * (n[i] - 1), y = n[i] / c[i] - 1;
    sxx += x * x, sxz += x * z, szz += z * z, sxy += x * y, szy += z * y;
  }
  auto amdahl = [&] { return std::pair<double, double>{sxx > 0 ? std::max(0.0, sxy / sxx) : 0, 0}; };
  if (!usl) return amdahl();
  const double det = sxx * szz - sxz * sxz;
  if (!(std::fabs(det) > 1e-300)) return amdahl();
  double a = (sxy * szz - szy * sxz) / det, b = (sxx * szy - sxz * sxy) / det;
  if (b < 0) return amdahl();
  if (a < 0) a = 0, b = szz > 0 ? std::max(0.0, szy / szz) : 0;
  return {a, b};
}

double usl_efficiency(double s, double k, double n) { return 1 / (1 + s * (n - 1) + k * n * (n - 1)); }

// The q quantile of bootstrap estimates (stats' type-7 quantile).
double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return stats::quantile_sorted(v, q);
}

// The series' model with bootstrap intervals: each resample draws every point's repetitions with
// replacement and refits. USL is chosen over Amdahl when three or more rank counts are measured
// and its coherency term k is positive across the interval; else Amdahl's form (k = 0).
void fit_scaling_model(ScalingSeries& s, const std::vector<const PointRow*>& g, double confidence, std::uint64_t seed) {
  std::vector<double> n;
  for (const auto* r : g)
    if (r->ranks > g.front()->ranks) n.push_back(static_cast<double>(r->ranks) / g.front()->ranks);
  if (n.empty()) return;
  // C(n) = n x efficiency = n x T(base) / T(p) x the ideal load (strong: the speedup; weak: n x
  // T(base) / T(p); a collective's: on bus bandwidth).
  auto capacities = [&](const std::vector<double>& medians) {
    std::vector<double> c;
    for (std::size_t i = 1; i < medians.size(); ++i)
      c.push_back(n[i - 1] * medians[0] / medians[i] * s.ideal_load(g[i]->ranks));
    return c;
  };
  std::vector<double> med;
  for (const auto* r : g) med.push_back(r->time.median);
  for (double m : med)
    if (!(m > 0)) return;
  const std::size_t count_ranks = n.size() + 1;
  std::mt19937_64 rng(seed ^ 0x5ca1ab1eULL);
  // Per law (0: Amdahl, 1: USL), the bootstrap estimates of s, k and the two predictions; both
  // laws are fitted to the same resampled medians.
  std::vector<double> bs[2], bk[2], b2[2], b4[2];
  const double nmax = n.back();
  const int laws = count_ranks < 3 ? 1 : 2;
  // A point of more than kDirectBootstrapMax repetitions has its resample medians drawn from their
  // exact distribution, as the comparisons' bootstrap does: resampling 10^5 values a thousand
  // times per point is what made a large campaign's report take minutes.
  std::deque<stats::MedianResampler> draws;
  for (const auto* r : g) {
    draws.emplace_back(r->costs, r->costs.size() > stats::kDirectBootstrapMax);
    s.model.exact_medians = s.model.exact_medians || draws.back().exact();
  }
  std::vector<double> m(g.size());
  for (int b = 0; b < kBootstrapResamples / 2; ++b) {
    for (std::size_t i = 0; i < g.size(); ++i) m[i] = draws[i].draw(rng);
    const std::vector<double> c = capacities(m);
    for (int law = 0; law < laws; ++law) {
      const auto [a, k] = fit_usl(n, c, law == 1);
      bs[law].push_back(a), bk[law].push_back(k);
      b2[law].push_back(usl_efficiency(a, k, 2 * nmax)), b4[law].push_back(usl_efficiency(a, k, 4 * nmax));
    }
  }
  const double lo = (1 - confidence) / 2, hi = 1 - lo;
  const bool usl = count_ranks >= 3 && !bk[1].empty() && percentile(bk[1], lo) > 0;
  const int law = usl ? 1 : 0;
  ScalingSeries::Model& M = s.model;
  M.law = usl ? "USL" : "Amdahl";
  M.why = count_ranks < 3 ? "two rank counts: only s can be fitted"
          : usl           ? "the USL's coherency term k is above 0 across its interval"
                : "the USL's coherency term k is not clearly above 0 (its interval reaches 0): k = 0 suffices";
  std::tie(M.s, M.k) = fit_usl(n, capacities(med), usl);
  // s is a share (strong: of the work; weak: of the base time per multiple of the base ranks): a
  // fit above 1 says the time grows with the rank count faster than the law describes.
  if (M.s > 1) {
    M.failed =
        "the least-squares fit gives s = " + fmt_sig(M.s, 3) +
        ", outside the law's range [0, 1]: the time grows with the rank count " +
        (s.kind == "weak" ? "beyond n T(base), the base run done n times in turn "
                          : "faster than a serial share allows ") +
        "(a busy or oversubscribed machine, or communication that grows with the ranks), which the law cannot describe";
    M.law.clear();
    return;
  }
  // The bootstrap's fits are clipped to the same range (an interval clipped to the parameter space keeps its coverage).
  for (auto& v : bs[law]) v = std::min(v, 1.0);
  M.s_lo = percentile(bs[law], lo), M.s_hi = percentile(bs[law], hi);
  M.k_lo = percentile(bk[law], lo), M.k_hi = percentile(bk[law], hi);
  M.at2 = static_cast<int>(2 * g.back()->ranks), M.at4 = static_cast<int>(4 * g.back()->ranks);
  M.eff2 = usl_efficiency(M.s, M.k, 2 * nmax), M.eff4 = usl_efficiency(M.s, M.k, 4 * nmax);
  M.eff2_lo = percentile(b2[law], lo), M.eff2_hi = percentile(b2[law], hi);
  M.eff4_lo = percentile(b4[law], lo), M.eff4_hi = percentile(b4[law], hi);
}

}  // namespace

std::vector<ScalingSeries> scaling_series(const std::vector<PointRow>& rows, double confidence, std::uint64_t seed) {
  std::vector<ScalingSeries> out;
  const PointNames names = point_names(rows);
  for (auto& g : group_rows(rows, {"nodes", "ranks_per_node"}, scaled)) {
    std::sort(g.begin(), g.end(), [](auto* a, auto* b) { return a->ranks < b->ranks; });
    if (g.size() < 2 || g.front()->ranks == g.back()->ranks) continue;
    ScalingSeries s;
    s.workload = g.front()->workload;
    s.group = label(names, *g.front(), true, false);
    s.kind = g.front()->scaling;
    s.note = g.front()->scaling_note;
    s.bus = bus_of(*g.front());
    const PointRow& base = *g.front();
    s.base_ranks = base.ranks;
    s.base_time = base.time.median;
    for (const auto* r : g) {
      ScalingPoint p;
      p.id = r->id;
      p.ranks = r->ranks;
      p.nodes = r->nodes;
      p.time = r->time;
      if (r == g.front()) {
        p.speedup.estimate = p.speedup.lo = p.speedup.hi = 1;  // the base, by definition
        p.speedup.method = "base";
      } else {
        p.speedup = stats::bootstrap_median_ratio(base.costs, r->costs, confidence, kRatioMethod, kBootstrapResamples,
                                                  comparison_seed(seed, base.id, r->id));
      }
      // The speedup times the ideal time over the base's (ideal_load): strong scaling p_base / p;
      // weak 1 (the efficiency is T(base) / T(p) itself); a collective's, its bus factor's growth.
      const double load = s.ideal_load(r->ranks);
      p.efficiency = p.speedup.estimate * load;
      p.efficiency_lo = p.speedup.lo * load;
      p.efficiency_hi = p.speedup.hi * load;
      s.points.push_back(p);
    }
    // The model describes the machine's scaling, not its oversubscription: points whose ranks
    // (or threads) share cores are left out of the fit, and the caption says so.
    std::vector<const PointRow*> fitted;
    std::vector<std::string> left_out;
    for (const auto* r : g) {
      if (r != g.front() && r->shares_cores())
        left_out.push_back(std::to_string(r->ranks));
      else
        fitted.push_back(r);
    }
    if (fitted.size() >= 2) fit_scaling_model(s, fitted, confidence, seed);
    if (!left_out.empty())
      s.model.left_out = "the oversubscribed " + join(left_out, ", ") + "-rank point" +
                         (left_out.size() > 1 ? "s" : "") +
                         (fitted.size() >= 2 ? " left out of the fit" : ": no other rank count to fit a model to");
    out.push_back(s);
  }
  return out;
}

std::vector<LaunchScalingModel> scaling_models_across_launches(const std::vector<PointRow>& rows, double confidence) {
  std::vector<LaunchScalingModel> out;
  const PointNames names = point_names(rows);
  for (const auto& g : group_rows(rows, {"nodes", "ranks_per_node", "launch"}, scaled_launch)) {
    std::map<int, std::map<int, const PointRow*>> by_launch;  // launch -> ranks -> point
    for (const auto* r : g) by_launch[launch_of(r)][r->ranks] = r;
    // The rank counts every launch measured; as the per-launch fit, oversubscribed points (other
    // than the base) describe the oversubscription, not the machine, and are left out.
    std::map<int, int> seen;  // ranks -> launches measuring it
    for (const auto& [launch, points] : by_launch)
      for (const auto& [ranks, r] : points) ++seen[ranks];
    std::vector<int> ranks;
    for (const auto& [p, count] : seen) {
      if (count != static_cast<int>(by_launch.size())) continue;
      bool over = false;
      for (const auto& [launch, points] : by_launch) over = over || points.at(p)->shares_cores();
      if (!over || ranks.empty()) ranks.push_back(p);
    }
    if (by_launch.size() < 2 || ranks.size() < 2) continue;
    LaunchScalingModel m;
    m.confidence = confidence;
    const PointRow& first = *by_launch.begin()->second.at(ranks.front());
    m.group = label(names, first, true, false, "launch");
    m.kind = first.scaling;
    m.bus = bus_of(first);
    m.base_ranks = ranks.front();
    m.ranks = ranks;
    std::vector<double> n;
    for (std::size_t i = 1; i < ranks.size(); ++i) n.push_back(static_cast<double>(ranks[i]) / ranks.front());
    const double nmax = n.back();
    // Per law (0: Amdahl, 1: USL), each launch's s, k and predicted efficiencies.
    std::vector<double> fs[2], fk[2], f2[2], f4[2];
    const bool three = ranks.size() >= 3;
    bool usable = true;
    for (const auto& [launch, points] : by_launch) {
      std::vector<double> c;
      const double base = points.at(ranks.front())->time.median;
      for (std::size_t i = 1; i < ranks.size(); ++i) {
        const double t = points.at(ranks[i])->time.median;
        usable = usable && base > 0 && t > 0;
        c.push_back(t > 0 ? n[i - 1] * base / t * ideal_load(m.kind, m.bus, ranks.front(), ranks[i]) : 0);
      }
      m.launches.push_back(launch);
      for (int law = 0; law < (three ? 2 : 1); ++law) {
        const auto [a, k] = fit_usl(n, c, law == 1);
        fs[law].push_back(a), fk[law].push_back(k);
        f2[law].push_back(usl_efficiency(a, k, 2 * nmax)), f4[law].push_back(usl_efficiency(a, k, 4 * nmax));
      }
    }
    if (!usable) continue;
    const stats::MeanInterval usl_k = three ? stats::mean_t_interval(fk[1], confidence) : stats::MeanInterval{};
    const bool usl = three && usl_k.valid && usl_k.lo > 0;
    const int law = usl ? 1 : 0;
    m.law = usl ? "USL" : "Amdahl";
    m.why = !three ? "two rank counts: only s can be fitted"
            : usl
                ? "the USL's coherency term k is above 0 across its interval over the launches"
                : "the USL's coherency term k is not clearly above 0 over the launches (its interval reaches 0): k = 0 "
                  "suffices";
    m.launch_s = fs[law], m.launch_k = fk[law];
    auto take = [&](const std::vector<double>& v, double& est, double& lo, double& hi) {
      const stats::MeanInterval t = stats::mean_t_interval(v, confidence);
      est = t.mean, lo = t.lo, hi = t.hi;
    };
    // Efficiencies are positive: Student's t on their logarithms, exponentiated, so that the
    // interval never crosses 0; s and k are clipped to their ranges ([0, 1] and >= 0).
    auto take_log = [&](const std::vector<double>& v, double& est, double& lo, double& hi) {
      std::vector<double> l;
      for (double x : v) l.push_back(std::log(std::max(x, 1e-300)));
      const stats::MeanInterval t = stats::mean_t_interval(l, confidence);
      est = std::exp(t.mean), lo = std::exp(t.lo), hi = std::exp(t.hi);
    };
    take(fs[law], m.s, m.s_lo, m.s_hi);
    take(fk[law], m.k, m.k_lo, m.k_hi);
    take_log(f2[law], m.eff2, m.eff2_lo, m.eff2_hi);
    take_log(f4[law], m.eff4, m.eff4_lo, m.eff4_hi);
    if (m.s > 1)
      m.failed = "the launches' typical s = " + fmt_sig(m.s, 3) +
                 " lies outside the law's range [0, 1]: the time grows with the rank count " +
                 (m.kind == "weak" ? "beyond n T(base)" : "faster than a serial share allows");
    m.s_lo = std::clamp(m.s_lo, 0.0, 1.0), m.s_hi = std::clamp(m.s_hi, 0.0, 1.0);
    m.k_lo = std::max(m.k_lo, 0.0), m.k_hi = std::max(m.k_hi, 0.0);
    m.at2 = 2 * ranks.back(), m.at4 = 4 * ranks.back();
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<OverlapComparison> overlap_comparisons(const std::vector<PointRow>& rows, double confidence,
                                                   std::uint64_t seed) {
  std::vector<OverlapComparison> out;
  const PointNames names = point_names(rows);
  auto scheme = [](const PointRow& r) { return str_param_or(r.params, "scheme", ""); };
  auto keep = [&](const PointRow& r) {
    return r.has_timings() && (scheme(r) == "allreduce" || scheme(r) == "allreduce-overlap");
  };
  for (const auto& g : group_rows(rows, {"scheme", "bucket_bytes"}, keep)) {
    const PointRow* plain = nullptr;
    for (const auto* r : g)
      if (scheme(*r) == "allreduce") plain = r;
    if (!plain) continue;
    // The plain scheme's exposed communication per timed repetition: communication + wait.
    std::vector<double> step, exposed;
    for (std::size_t i = 0; i < plain->costs.size(); ++i) {
      double e = 0;
      bool have = false;
      for (const auto& ph : plain->phases)
        if (ph.phase == "communication" || ph.phase == "wait")
          if (auto it = ph.by_rep.find(plain->cost_reps[i]); it != ph.by_rep.end()) e += it->second, have = true;
      if (have) step.push_back(plain->costs[i]), exposed.push_back(e);
    }
    const int workers = plain->ranks - static_cast<int>(int_param_or(plain->params, "ps_servers", 0));
    if (exposed.empty() || workers < 2) continue;  // one worker has nothing to exchange, so nothing to hide
    for (const auto* r : g) {
      if (scheme(*r) != "allreduce-overlap") continue;
      OverlapComparison c;
      c.group = label(names, *r, true, true, "scheme");  // every one is allreduce-overlap against allreduce
      c.plain_id = plain->id;
      c.overlap_id = r->id;
      c.workers = workers;
      c.plain_step = stats::median(step);
      c.overlap_step = r->time.median;
      c.plain_exposed = stats::median(exposed);
      const std::uint64_t s = comparison_seed(seed, plain->id, r->id);
      c.speedup =
          stats::bootstrap_median_ratio(plain->costs, r->costs, confidence, kRatioMethod, kBootstrapResamples, s);
      auto hidden = [](double p, double o, double e) { return e > 0 ? (p - o) / e : std::nan(""); };
      c.hidden = hidden(c.plain_step, c.overlap_step, c.plain_exposed);
      const std::size_t least = static_cast<std::size_t>(smallest_n_with_median_ci(confidence));
      if (step.size() < least || r->costs.size() < least) {
        c.hidden_withheld = "fewer than " + std::to_string(least) + " timed steps in a point";
      } else {
        std::mt19937_64 rng(s ^ 0x0e1a9ULL);
        std::vector<double> est, ps(step.size()), pe(step.size()), os(r->costs.size());
        for (int b = 0; b < kBootstrapResamples; ++b) {
          std::uniform_int_distribution<std::size_t> pick_plain(0, step.size() - 1), pick_over(0, os.size() - 1);
          for (std::size_t i = 0; i < ps.size(); ++i) {
            const std::size_t k = pick_plain(rng);
            ps[i] = step[k], pe[i] = exposed[k];
          }
          for (auto& v : os) v = r->costs[pick_over(rng)];
          est.push_back(hidden(stats::median(ps), stats::median(os), stats::median(pe)));
        }
        const double lo = (1 - confidence) / 2;
        c.hidden_lo = percentile(est, lo), c.hidden_hi = percentile(est, 1 - lo);
      }
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace d500
