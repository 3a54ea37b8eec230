#include "analysis/breakdown.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analysis/format.hpp"
#include "analysis/names.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

constexpr std::size_t kBreakdownPoints = 6;  // points side by side in one table
constexpr std::size_t kBreakdownTop = 12;    // rows of the costliest steps' table

// The points of one table: same steps, told apart by `heads`; `label` says what they share.
struct BreakdownGroup {
  std::vector<const PointRow*> points;
  std::vector<std::string> heads;
  std::string label;
};

std::string breakdown_step_key(const std::string& name, const std::string& direction) {
  return name + "\n" + direction;
}

// The steps a point ran, in order: points with the same list ran the same graph and pass.
std::string breakdown_signature(const PointRow& r) {
  std::string s = r.workload;
  for (const auto& c : r.all_steps) s += "\n" + breakdown_step_key(c.name, c.direction);
  return s;
}

// The operator as a reader knows it: the loss gradient's seed (1 / micro-batches, written by d500
// before the backward steps) has no operator of the graph's.
std::string breakdown_operator(const std::string& op, const std::string& direction) {
  return op == "-" && direction == "seed" ? "loss gradient" : op;
}

// Each group's heads: its backends where they differ, and the workload's varying parameters that
// differ among its points ("blas", "memory_format=nchw launch=2"); its label the rest.
void name_breakdown_group(const Report& rep, BreakdownGroup& g) {
  const PointRow& first = *g.points.front();
  bool backends = false;
  for (const auto* p : g.points) backends = backends || p->backend != first.backend;
  const auto it = rep.names.varying.find(first.workload);
  const std::vector<std::string> varying = it == rep.names.varying.end() ? std::vector<std::string>{} : it->second;
  std::set<std::string> differ;
  for (const auto& k : varying)
    for (const auto* p : g.points)
      if (value_text(*p, k) != value_text(first, k)) differ.insert(k);
  for (const auto* p : g.points) {
    std::vector<std::string> parts;
    if (backends) parts.push_back(p->backend);
    for (const auto& k : varying)  // in the workload's order
      if (differ.count(k)) parts.push_back(k + "=" + value_text(*p, k));
    g.heads.push_back(parts.empty() ? point_label(rep, *p) : join(parts, " "));
  }
  g.label = rep.names.label(first, {}, !backends, differ);
}

std::vector<BreakdownGroup> breakdown_groups(const Report& rep) {
  std::map<std::string, std::size_t> index;
  std::vector<std::vector<const PointRow*>> same;
  for (const auto& r : rep.rows) {
    if (r.all_steps.empty()) continue;
    const auto [it, fresh] = index.try_emplace(breakdown_signature(r), same.size());
    if (fresh) same.emplace_back();
    same[it->second].push_back(&r);
  }
  std::vector<BreakdownGroup> out;
  for (const auto& points : same) {
    // More than a table holds: tables of about equal size (7 points: 4 and 3, none alone).
    const std::size_t tables = (points.size() + kBreakdownPoints - 1) / kBreakdownPoints;
    const std::size_t each = (points.size() + tables - 1) / tables;
    for (std::size_t at = 0; at < points.size(); at += each) {
      BreakdownGroup g;
      g.points.assign(points.begin() + static_cast<std::ptrdiff_t>(at),
                      points.begin() + static_cast<std::ptrdiff_t>(std::min(points.size(), at + each)));
      name_breakdown_group(rep, g);
      out.push_back(std::move(g));
    }
  }
  return out;
}

// Up to this many points a table, an operator's cell has its share of the point's steps too.
constexpr std::size_t kBreakdownShares = 3;

