#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"
#include "plan/plan.hpp"
#include "store/index.hpp"
#include "store/reader.hpp"
#include "svg.hpp"

namespace fs = std::filesystem;

namespace d500 {

std::string method_statement(double confidence) {
  const std::string pct = std::to_string(static_cast<int>(confidence * 100 + 0.5)) + "%";
  return "Each repetition starts after an MPI_Barrier; its cost is the maximum over ranks of the rank's own "
         "duration (end - start, std::chrono::steady_clock). Warm-up repetitions are recorded but excluded; "
         "repetitions missing on some rank are excluded and counted. The summary is the median with an exact, "
         "distribution-free " + pct +
         " confidence interval from binomial order statistics (none exists for n <= 5). The mean with a Student-t " +
         pct +
         " interval is shown only where an Anderson-Darling test does not reject normality (p >= 0.05). Rates are "
         "work / time (GFLOP/s = flops / s / 1e9; GB/s = bytes / s / 1e9, bytes being for collectives the per-rank "
         "buffer as nccl-tests sizes it: the gathered result for allgather); the rate interval is the time interval mapped through that function. Outliers beyond "
         "Tukey's fences (1.5 IQR) are counted, never removed. 'Enough' means the median's CI half-width is within "
         "5% of the median with n >= 10; otherwise the repetitions needed are estimated from the 1/sqrt(n) law. "
         "Ranks are flagged as differing when a Kruskal-Wallis test on their own durations gives p < 0.01. Ratios "
         "(speedups, backend comparisons) are ratios of medians with seeded BCa bootstrap intervals (2000 resamples), "
         "each sample resampled independently; a comparison is significant when its interval excludes 1. Where "
         "both samples pass the normality check, the ratio of means with Fieller's interval is given as well.";
}

namespace {

int status_rank(const std::string& s) {
  if (s == "complete") return 3;
  if (s == "failed-validation") return 2;
  if (s == "running") return 1;
  return 0;
}


PointRow summarize_point(const PointResult& p, const JobResult& j, double confidence) {
  PointRow r;
  r.id = p.id;
  r.job_id = j.job_id;
  r.file = j.path;
  r.canonical = p.canonical;
  r.params = p.params;
  r.workload = p.params.count("workload") ? canonical(p.params.at("workload")) : "?";
  r.backend = p.params.count("backend") ? canonical(p.params.at("backend")) : "?";
  r.level = p.level;
  r.ranks = j.ranks;
  r.oversubscribed = j.oversubscribed;
  r.nodes = static_cast<int>(int_param_or(p.params, "nodes", 1));
  r.ranks_per_node = static_cast<int>(int_param_or(p.params, "ranks_per_node", j.ranks));
  r.scaling = p.scaling;
  r.scaling_note = p.scaling_note;
  r.status = p.status == "running" ? "incomplete" : p.status;
  r.status_reason = p.status_reason;
  r.validation_status = p.validation_status;
  r.validation_method = p.validation_method;
  r.validation_max_rel_error = p.validation_max_rel_error;
  r.validation_tolerance = p.validation_tolerance;
  r.peak_rss_bytes = p.peak_rss_bytes;
  r.rate_unit = p.rate_unit;
  std::set<std::string> hosts(j.hosts.begin(), j.hosts.end());
  r.hosts = join(std::vector<std::string>(hosts.begin(), hosts.end()), " ");

  // Per repetition: the slowest rank's duration, if every rank recorded it.
  const int total_reps = p.warmups + p.repetitions;
  std::vector<int> seen(static_cast<std::size_t>(std::max(total_reps, 0)), 0);
  std::vector<std::int64_t> worst(seen.size(), 0);
  std::vector<std::vector<double>> per_rank(static_cast<std::size_t>(std::max(j.ranks, 0)));
  std::set<int> warm;
  for (const auto& s : p.samples) {
    if (s.rep < 0 || s.rep >= total_reps || s.rank < 0 || s.rank >= j.ranks) continue;
    if (s.warmup) {
      warm.insert(s.rep);
      continue;
    }
    const auto d = s.end_ns - s.start_ns;
    seen[static_cast<std::size_t>(s.rep)]++;
    worst[static_cast<std::size_t>(s.rep)] = std::max(worst[static_cast<std::size_t>(s.rep)], d);
    per_rank[static_cast<std::size_t>(s.rank)].push_back(static_cast<double>(d) * 1e-9);
  }
  r.warmups_excluded = static_cast<int>(warm.size());
  for (std::size_t rep = 0; rep < seen.size(); ++rep) {
    if (seen[rep] == j.ranks) r.costs.push_back(static_cast<double>(worst[rep]) * 1e-9);
    else if (seen[rep] > 0) ++r.reps_incomplete;
  }
  r.time = stats::summarize(r.costs, confidence);
  r.mean = stats::mean_t_interval(r.costs, confidence);
  r.normality = stats::anderson_darling(r.costs);
  r.outliers = stats::tukey_outliers(r.costs);
  r.advice = stats::repetition_advice(r.time);
  if (j.ranks > 1) r.ranks_test = stats::kruskal_wallis(per_rank);
  for (const auto& v : per_rank) r.rank_medians.push_back(stats::median(v));
  r.tta_target = p.tta_target;
  r.tta_budget_s = p.tta_budget_s;
  r.eval_interval_steps = p.eval_interval_steps;
  for (const auto& e : p.events)
    if (e.rank == 0) r.curve.push_back({static_cast<double>(e.time_ns) * 1e-9, e.accuracy});
  if (p.tta_target > 0) r.tta_s = time_to_target(p.events, p.tta_target, p.tta_budget_s);
  r.work = static_cast<double>(p.rate_unit == "GFLOP/s" ? p.work_flops : p.work_bytes);
  if (r.time.n > 0 && r.time.median > 0) {
    r.rate = r.work / r.time.median / 1e9;
    if (r.time.has_ci) {
      r.rate_lo = r.work / r.time.hi / 1e9;
      r.rate_hi = r.work / r.time.lo / 1e9;
    }
  }
  return r;
}

std::string fmt_time(double s) {
  if (!std::isfinite(s)) return "-";
  if (s >= 1) return fmt_sig(s, 4) + " s";
  if (s >= 1e-3) return fmt_sig(s * 1e3, 4) + " ms";
  return fmt_sig(s * 1e6, 4) + " us";
}

std::string params_text(const Params& params, bool with_backend) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : params)
    if (k != "workload" && (with_backend || k != "backend") && k != "seed" && k != "nodes" && k != "ranks_per_node" &&
        !is_unset(v))
      parts.push_back(k + "=" + canonical(v));
  return join(parts, " ");
}

