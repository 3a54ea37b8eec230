// The csv reporter: results.csv, one row per point with every figure and parameter.
#include <cmath>
#include <set>
#include <sstream>

#include "analysis/format.hpp"
#include "analysis/reporters.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

// One boolean convention in every column: true/false, as pandas reads them.
std::string flag(bool b) { return b ? "true" : "false"; }

std::string render_csv(const Report& rep, const Document&) {
  std::set<std::string> names;
  for (const auto& r : rep.rows)
    for (const auto& [k, v] : r.params) names.insert(k);
  std::ostringstream o;
  o << "point_id,job_id,canonical,level,workload,backend,ranks,oversubscribed";
  for (const auto& n : names) o << ",param_" << n;
  o << ",n,warmups_excluded,reps_incomplete,median_s,ci_lo_s,ci_hi_s,ci_level,ci_coverage,ci_method,mean_s,mean_ci_lo_s,"
       "mean_ci_hi_s,normality_ad_p,outliers_low,outliers_high,enough_reps,reps_needed,reps_needed_capped,ranks_p,rate_unit,"
       "rate_median,rate_ci_lo,rate_ci_hi,validation_status,validation_max_rel_error,validation_tolerance,peak_rss_bytes,memory_estimate_bytes,threads_oversubscribed,status,"
       "status_reason,hosts,file,forward_median_s,backward_median_s,memory_planned_bytes,reps_stopped_by,ranks_test,trend_rho,trend_p,lag1_autocorrelation,rate_aggregate,machine_busy,machine_other_load,machine_steal_share,machine_involuntary_switches,device_median_s,device_ci_lo_s,device_ci_hi_s,device_peak_memory_bytes,device_peak_fraction,p90_s,p90_ci_lo_s,p90_ci_hi_s,p99_s,p99_ci_lo_s,p99_ci_hi_s,validation_method\n";
  auto num = [](double v) { return std::isfinite(v) ? jn(v) : std::string(); };
  for (const auto& r : rep.rows) {
    o << r.id << "," << r.job_id << "," << csv_field(r.canonical) << "," << r.level << "," << csv_field(r.workload)
      << "," << csv_field(r.backend) << "," << r.ranks << "," << flag(r.oversubscribed);
    // One typed column per parameter: numbers as numbers, booleans true/false, strings bare
    // (quoted only where CSV needs it), an unset or absent one empty.
    for (const auto& n : names) {
      o << ",";
      if (auto it = r.params.find(n); it != r.params.end() && !is_unset(it->second))
        o << csv_field(std::holds_alternative<std::string>(it->second) ? std::get<std::string>(it->second)
                                                                       : canonical(it->second));
    }
    const bool has = r.time.n > 0, ci = r.time.has_ci;
    const bool show_mean = r.mean_trusted();
    o << "," << r.time.n << "," << r.warmups_excluded << "," << r.reps_incomplete << ","
      << (has ? num(r.time.median) : "") << "," << (ci ? num(r.time.lo) : "") << "," << (ci ? num(r.time.hi) : "")
      << "," << num(rep.confidence) << "," << (ci ? num(r.time.coverage) : "") << ",binomial order statistics,"
      << (show_mean ? num(r.mean.mean) : "") << "," << (show_mean ? num(r.mean.lo) : "") << ","
      << (show_mean ? num(r.mean.hi) : "") << "," << (r.normality.applicable ? num(r.normality.p_value) : "") << ","
      << (has ? std::to_string(r.outliers.low) : "") << "," << (has ? std::to_string(r.outliers.high) : "") << ","
      << (has ? flag(r.advice.enough) : "")
      << ","
      // A count beyond the advice's cap is not a number of repetitions: empty, and the cap's flag says why.
      << (has && !r.advice.capped ? std::to_string(r.advice.needed) : "") << "," << (has ? flag(r.advice.capped) : "")
      << "," << (r.ranks_test.applicable ? num(r.ranks_test.p_value) : "") << "," << r.rate_unit << ","
      << (has ? num(r.rate) : "") << "," << (ci ? num(r.rate_lo) : "") << "," << (ci ? num(r.rate_hi) : "") << ","
      << r.validation_status
      << ","
      // A point never validated has no error and no tolerance: empty, not 0.
      << (r.validation_status == "not-run" ? "" : num(r.validation_max_rel_error)) << ","
      << (r.validation_status == "not-run" ? "" : num(r.validation_tolerance)) << ","
      << (r.peak_rss_bytes >= 0 ? std::to_string(r.peak_rss_bytes) : "") << ","
      << (r.memory_estimate_bytes >= 0 ? std::to_string(r.memory_estimate_bytes) : "") << ","
      << flag(r.threads_oversubscribed) << "," << r.status << "," << csv_field(r.status_reason) << ","
      << csv_field(r.hosts) << "," << csv_field(r.file);
    std::string fwd, bwd, planned;
    for (const auto& ph : r.phases) {
      if (ph.phase == "forward") fwd = num(ph.time.median);
      if (ph.phase == "backward") bwd = num(ph.time.median);
    }
    if (auto it = r.facts.find("memory.planned_bytes"); it != r.facts.end()) planned = canonical(it->second);
    std::string stopped = "count";
    if (auto it = r.facts.find("repetitions.stopped_by"); it != r.facts.end()) stopped = canonical(it->second);
    if (r.level >= 2) stopped = "";  // training: steps, not repetitions
    const auto& ind = r.independence;
    o << "," << fwd << "," << bwd << "," << planned << "," << stopped << ","
      << (r.ranks_test.applicable ? r.ranks_test.method : "") << "," << (ind.applicable ? num(ind.trend_rho) : "")
      << "," << (ind.applicable ? num(ind.trend_p) : "") << "," << (ind.applicable ? num(ind.lag1) : "") << ","
      << (has ? num(r.rate_aggregate) : "");
    for (const char* k :
         {"machine.busy", "machine.other_load", "machine.steal_share", "machine.involuntary_switches"}) {
      auto it = r.facts.find(k);
      std::string v = it == r.facts.end() ? std::string() : canonical(it->second);
      if (std::string(k) == "machine.busy" && !v.empty()) v = flag(v != "0" && v != "false");  // stored as 0/1
      o << "," << v;
    }
    const PointRow::PhaseTime* d = device_phase(r);
    const bool dci = d && d->time.has_ci;
    auto mem = r.facts.find("device.peak_memory_bytes");
    o << "," << (d ? num(d->time.median) : "") << "," << (dci ? num(d->time.lo) : "") << ","
      << (dci ? num(d->time.hi) : "") << "," << (mem == r.facts.end() ? std::string() : canonical(mem->second)) << ","
      << (std::isnan(peak_fraction(r)) ? "" : num(peak_fraction(r)));
    for (std::size_t k = 0; k < 2; ++k) {
      const bool q = k < r.tail.size(), qci = q && r.tail[k].has_ci;
      o << "," << (q ? num(r.tail[k].estimate) : "") << "," << (qci ? num(r.tail[k].lo) : "") << ","
        << (qci ? num(r.tail[k].hi) : "");
    }
    o << "," << csv_field(r.validation_method) << "\n";
  }
  return o.str();
}

}  // namespace

std::unique_ptr<Reporter> csv_reporter() { return make_reporter("csv", "results.csv", render_csv); }

}  // namespace d500