// Two points' ratio of medians of `a` over `b` (their per-repetition times `ta`, `tb`) with its
// bootstrap interval, as the Backend comparisons give it; `what` seeds it apart from the points'
// other ratios. Where either kept no repetitions: the bare ratio of `median_a` over `median_b`
// ("-" where that is none).
std::string breakdown_ratio(const Report& rep, const PointRow& a, const PointRow& b, const std::vector<double>& ta,
                            const std::vector<double>& tb, double median_a, double median_b, const std::string& what) {
  if (ta.empty() || tb.empty()) return median_b > 0 ? fmt_sig(median_a / median_b, 3) : "-";
  return ratio_text(stats::bootstrap_median_ratio(ta, tb, rep.confidence, kRatioMethod, kBootstrapResamples,
                                                  comparison_seed(rep.seed, a.id + "\n" + what, b.id)));
}

// By operator and pass, each point's time ("5.550 ms (84.1%)": its steps' medians added, and with
// few points their share of all its steps'), costliest first by the largest of them; then every
// step's added, and the step's own median (the sum of medians is not the median of the sum). Two
// points: their ratio per row, with its interval where each repetition's time is known (an
// operator's: its steps' durations added per repetition; the step's: the point's repetitions).
Table breakdown_operators(const Report& rep, const BreakdownGroup& g) {
  const bool shares = g.points.size() <= kBreakdownShares;
  Table t{{"operator", "pass", "steps"}};
  for (const auto& h : g.heads) t[0].push_back(h);
  std::vector<std::pair<std::string, std::string>> keys;  // (op, direction), first seen order
  std::map<std::pair<std::string, std::string>, std::vector<const PointRow::OpCost*>> cells;
  std::map<std::pair<std::string, std::string>, double> largest;
  for (std::size_t i = 0; i < g.points.size(); ++i)
    for (const auto& c : g.points[i]->by_operator) {
      const std::pair<std::string, std::string> k{c.op, c.direction};
      if (!cells.count(k)) keys.push_back(k), cells[k].assign(g.points.size(), nullptr);
      cells[k][i] = &c;
      largest[k] = std::max(largest[k], c.median_s);
    }
  std::stable_sort(keys.begin(), keys.end(), [&](const auto& a, const auto& b) { return largest[a] > largest[b]; });
  for (const auto& k : keys) {
    const auto& row = cells[k];
    const auto* any = *std::find_if(row.begin(), row.end(), [](const auto* c) { return c != nullptr; });
    std::vector<std::string> r{breakdown_operator(k.first, k.second), k.second, std::to_string(any->steps)};
    for (const auto* c : row)
      r.push_back(!c ? "-" : fmt_time(c->median_s) + (shares ? " (" + fmt_sig(100 * c->share, 3) + "%)" : ""));
    t.push_back(std::move(r));
  }
  std::vector<std::string> all{"all steps", "", std::to_string(g.points.front()->steps)}, whole{"the step", "", ""};
  for (const auto* p : g.points) all.push_back(fmt_time(p->steps_total_s)), whole.push_back(fmt_time(p->time.median));
  t.push_back(std::move(all));
  // Two points: the first's time over the second's, per row (above 1: the second is faster).
  if (g.points.size() == 2) {
    const PointRow &a = *g.points[0], &b = *g.points[1];
    t[0].push_back(g.heads[0] + " / " + g.heads[1] + " (" + pct(rep.confidence) + " CI)");
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const auto& row = cells[keys[i]];
      t[i + 1].push_back(!row[0] || !row[1] ? "-"
                                            : breakdown_ratio(rep, a, b, row[0]->reps, row[1]->reps, row[0]->median_s,
                                                              row[1]->median_s, keys[i].first + " " + keys[i].second));
    }
    t.back().push_back(b.steps_total_s > 0 ? fmt_sig(a.steps_total_s / b.steps_total_s, 3) : "-");
    whole.push_back(breakdown_ratio(rep, a, b, a.costs, b.costs, a.time.median, b.time.median, "the step"));
  }
  t.push_back(std::move(whole));
  return t;
}