std::string point_label(const PointRow& r) { return r.workload + ":" + r.backend + " " + params_text(r.params, false); }

std::string ci_text(const PointRow& r) {
  if (r.time.n == 0) return "-";
  if (!r.time.has_ci) return "none (n=" + std::to_string(r.time.n) + ")";
  return "[" + fmt_time(r.time.lo) + ", " + fmt_time(r.time.hi) + "]";
}

std::string rate_text(const PointRow& r) { return r.time.n == 0 ? "-" : fmt_sig(r.rate, 4) + " " + r.rate_unit; }

std::string rate_ci_text(const PointRow& r) {
  return r.time.has_ci ? "[" + fmt_sig(r.rate_lo, 4) + ", " + fmt_sig(r.rate_hi, 4) + "]" : "-";
}

std::string validation_text(const PointRow& r) {
  if (r.validation_status == "not-run") return "not run";
  return r.validation_status + " (" + fmt_sig(r.validation_max_rel_error, 2) + ")";
}

std::string mean_text(const PointRow& r) {
  if (!r.normality.applicable) return "n/a (n<8)";
  if (r.normality.rejects()) return "not normal (AD p=" + fmt_sig(r.normality.p_value, 2) + ")";
  return fmt_time(r.mean.mean) + " [" + fmt_time(r.mean.lo) + ", " + fmt_time(r.mean.hi) + "]";
}

std::string reps_text(const PointRow& r) {
  if (r.time.n == 0) return "-";
  if (r.advice.enough) return "yes (" + fmt_sig(r.advice.rel_half_width * 100, 2) + "%)";
  return "no, ~" + std::to_string(r.advice.needed) + " needed";
}

std::string ranks_text(const PointRow& r) {
  if (!r.ranks_test.applicable) return "-";
  return r.ranks_test.p_value < 0.01 ? "differ (KW p=" + fmt_sig(r.ranks_test.p_value, 2) + ")" : "alike";
}

std::string ratio_text(const stats::RatioInterval& x) {
  if (x.method == "base") return "1 (base)";
  if (!x.bounded) return fmt_sig(x.estimate, 3) + " [unbounded]";
  return fmt_sig(x.estimate, 3) + " [" + fmt_sig(x.lo, 3) + ", " + fmt_sig(x.hi, 3) + "]";
}

std::string comparison_sentence(const Comparison& c) {
  const auto& s = c.speedup;
  if (!s.excludes_one())
    return c.other + " vs " + c.baseline + ": no significant difference (time ratio " + ratio_text(s) + ")";
  // The interval is of the factor the sentence states: the speedup, or its inverse, the slowdown.
  const std::string level = std::to_string(static_cast<int>(100 * c.confidence + 0.5)) + "% CI";
  if (s.estimate >= 1)
    return c.other + " is " + fmt_sig(s.estimate, 3) + "x faster than " + c.baseline + " (" + level + " of the speedup: [" +
           fmt_sig(s.lo, 3) + ", " + fmt_sig(s.hi, 3) + "])";
  return c.other + " is " + fmt_sig(1 / s.estimate, 3) + "x slower than " + c.baseline + " (" + level +
         " of the slowdown: [" + fmt_sig(1 / s.hi, 3) + ", " + fmt_sig(1 / s.lo, 3) + "])";
}

