#include "analysis/glance.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/format.hpp"
#include "analysis/names.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

std::string glance_count(std::size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Whether every point completed, and what the others did; how many ran oversubscribed, whose
// times measure core sharing.
std::string glance_points(const Report& rep) {
  std::map<std::string, std::size_t> not_complete;  // status -> points
  std::size_t shared = 0;
  for (const auto& r : rep.rows) {
    if (r.outcome != Outcome::Complete) ++not_complete[r.status.empty() ? outcome_name(r.outcome) : r.status];
    shared += r.outcome == Outcome::Complete && r.shares_cores();
  }
  const std::size_t all = rep.rows.size();
  const std::string sharing =
      shared == 0 ? ""
                  : ", " + std::to_string(shared) +
                        " of them with more ranks or threads than CPUs (their times measure core sharing)";
  if (not_complete.empty())
    return (all == 1 ? "The point" : "All " + std::to_string(all) + " points") + " completed" + sharing + ".";
  std::size_t missed = 0;
  std::vector<std::string> why;
  for (const auto& [status, n] : not_complete) missed += n, why.push_back(status + " " + std::to_string(n));
  return std::to_string(all - missed) + " of " + glance_count(all, "point", "points") + " completed" + sharing + "; " +
         std::to_string(missed) + " did not (" + join(why, ", ") + "): Points needing attention says why.";
}

// The configuration a glance line names beside an extreme: the group label without its workload,
// "defaults" where every parameter that varies is unset on it (the label names none).
std::string glance_config(const std::string& group) {
  const std::string rest = label_rest(group);
  return rest == group || rest.empty() ? "defaults" : rest;
}

// "0.448 (reference k=m=n=256)".
std::string glance_extreme(double v, const std::string& config) { return fmt_sig(v, 3) + " (" + config + ")"; }

// The verdicts of one pair's comparisons in one workload, counted, with the configurations of the
// lowest and the highest speedup: "6 configurations, faster in all 6: speedup from 7.38
// (k=m=n=256, 1 rank) to 14.9 (k=m=n=1024, 2 ranks)", or the one comparison's ratio and interval.
struct GlanceTally {
  std::size_t n = 0, faster = 0, slower = 0;
  double lo = INFINITY, hi = -INFINITY;
  std::string lo_config, hi_config;
  const stats::RatioInterval* only = nullptr;
  void add(const stats::RatioInterval& x, const std::string& group) {
    ++n;
    only = &x;
    if (x.estimate < lo) lo = x.estimate, lo_config = glance_config(group);
    if (x.estimate > hi) hi = x.estimate, hi_config = glance_config(group);
    if (x.excludes_one()) ++(x.estimate > 1 ? faster : slower);
  }
  std::string text(const std::string& what) const {
    const std::size_t same = n - faster - slower;
    if (n == 1)
      return "speedup " + ratio_text(*only) +
             (faster   ? ", faster"
              : slower ? ", slower"
                       : ", no significant difference");
    auto in = [&](std::size_t k) {
      return k == n ? (n == 2 ? std::string("both") : "all " + std::to_string(n)) : std::to_string(k);
    };
    std::vector<std::string> parts;
    if (faster) parts.push_back("faster in " + in(faster));
    if (slower) parts.push_back("slower in " + in(slower));
    if (same) parts.push_back("no significant difference in " + in(same));
    return std::to_string(n) + " " + what + ", " + join(parts, ", ") + ": speedup from " +
           glance_extreme(lo, lo_config) + " to " + glance_extreme(hi, hi_config);
  }
};

// Per workload and pair of backends, the comparisons counted: across seeds, else across launches,
// else within one run each.
std::vector<std::string> glance_comparisons(const Report& rep, const std::map<std::string, const PointRow*>& by_id) {
  using Key = std::tuple<std::string, std::string, std::string>;  // workload, baseline, other
  std::map<Key, GlanceTally> within, across;
  std::map<Key, std::string> replicate;  // "seeds" or "launches"
  std::vector<Key> order;
  for (const auto& c : rep.comparisons) {
    const auto it = by_id.find(c.baseline_id);
    const Key k{it == by_id.end() ? label_workload(c.group) : it->second->workload, c.baseline, c.other};
    if (!within.count(k)) order.push_back(k);
    within[k].add(c.speedup, c.group);
  }
  // Across seeds where the points have seeds, else across launches: those intervals cover the
  // variation between replicates.
  for (const auto* all : {&rep.seed_comparisons, &rep.launch_comparisons})
    for (const auto& c : *all) {
      const Key k{label_workload(c.group), c.baseline, c.other};
      const std::string what = c.replicate == "seed" ? "seeds" : "launches";
      if (c.varies != "backend" || (replicate.count(k) && replicate[k] != what)) continue;
      replicate[k] = what;
      across[k].add(c.speedup, c.group);
      if (!within.count(k)) {
        within[k] = GlanceTally{};
        order.push_back(k);
      }
    }
  std::vector<std::string> out;
  for (const auto& k : order) {
    const auto& [workload, baseline, other] = k;
    const bool replicated = across.count(k) > 0;
    const GlanceTally& t = replicated ? across.at(k) : within.at(k);
    out.push_back(workload + ": " + other + " against " + baseline + (replicated ? " across " + replicate.at(k) : "") +
                  ", " + t.text("configurations") + ".");
  }
  return out;
}

// Per workload, each scaling series' efficiency at its largest rank count: the one series', or the
// lowest and the highest with their series.
std::vector<std::string> glance_scaling(const Report& rep, const std::map<std::string, const PointRow*>& by_id) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const ScalingSeries*>> by_workload;
  for (const auto& s : rep.scaling) {
    if (!by_workload.count(s.workload)) order.push_back(s.workload);
    by_workload[s.workload].push_back(&s);
  }
  std::vector<std::string> out;
  for (const auto& w : order) {
    const ScalingSeries *lo = nullptr, *hi = nullptr;
    std::vector<int> at;
    bool shared = false;
    for (const auto* s : by_workload[w]) {
      const ScalingPoint& last = s->points.back();
      if (!lo || last.efficiency < lo->points.back().efficiency) lo = s;
      if (!hi || last.efficiency > hi->points.back().efficiency) hi = s;
      if (std::find(at.begin(), at.end(), last.ranks) == at.end()) at.push_back(last.ranks);
      const auto it = by_id.find(last.id);
      shared = shared || (it != by_id.end() && it->second->shares_cores());
    }
    const std::size_t n = by_workload[w].size();
    std::sort(at.begin(), at.end());
    std::vector<std::string> counts;
    for (int r : at) counts.push_back(std::to_string(r));
    const std::string efficiency = "efficiency at " + join(counts, ", ") + " ranks ";
    auto extreme = [](const ScalingSeries* s) {
      return glance_extreme(s->points.back().efficiency, glance_config(s->group));
    };
    out.push_back(
        w + " (" + lo->kind + " scaling)" +
        (n == 1 ? ": " + efficiency + fmt_sig(lo->points.back().efficiency, 3)
                : ", " + std::to_string(n) + " series: " + efficiency + "from " + extreme(lo) + " to " + extreme(hi)) +
        (shared ? "; oversubscribed: ranks shared cores" : "") + ".");
  }
  return out;
}