// The steps among each point's costliest, by the largest of their medians, each point's median
// (two points: the first's over the second's too), and what computed them: for the points whose backend did not compute
// every listed step itself under its own name (the reference's did), that point's, or with several such points their
// different ones in point order ("onednn convolution / onednn convolution (NHWC)").
Table breakdown_steps(const Report& rep, const BreakdownGroup& g, std::size_t& listed) {
  std::vector<std::map<std::string, const PointRow::StepCost*>> by_key(g.points.size());
  for (std::size_t i = 0; i < g.points.size(); ++i)
    for (const auto& c : g.points[i]->all_steps) by_key[i][breakdown_step_key(c.name, c.direction)] = &c;
  auto step = [&](std::size_t i, const std::string& k) -> const PointRow::StepCost* {
    const auto it = by_key[i].find(k);
    return it == by_key[i].end() ? nullptr : it->second;
  };
  std::vector<std::string> keys;
  std::map<std::string, double> largest;  // over every point, the step listed by it or not
  for (const auto* p : g.points)
    for (const auto& c : p->top_steps) {
      const std::string k = breakdown_step_key(c.name, c.direction);
      if (largest.count(k)) continue;
      keys.push_back(k);
      for (std::size_t i = 0; i < g.points.size(); ++i)
        if (const auto* o = step(i, k)) largest[k] = std::max(largest[k], o->median_s);
    }
  std::stable_sort(keys.begin(), keys.end(), [&](const auto& a, const auto& b) { return largest[a] > largest[b]; });
  listed = keys.size();
  keys.resize(std::min(keys.size(), kBreakdownTop));
  std::vector<std::size_t> named;  // the points whose computing steps are named
  for (std::size_t i = 0; i < g.points.size(); ++i) {
    bool own = true;
    for (const auto& k : keys)
      if (const auto* c = step(i, k)) own = own && c->impl == g.points[i]->backend;
    if (!own) named.push_back(i);
  }
  Table t{{"step", "operator", "pass"}};
  for (const auto& h : g.heads) t[0].push_back(h);
  const bool pair = g.points.size() == 2;
  if (pair) t[0].push_back(g.heads[0] + " / " + g.heads[1] + " (" + pct(rep.confidence) + " CI)");
  if (!named.empty()) t[0].push_back(named.size() == 1 ? g.heads[named[0]] + ": computed by" : "computed by");
  for (const auto& k : keys) {
    const PointRow::StepCost* any = nullptr;
    for (std::size_t i = 0; i < g.points.size() && !any; ++i) any = step(i, k);
    std::vector<std::string> r{any->name, breakdown_operator(any->op, any->direction), any->direction};
    for (std::size_t i = 0; i < g.points.size(); ++i) r.push_back(step(i, k) ? fmt_time(step(i, k)->median_s) : "-");
    if (pair) {
      const auto *a = step(0, k), *b = step(1, k);
      r.push_back(!a || !b ? "-"
                           : breakdown_ratio(rep, *g.points[0], *g.points[1], a->reps, b->reps, a->median_s,
                                             b->median_s, "step " + k));
    }
    std::vector<std::string> by;
    for (std::size_t i : named) {
      const std::string impl = step(i, k) ? step(i, k)->impl : "-";
      if (std::find(by.begin(), by.end(), impl) == by.end()) by.push_back(impl);
    }
    if (!named.empty()) r.push_back(join(by, " / "));
    t.push_back(std::move(r));
  }
  return t;
}

}  // namespace