std::string tta_median_text(const TtaSummary& s) {
  if (!s.median_defined)
    return "undefined (" + std::to_string(s.runs - s.reached) + " of " + std::to_string(s.runs) + " runs missed)";
  return fmt_time(s.median);
}

std::string tta_ci_text(const TtaSummary& s) {
  if (!s.has_ci) return "none (n=" + std::to_string(s.runs) + ")";
  return "[" + fmt_time(s.lo) + ", " + (s.hi_censored() ? "> budget (" + fmt_time(s.budget_s) + ")" : fmt_time(s.hi)) + "]";
}

std::string tta_success_text(const TtaSummary& s) {
  return std::to_string(s.reached) + "/" + std::to_string(s.runs) + " [" + fmt_sig(s.success.lo, 2) + ", " +
         fmt_sig(s.success.hi, 2) + "]";
}

using Table = std::vector<std::vector<std::string>>;

Table results_table(const Report& rep) {
  const std::string ci = std::to_string(static_cast<int>(rep.confidence * 100 + .5)) + "% CI";
  Table t{{"point", "ranks", "n", "median", ci, "rate", "rate CI", "validation", "status"}};
  for (const auto& r : rep.rows)
    t.push_back({point_label(r), std::to_string(r.ranks) + (r.oversubscribed ? " (oversubscribed)" : ""),
                 std::to_string(r.time.n), r.time.n ? fmt_time(r.time.median) : "-",
                 ci_text(r), rate_text(r), rate_ci_text(r), validation_text(r), r.status});
  return t;
}

Table quality_table(const Report& rep) {
  Table t{{"point", "ranks", "n", "mean (t-interval)", "outliers (low/high)", "enough repetitions", "ranks"}};
  for (const auto& r : rep.rows) {
    if (r.time.n == 0) continue;
    t.push_back({point_label(r), std::to_string(r.ranks), std::to_string(r.time.n), mean_text(r),
                 std::to_string(r.outliers.low) + "/" + std::to_string(r.outliers.high), reps_text(r), ranks_text(r)});
  }
  return t;
}

Table comparison_table(const Report& rep) {
  Table t{{"shared parameters", "baseline", "backend", "speedup: ratio of medians (BCa CI)", "verdict",
            "ratio of means (Fieller CI)"}};
  for (const auto& c : rep.comparisons)
    t.push_back({c.group, c.baseline, c.other, ratio_text(c.speedup),
                 c.speedup.excludes_one() ? "significant" : "not significant",
                 c.has_mean_ratio ? ratio_text(c.mean_ratio) : "- (normality rejected or n<8)"});
  return t;
}

Table scaling_table(const ScalingSeries& s) {
  Table t{{"ranks", "nodes", "n", "median time", "CI", "T(base)/T(p) (CI)", "efficiency (CI)"}};
  for (const auto& p : s.points)
    t.push_back({std::to_string(p.ranks), std::to_string(p.nodes), std::to_string(p.time.n), fmt_time(p.time.median),
                 p.time.has_ci ? "[" + fmt_time(p.time.lo) + ", " + fmt_time(p.time.hi) + "]" : "none",
                 ratio_text(p.speedup),
                 fmt_sig(p.efficiency, 3) + " [" + fmt_sig(p.efficiency_lo, 3) + ", " + fmt_sig(p.efficiency_hi, 3) + "]"});
  return t;
}

Table tta_table(const Report& rep) {
  const std::string ci = std::to_string(static_cast<int>(rep.confidence * 100 + .5)) + "%";
  Table t{{"configuration", "target", "budget", "eval every", "runs reaching target (" + ci + " Clopper-Pearson)",
           "median time to accuracy", ci + " CI (exact, censored runs as > budget)"}};
  for (const auto& c : rep.tta)
    t.push_back({c.group, fmt_sig(c.summary.target, 3), fmt_time(c.summary.budget_s),
                 std::to_string(c.eval_interval_steps) + " steps", tta_success_text(c.summary),
                 tta_median_text(c.summary), tta_ci_text(c.summary)});
  return t;
}

std::string tta_svg(const TtaConfig& c, const Report& rep) {
  svg::Plot p;
  p.title = c.group;
  p.xlabel = "training time [s]";
  p.ylabel = "accuracy";
  for (std::size_t i = 0; i < c.ids.size(); ++i)
    for (const auto& r : rep.rows)
      if (r.id == c.ids[i]) {
        svg::Series s;
        s.name = "seed " + std::to_string(c.seeds[i]);
        s.markers = false;
        for (auto [t, a] : r.curve) s.x.push_back(t), s.y.push_back(a);
        p.series.push_back(s);
      }
  svg::Series target{"target", {0, c.summary.budget_s}, {c.summary.target, c.summary.target}, {}, {}, true, false};
  svg::Series budget{"budget", {c.summary.budget_s, c.summary.budget_s}, {0, 1}, {}, {}, true, false};
  p.series.push_back(target);
  p.series.push_back(budget);
  return svg::render(p);
}