// Whether the shortest and the longest median time to accuracy are told apart: their intervals
// apart or overlapping, or how few runs left them none.
std::string glance_tta_apart(const TtaSummary& best, const TtaSummary& worst,
                             const std::vector<const TtaConfig*>& all) {
  if (best.has_ci && worst.has_ci)
    return best.hi < worst.lo ? ", their 95% intervals apart" : ", their 95% intervals overlap";
  int fewest = INT_MAX, most = 0;
  for (const auto* c : all) fewest = std::min(fewest, c->summary.runs), most = std::max(most, c->summary.runs);
  return ", no interval at " +
         (fewest == most ? std::to_string(most) : std::to_string(fewest) + " to " + std::to_string(most)) +
         (most == 1 ? " run each" : " runs each");
}

// Per accuracy target that several configurations of a workload share: the shortest and the
// longest median time to it, whether they are told apart, and how many missed it.
std::vector<std::string> glance_tta(const Report& rep) {
  std::vector<std::pair<std::string, double>> order;
  std::map<std::pair<std::string, double>, std::vector<const TtaConfig*>> by_target;
  for (const auto& c : rep.tta) {
    const std::pair<std::string, double> k{label_workload(c.group), c.summary.target};
    if (!by_target.count(k)) order.push_back(k);
    by_target[k].push_back(&c);
  }
  std::vector<std::string> out;
  for (const auto& k : order) {
    const auto& configs = by_target[k];
    if (configs.size() < 2) continue;
    const TtaConfig *best = nullptr, *worst = nullptr;
    std::size_t undefined = 0;
    for (const auto* c : configs) {
      if (!c->summary.median_defined) {
        ++undefined;
        continue;
      }
      if (!best || c->summary.median < best->summary.median) best = c;
      if (!worst || c->summary.median > worst->summary.median) worst = c;
    }
    std::string line = k.first + ": time to " + fmt_sig(k.second, 3) + ", " +
                       glance_count(configs.size(), "configuration", "configurations") + ": ";
    auto at = [](const TtaConfig* c) { return fmt_time(c->summary.median) + " (" + glance_config(c->group) + ")"; };
    if (best && worst != best)
      line += "median from " + at(best) + " to " + at(worst) + glance_tta_apart(best->summary, worst->summary, configs);
    else if (best)
      line += "median " + at(best);
    if (undefined)
      line += std::string(best ? "; " : "") + glance_count(undefined, "has", "have") + " no median (runs missed)";
    out.push_back(line + ".");
    if (out.size() == 3) break;
  }
  return out;
}

}  // namespace

std::optional<Section> glance_section(const Report& rep) {
  if (rep.rows.size() < 2) return std::nullopt;
  const std::map<std::string, const PointRow*> by_id = rows_by_id(rep);
  std::vector<std::string> items{glance_points(rep)};
  for (auto& lines : {glance_comparisons(rep, by_id), glance_scaling(rep, by_id), glance_tta(rep)})
    for (const auto& l : lines) items.push_back(l);
  Section s{"At a glance", 2, true, {}};
  s.blocks.push_back(
      text("What the sections below say in full, counted: a speedup is the baseline's median time over the other's "
           "(above 1, the other is faster) and counts as faster or slower only where its interval excludes 1 (Backend "
           "comparisons; across seeds or launches where the points have them); a scaling efficiency is the one at each "
           "series' largest rank count (Scaling); times to accuracy are medians over runs (Time to accuracy). A range "
           "names the configuration at each of its ends.",
           "-"));
  s.blocks.push_back(list(std::move(items)));
  return s;
}

}  // namespace d500