std::vector<Block> network_breakdowns(const Report& rep) {
  std::vector<Block> out;
  const std::vector<BreakdownGroup> groups = breakdown_groups(rep);
  // The terminal's words for the tables it does not print: per group, the operator that costs
  // each point most.
  std::vector<std::string> brief;
  for (const auto& g : groups) {
    std::vector<const PointRow::OpCost*> top;
    for (const auto* p : g.points) top.push_back(p->by_operator.empty() ? nullptr : &p->by_operator.front());
    if (std::find(top.begin(), top.end(), nullptr) != top.end()) continue;
    auto name = [](const PointRow::OpCost* c) { return breakdown_operator(c->op, c->direction) + " " + c->direction; };
    auto cost = [](const PointRow::OpCost* c) {
      return fmt_time(c->median_s) + " (" + fmt_sig(100 * c->share, 3) + "%)";
    };
    const bool one = std::all_of(top.begin(), top.end(), [&](const auto* c) { return name(c) == name(top[0]); });
    if (g.points.size() == 1) {
      brief.push_back(point_label(rep, *g.points[0]) + ": " + name(top[0]) + " costs most, " + cost(top[0]) +
                      " of its steps");
    } else if (one && g.points.size() > kBreakdownShares) {
      const auto [lo, hi] = std::minmax_element(top.begin(), top.end(),
                                                [](const auto* a, const auto* b) { return a->median_s < b->median_s; });
      const std::string from = fmt_time((*lo)->median_s), to = fmt_time((*hi)->median_s);
      brief.push_back(g.label + ": " + name(top[0]) + " costs most on all " + std::to_string(g.points.size()) +
                      " points, " + (from == to ? from + " each" : from + " to " + to));
    } else {
      std::vector<std::string> parts;
      for (std::size_t i = 0; i < top.size(); ++i)
        parts.push_back(g.heads[i] + (one ? " " : " " + name(top[i]) + " ") + cost(top[i]));
      brief.push_back(g.label + ": " + (one ? name(top[0]) + " costs most on each point" : "what costs most") +
                      " (the share of the point's steps): " + join(parts, "; "));
    }
  }
  if (!brief.empty()) {
    out.push_back(terminal_words(list(std::move(brief))));  // the documents have the tables
    out.push_back(terminal_words(
        text("report.md and report.html set each operator and each costly step of these points side by side.")));
  }
  for (const auto& g : groups) {
    if (g.points.size() == 1) {
      const PointRow& r = *g.points.front();
      out.push_back(text(steps_caption(rep, r), "-"));
      out.push_back(table(steps_table(r), false));
      out.push_back(text(operators_caption(rep, r), "-"));
      out.push_back(table(operators_table(r), false));
      continue;
    }
    const std::string steps = std::to_string(g.points.front()->steps);
    out.push_back(text(
        g.label + ", " + std::to_string(g.points.size()) + " points that ran the same " + steps +
            " steps: where the step's time goes, by operator and pass. Each cell is the point's steps of that operator, "
            "their medians added (as a profiler groups kernels)" +
            (g.points.size() <= kBreakdownShares ? ", and their share of all its steps' medians" : "") +
            "; the step's row is its own median" +
            (g.points.size() == 2
                 ? "; the last column is the first point's time over the second's (above 1, the second "
                   "is faster), an operator's and the step's with the " +
                       pct(rep.confidence) + " " + ratio_method_words() +
                       " interval of the ratio of their medians per repetition (an operator's steps added in each), "
                       "as Backend comparisons give it."
                 : "."),
        "-"));
    out.push_back(table(breakdown_operators(rep, g), false));
    std::size_t listed = 0;
    Table t = breakdown_steps(rep, g, listed);
    const std::size_t shown = t.size() - 1;
    out.push_back(text(
        g.label + ": the costliest steps, side by side: " +
            (shown < listed ? "the " + std::to_string(shown) + " costliest of the " + std::to_string(listed)
                            : "the " + std::to_string(listed)) +
            " steps among each point's " + std::to_string(g.points.front()->top_steps.size()) +
            " costliest, by the largest of their medians. Each cell is the step's median over the timed repetitions of "
            "the point's slowest rank" +
            (g.points.size() == 2
                 ? "; the ratio is the first point's over the second's, with the " + pct(rep.confidence) + " " +
                       ratio_method_words() + " interval of its medians per repetition."
                 : "."),
        "-"));
    out.push_back(table(std::move(t), false));
  }
  return out;
}

}  // namespace d500