std::string scaling_caption(const ScalingSeries& s) {
  std::string c = (s.kind == "weak" ? "Weak" : "Strong") + std::string(" scaling of ") + s.group + ". Base: the " +
                  std::to_string(s.base_ranks) + "-rank run of this configuration (not the best serial code), median " +
                  fmt_time(s.base_time) + ". ";
  if (s.kind == "weak")
    c += "Ideal: constant time; efficiency = T(base) / T(p). " + (s.note.empty() ? "" : "What grows: " + s.note + ".");
  else
    c += "Ideal: T(base) x base / p; efficiency = speedup x base / p. Amdahl fit to the medians: serial fraction " +
         fmt_sig(s.amdahl_serial_fraction, 3) + ".";
  return c;
}

std::string scaling_svg(const ScalingSeries& s) {
  svg::Plot p;
  p.title = s.group;
  p.xlabel = "ranks";
  p.ylabel = "time per repetition [s]";
  p.logx = p.logy = true;
  svg::Series m{"median, CI", {}, {}, {}, {}, false, true};
  svg::Series ideal{"ideal", {}, {}, {}, {}, true, false};
  svg::Series amdahl{"Amdahl fit", {}, {}, {}, {}, true, false};
  for (const auto& pt : s.points) {
    const double x = pt.ranks;
    m.x.push_back(x);
    m.y.push_back(pt.time.median);
    m.lo.push_back(pt.time.has_ci ? pt.time.lo : NAN);
    m.hi.push_back(pt.time.has_ci ? pt.time.hi : NAN);
    ideal.x.push_back(x);
    ideal.y.push_back(s.kind == "weak" ? s.base_time : s.base_time * s.base_ranks / x);
    amdahl.x.push_back(x);
    amdahl.y.push_back(s.base_time * (s.amdahl_serial_fraction + (1 - s.amdahl_serial_fraction) * s.base_ranks / x));
  }
  p.series = {m, ideal};
  if (s.kind != "weak") p.series.push_back(amdahl);
  return svg::render(p);
}

std::string comparison_svg(const Report& rep) {
  // Rates of every complete point per workload, one series per backend.
  svg::Plot p;
  p.title = "rates by backend (median, CI)";
  p.xlabel = "point (see the table's order)";
  p.ylabel = "rate";
  p.logy = true;
  std::map<std::string, svg::Series> by_backend;
  double x = 0;
  for (const auto& r : rep.rows) {
    if (r.status != "complete" || r.time.n == 0) continue;
    auto& s = by_backend[r.backend + " (" + r.rate_unit + ")"];
    s.name = r.backend + " (" + r.rate_unit + ")";
    s.x.push_back(++x);
    s.y.push_back(r.rate);
    s.lo.push_back(r.time.has_ci ? r.rate_lo : NAN);
    s.hi.push_back(r.time.has_ci ? r.rate_hi : NAN);
  }
  for (auto& [k, s] : by_backend) p.series.push_back(s);
  return p.series.empty() ? "" : svg::render(p);
}

void markdown_table(std::ostringstream& o, const Table& t) {
  for (std::size_t k = 0; k < t.size(); ++k) {
    o << "|";
    for (const auto& c : t[k]) o << " " << c << " |";
    o << "\n";
    if (k == 0) {
      o << "|";
      for (std::size_t i = 0; i < t[k].size(); ++i) o << "---|";
      o << "\n";
    }
  }
  o << "\n";
}

void html_table(std::ostringstream& o, const Table& t, const std::vector<std::string>& row_class = {}) {
  o << "<table>\n";
  for (std::size_t k = 0; k < t.size(); ++k) {
    std::string cls = k > 0 && k - 1 < row_class.size() && !row_class[k - 1].empty() ? " class=\"" + row_class[k - 1] + "\"" : "";
    o << "<tr" << cls << ">";
    for (const auto& c : t[k]) o << (k == 0 ? "<th>" : "<td>") << html_escape(c) << (k == 0 ? "</th>" : "</td>");
    o << "</tr>\n";
  }
  o << "</table>\n";
}

std::vector<std::string> attention(const Report& rep) {
  std::vector<std::string> out;
  for (const auto& r : rep.rows)
    if (r.oversubscribed)
      out.push_back("`" + r.canonical + "` (" + r.id + "): ran with more ranks than CPUs on a host (oversubscribed): "
                    "its times measure core sharing, not the operation");
  for (const auto& r : rep.rows)
    if (r.status != "complete" || r.reps_incomplete) {
      std::string s = "`" + r.canonical + "` (" + r.id + "): " + r.status + (r.status_reason.empty() ? "" : ": " + r.status_reason);
      if (r.reps_incomplete) s += "; " + std::to_string(r.reps_incomplete) + " repetitions lacked some rank and were excluded";
      out.push_back(s);
    }
  return out;
}

// JSON output, by hand: the structure is small and fixed.
std::string js(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}
std::string jn(double v) {
  if (!std::isfinite(v)) return "null";
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}
std::string jratio(const stats::RatioInterval& r) {
  return "{\"estimate\": " + jn(r.estimate) + ", \"lo\": " + (r.bounded ? jn(r.lo) : "null") + ", \"hi\": " +
         (r.bounded ? jn(r.hi) : "null") + ", \"significant\": " + (r.excludes_one() ? "true" : "false") +
         ", \"method\": " + js(r.method) + "}";
}

}  // namespace

Report analyze_run(const std::string& dir, const AnalysisOptions& opt) {
  Report rep;
  rep.dir = dir;
  rep.confidence = opt.confidence;
  rep.seed = opt.seed;
  fs::path d(dir);
  if (!fs::is_directory(d / "results"))
    throw Error(dir + ": not a d500 run directory (no results/); create one with `d500 plan CAMPAIGN -o DIR`");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(d / "results")) {
    std::string name = e.path().filename().string();
    if (name.ends_with(".h5") || name.find(".h5.prev-") != std::string::npos) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());

  // The best record of each point across files: complete beats failed beats incomplete;
  // among equals, the file written last.
  struct Best {
    PointRow row;
    int rank;
    std::string created;
  };
  std::map<std::string, Best> best;
  for (const auto& f : files) {
    JobResult j;
    try {
      j = read_job_file(f);
    } catch (const Error& e) {
      rep.unreadable.push_back(e.what());
      continue;
    }
    rep.files.push_back(f);
    if (rep.campaign.empty()) {
      rep.campaign = j.campaign;
      rep.campaign_hash = j.campaign_hash;
      rep.d500_version = j.d500_version + " (" + j.d500_commit + ")";
    }
    for (const auto& p : j.points) {
      auto it = best.find(p.id);
      int rank = status_rank(p.status);
      if (it == best.end() || rank > it->second.rank || (rank == it->second.rank && j.created_utc >= it->second.created))
        best[p.id] = Best{summarize_point(p, j, opt.confidence), rank, j.created_utc};
    }
  }

  std::vector<PlannedPoint> planned = read_points_csv(dir);
  std::set<std::string> listed;
  for (const auto& p : planned) {
    listed.insert(p.id);
    auto it = best.find(p.id);
    if (it != best.end()) {
      rep.rows.push_back(std::move(it->second.row));
      continue;
    }
    PointRow r;
    r.id = p.id;
    r.job_id = p.job;
    r.canonical = p.canonical;
    r.level = p.level;
    auto colon = p.canonical.find(':'), space = p.canonical.find(' ');
    r.workload = p.canonical.substr(0, colon);
    r.backend = p.canonical.substr(colon + 1, space - colon - 1);
    r.status = "missing";
    r.status_reason = "no results file holds this point (job not run, or killed before it started)";
    r.validation_status = "not-run";
    rep.rows.push_back(r);
  }
  for (auto& [id, b] : best)
    if (!listed.count(id)) rep.rows.push_back(std::move(b.row));  // results without a plan listing
  rep.comparisons = compare_backends(rep.rows, opt.confidence, opt.seed);
  rep.scaling = scaling_series(rep.rows, opt.confidence, opt.seed);
  rep.tta = tta_configs(rep.rows, opt.confidence);
  return rep;
}

std::string report_text_table(const Report& rep) {
  auto t = results_table(rep);
  std::vector<std::size_t> w(t.front().size(), 0);
  for (const auto& row : t)
    for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  std::ostringstream o;
  for (std::size_t k = 0; k < t.size(); ++k) {
    for (std::size_t i = 0; i < t[k].size(); ++i)
      o << t[k][i] << std::string(w[i] - t[k][i].size() + (i + 1 < t[k].size() ? 2 : 0), ' ');
    o << "\n";
    if (k == 0) {
      for (std::size_t i = 0; i < w.size(); ++i) o << std::string(w[i], '-') << (i + 1 < w.size() ? "  " : "");
      o << "\n";
    }
  }
  if (!rep.comparisons.empty()) {
    o << "\ncomparisons (" << static_cast<int>(rep.confidence * 100 + .5) << "% BCa bootstrap of the ratio of medians):\n";
    for (const auto& c : rep.comparisons) o << "  " << c.group << ": " << comparison_sentence(c) << "\n";
  }
  for (const auto& s : rep.scaling) {
    o << "\n" << s.kind << " scaling, " << s.group << " (base " << s.base_ranks << " rank(s), " << fmt_time(s.base_time)
      << "):\n";
    for (const auto& p : s.points)
      o << "  " << p.ranks << " ranks: " << fmt_time(p.time.median) << ", T(base)/T(p) " << ratio_text(p.speedup)
        << ", efficiency " << fmt_sig(p.efficiency, 3) << "\n";
  }
  for (const auto& c : rep.tta)
    o << "\ntime to accuracy " << fmt_sig(c.summary.target, 3) << ", " << c.group << ": median "
      << tta_median_text(c.summary) << " " << tta_ci_text(c.summary) << "; reached " << tta_success_text(c.summary)
      << (c.excluded_incomplete ? "; " + std::to_string(c.excluded_incomplete) + " incomplete run(s) left out" : "") << "\n";
  for (const auto& u : rep.unreadable) o << "unreadable: " << u << "\n";
  return o.str();
}

std::string report_markdown(const Report& rep) {
  std::ostringstream o;
  o << "# d500 report: " << rep.campaign << "\n\n- campaign hash: `" << rep.campaign_hash << "`\n- d500: " << rep.d500_version
    << "\n- files read: " << rep.files.size() << "\n- bootstrap seed: " << rep.seed << "\n\n## Method\n\n"
    << method_statement(rep.confidence) << "\n\n## Results\n\n";
  markdown_table(o, results_table(rep));
  o << "## Measurement quality\n\n";
  markdown_table(o, quality_table(rep));
  if (!rep.comparisons.empty()) {
    o << "## Backend comparisons\n\n";
    markdown_table(o, comparison_table(rep));
    for (const auto& c : rep.comparisons) o << "- " << c.group << ": " << comparison_sentence(c) << "\n";
    o << "\n";
  }
  if (!rep.scaling.empty()) {
    o << "## Scaling\n\n";
    for (const auto& s : rep.scaling) {
      o << scaling_caption(s) << "\n\n";
      markdown_table(o, scaling_table(s));
    }
  }
  if (!rep.tta.empty()) {
    o << "## Time to accuracy\n\nEach run's time is that of its first evaluation reaching the target within the "
         "budget; a run that misses is censored (coded as > budget), never dropped.\n\n";
    markdown_table(o, tta_table(rep));
  }
  auto att = attention(rep);
  if (!att.empty()) {
    o << "## Points needing attention\n\n";
    for (const auto& a : att) o << "- " << a << "\n";
    o << "\n";
  }
  if (!rep.unreadable.empty()) {
    o << "## Unreadable files\n\n";
    for (const auto& u : rep.unreadable) o << "- " << u << "\n";
  }
  return o.str();
}

std::string report_html(const Report& rep) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>d500 report: "
    << html_escape(rep.campaign) << "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:90em}"
    << "table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}"
    << "td:first-child,th:first-child{text-align:left;font-family:monospace}"
    << ".bad{background:#fdd}.warn{background:#ffd}figure{display:inline-block;margin:0 1em 1em 0}</style></head><body>\n"
    << "<h1>d500 report: " << html_escape(rep.campaign) << "</h1>\n<p>campaign hash <code>" << html_escape(rep.campaign_hash)
    << "</code>; d500 " << html_escape(rep.d500_version) << "; " << rep.files.size() << " files read; bootstrap seed "
    << rep.seed << "</p>\n<h2>Method</h2>\n<p>" << html_escape(method_statement(rep.confidence)) << "</p>\n<h2>Results</h2>\n";
  std::vector<std::string> cls;
  for (const auto& r : rep.rows) {
    if (r.status == "failed-validation" || r.status == "missing" || r.status == "incomplete") cls.push_back("bad");
    else if (!r.time.has_ci || !r.advice.enough) cls.push_back("warn");
    else cls.push_back("");
  }
  html_table(o, results_table(rep), cls);
  std::string rates = comparison_svg(rep);
  if (!rates.empty()) o << "<figure>" << rates << "</figure>\n";
  o << "<h2>Measurement quality</h2>\n";
  html_table(o, quality_table(rep));
  if (!rep.comparisons.empty()) {
    o << "<h2>Backend comparisons</h2>\n";
    html_table(o, comparison_table(rep));
    o << "<ul>\n";
    for (const auto& c : rep.comparisons) o << "<li>" << html_escape(c.group + ": " + comparison_sentence(c)) << "</li>\n";
    o << "</ul>\n";
  }
  if (!rep.scaling.empty()) {
    o << "<h2>Scaling</h2>\n";
    for (const auto& s : rep.scaling) {
      o << "<p>" << html_escape(scaling_caption(s)) << "</p>\n<figure>" << scaling_svg(s) << "</figure>\n";
      html_table(o, scaling_table(s));
    }
  }
  if (!rep.tta.empty()) {
    o << "<h2>Time to accuracy</h2>\n<p>Each run's time is that of its first evaluation reaching the target within the "
         "budget; a run that misses is censored (coded as &gt; budget), never dropped.</p>\n";
    html_table(o, tta_table(rep));
    for (const auto& c : rep.tta) o << "<figure>" << tta_svg(c, rep) << "</figure>\n";
  }
  auto att = attention(rep);
  if (!att.empty()) {
    o << "<h2>Points needing attention</h2>\n<ul>\n";
    for (const auto& a : att) o << "<li>" << html_escape(a) << "</li>\n";
    o << "</ul>\n";
  }
  if (!rep.unreadable.empty()) {
    o << "<h2>Unreadable files</h2>\n<ul>\n";
    for (const auto& u : rep.unreadable) o << "<li>" << html_escape(u) << "</li>\n";
    o << "</ul>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

std::string report_csv(const Report& rep) {
  std::set<std::string> names;
  for (const auto& r : rep.rows)
    for (const auto& [k, v] : r.params) names.insert(k);
  std::ostringstream o;
  o << "point_id,job_id,canonical,level,workload,backend,ranks,oversubscribed";
  for (const auto& n : names) o << ",param_" << n;
  o << ",n,warmups_excluded,reps_incomplete,median_s,ci_lo_s,ci_hi_s,ci_level,ci_coverage,ci_method,mean_s,mean_ci_lo_s,"
       "mean_ci_hi_s,normality_ad_p,outliers_low,outliers_high,enough_reps,reps_needed,ranks_kw_p,rate_unit,"
       "rate_median,rate_ci_lo,rate_ci_hi,validation_status,validation_max_rel_error,validation_tolerance,peak_rss_bytes,status,"
       "status_reason,hosts,file\n";
  auto num = [](double v) { return std::isfinite(v) ? jn(v) : std::string(); };
  for (const auto& r : rep.rows) {
    o << r.id << "," << r.job_id << "," << csv_field(r.canonical) << "," << r.level << "," << csv_field(r.workload) << ","
      << csv_field(r.backend) << "," << r.ranks << "," << (r.oversubscribed ? "yes" : "no");
    for (const auto& n : names) o << "," << (r.params.count(n) ? csv_field(canonical(r.params.at(n))) : "");
    const bool has = r.time.n > 0, ci = r.time.has_ci;
    const bool show_mean = r.normality.applicable && !r.normality.rejects();
    o << "," << r.time.n << "," << r.warmups_excluded << "," << r.reps_incomplete << "," << (has ? num(r.time.median) : "")
      << "," << (ci ? num(r.time.lo) : "") << "," << (ci ? num(r.time.hi) : "") << "," << num(rep.confidence) << ","
      << (ci ? num(r.time.coverage) : "") << ",binomial order statistics," << (show_mean ? num(r.mean.mean) : "") << ","
      << (show_mean ? num(r.mean.lo) : "") << "," << (show_mean ? num(r.mean.hi) : "") << ","
      << (r.normality.applicable ? num(r.normality.p_value) : "") << "," << (has ? std::to_string(r.outliers.low) : "")
      << "," << (has ? std::to_string(r.outliers.high) : "") << "," << (has ? (r.advice.enough ? "yes" : "no") : "") << ","
      << (has ? std::to_string(r.advice.needed) : "") << "," << (r.ranks_test.applicable ? num(r.ranks_test.p_value) : "")
      << "," << r.rate_unit << "," << (has ? num(r.rate) : "") << "," << (ci ? num(r.rate_lo) : "") << ","
      << (ci ? num(r.rate_hi) : "") << "," << r.validation_status << "," << num(r.validation_max_rel_error) << ","
      << num(r.validation_tolerance) << "," << (r.peak_rss_bytes >= 0 ? std::to_string(r.peak_rss_bytes) : "") << ","
      << r.status << "," << csv_field(r.status_reason) << "," << csv_field(r.hosts)
      << "," << csv_field(r.file) << "\n";
  }
  return o.str();
}

std::string report_json(const Report& rep) {
  std::ostringstream o;
  o << "{\n  \"campaign\": " << js(rep.campaign) << ",\n  \"campaign_hash\": " << js(rep.campaign_hash)
    << ",\n  \"d500\": " << js(rep.d500_version) << ",\n  \"confidence\": " << jn(rep.confidence)
    << ",\n  \"bootstrap_seed\": " << rep.seed << ",\n  \"method\": " << js(method_statement(rep.confidence))
    << ",\n  \"points\": [";
  for (std::size_t i = 0; i < rep.rows.size(); ++i) {
    const auto& r = rep.rows[i];
    o << (i ? "," : "") << "\n    {\"id\": " << js(r.id) << ", \"canonical\": " << js(r.canonical) << ", \"job\": "
      << js(r.job_id) << ", \"status\": " << js(r.status) << ", \"status_reason\": " << js(r.status_reason)
      << ", \"ranks\": " << r.ranks << ", \"oversubscribed\": " << (r.oversubscribed ? "true" : "false")
      << ", \"n\": " << r.time.n << ", \"warmups_excluded\": " << r.warmups_excluded
      << ", \"median_s\": " << (r.time.n ? jn(r.time.median) : "null") << ", \"ci\": "
      << (r.time.has_ci ? "[" + jn(r.time.lo) + ", " + jn(r.time.hi) + "]" : "null")
      << ", \"ci_coverage\": " << (r.time.has_ci ? jn(r.time.coverage) : "null") << ", \"mean\": "
      << (r.normality.applicable && !r.normality.rejects()
              ? "{\"mean_s\": " + jn(r.mean.mean) + ", \"ci\": [" + jn(r.mean.lo) + ", " + jn(r.mean.hi) + "]}"
              : "null")
      << ", \"normality_ad_p\": " << (r.normality.applicable ? jn(r.normality.p_value) : "null")
      << ", \"outliers\": {\"low\": " << r.outliers.low << ", \"high\": " << r.outliers.high << "}"
      << ", \"enough_repetitions\": " << (r.advice.enough ? "true" : "false") << ", \"repetitions_needed\": " << r.advice.needed
      << ", \"ranks_kw_p\": " << (r.ranks_test.applicable ? jn(r.ranks_test.p_value) : "null") << ", \"rank_medians_s\": [";
    for (std::size_t k = 0; k < r.rank_medians.size(); ++k) o << (k ? ", " : "") << jn(r.rank_medians[k]);
    o << "], \"rate\": " << (r.time.n ? jn(r.rate) : "null") << ", \"rate_unit\": " << js(r.rate_unit)
      << ", \"validation\": {\"status\": " << js(r.validation_status) << ", \"max_rel_error\": "
      << jn(r.validation_max_rel_error) << ", \"tolerance\": " << jn(r.validation_tolerance) << "}"
      << ", \"peak_rss_bytes\": " << (r.peak_rss_bytes >= 0 ? std::to_string(r.peak_rss_bytes) : "null") << "}";
  }
  o << "\n  ],\n  \"comparisons\": [";
  for (std::size_t i = 0; i < rep.comparisons.size(); ++i) {
    const auto& c = rep.comparisons[i];
    o << (i ? "," : "") << "\n    {\"group\": " << js(c.group) << ", \"baseline\": " << js(c.baseline) << ", \"backend\": "
      << js(c.other) << ", \"baseline_id\": " << js(c.baseline_id) << ", \"backend_id\": " << js(c.other_id)
      << ", \"speedup\": " << jratio(c.speedup) << ", \"mean_ratio\": " << (c.has_mean_ratio ? jratio(c.mean_ratio) : "null")
      << "}";
  }
  o << "\n  ],\n  \"scaling\": [";
  for (std::size_t i = 0; i < rep.scaling.size(); ++i) {
    const auto& s = rep.scaling[i];
    o << (i ? "," : "") << "\n    {\"group\": " << js(s.group) << ", \"kind\": " << js(s.kind) << ", \"note\": " << js(s.note)
      << ", \"base_ranks\": " << s.base_ranks << ", \"base_median_s\": " << jn(s.base_time)
      << ", \"amdahl_serial_fraction\": " << jn(s.amdahl_serial_fraction) << ", \"points\": [";
    for (std::size_t k = 0; k < s.points.size(); ++k) {
      const auto& p = s.points[k];
      o << (k ? ", " : "") << "{\"id\": " << js(p.id) << ", \"ranks\": " << p.ranks << ", \"median_s\": " << jn(p.time.median)
        << ", \"speedup\": " << jratio(p.speedup) << ", \"efficiency\": [" << jn(p.efficiency) << ", "
        << jn(p.efficiency_lo) << ", " << jn(p.efficiency_hi) << "]}";
    }
    o << "]}";
  }
  o << "\n  ],\n  \"time_to_accuracy\": [";
  for (std::size_t i = 0; i < rep.tta.size(); ++i) {
    const auto& c = rep.tta[i];
    const auto& s = c.summary;
    o << (i ? "," : "") << "\n    {\"group\": " << js(c.group) << ", \"target\": " << jn(s.target) << ", \"budget_s\": "
      << jn(s.budget_s) << ", \"eval_interval_steps\": " << c.eval_interval_steps << ", \"runs\": " << s.runs
      << ", \"reached\": " << s.reached << ", \"excluded_incomplete\": " << c.excluded_incomplete
      << ", \"success_rate\": {\"estimate\": " << jn(s.success.estimate) << ", \"lo\": " << jn(s.success.lo)
      << ", \"hi\": " << jn(s.success.hi) << ", \"method\": \"Clopper-Pearson\"}, \"median_s\": "
      << (s.median_defined ? jn(s.median) : "null") << ", \"ci_s\": "
      << (s.has_ci ? "[" + jn(s.lo) + ", " + (s.hi_censored() ? std::string("\"> budget\"") : jn(s.hi)) + "]" : "null")
      << ", \"tta_s\": [";
    for (std::size_t k = 0; k < s.tta.size(); ++k) o << (k ? ", " : "") << (std::isfinite(s.tta[k]) ? jn(s.tta[k]) : "\"> budget\"");
    o << "]}";
  }
  o << "\n  ],\n  \"unreadable\": [";
  for (std::size_t i = 0; i < rep.unreadable.size(); ++i) o << (i ? ", " : "") << js(rep.unreadable[i]);
  o << "]\n}\n";
  return o.str();
}

void write_reports(const Report& rep) {
  fs::path d(rep.dir);
  write_file_atomic((d / "report.md").string(), report_markdown(rep));
  write_file_atomic((d / "report.html").string(), report_html(rep));
  write_file_atomic((d / "results.csv").string(), report_csv(rep));
  write_file_atomic((d / "results.json").string(), report_json(rep));
  std::vector<IndexEntry> pts;
  for (const auto& r : rep.rows)
    if (!r.file.empty()) pts.push_back({r.id, r.file});
  write_campaign_index(rep.dir, rep.campaign, rep.campaign_hash, rep.files, pts);
}

}  // namespace d500
