#include "analysis/format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "analysis/svg.hpp"
#include "common/text.hpp"

namespace d500 {

std::string fmt_p(double p) {
  // Below 10^-4 the digits say nothing the inequality does not (and 0 is an underflow, not a
  // certainty): "p < 0.0001", never "p=0.0".
  if (p < 1e-4) return "p < 0.0001";
  char buf[32];
  std::snprintf(buf, sizeof buf, "p=%.2g", p);  // two significant digits: 0.034, 0.5
  return buf;
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

std::string point_label(const Report& rep, const PointRow& r) { return rep.names.label(r); }

std::string ci_text(const PointRow& r) {
  if (r.time.n == 0) return "-";
  if (!r.time.has_ci) return "none (n=" + std::to_string(r.time.n) + ")";
  return "[" + fmt_time(r.time.lo) + ", " + fmt_time(r.time.hi) + "]";
}

std::string rate_text(const PointRow& r) {
  if (r.time.n == 0) return "-";
  std::string t = fmt_sig(r.rate, 4) + " " + r.rate_unit;
  if (r.ranks > 1)
    t += " per rank" +
         (std::isfinite(r.rate_aggregate) ? " (" + fmt_sig(r.rate_aggregate, 4) + " all ranks)" : std::string());
  return t;
}

std::string rate_ci_text(const PointRow& r) {
  return r.time.has_ci ? "[" + fmt_sig(r.rate_lo, 4) + ", " + fmt_sig(r.rate_hi, 4) + "]" : "-";
}

std::string validation_text(const PointRow& r) {
  if (r.validation_status == "not-run") return "not run";
  // The backend failed before its output could be judged (the worker records no error, no
  // tolerance): the status column says so; "failed (nan)" would read as a judgement.
  if (r.status == "backend-failed" && !std::isfinite(r.validation_max_rel_error) && !(r.validation_tolerance > 0))
    return "-";
  return r.validation_status + " (" + fmt_sig(r.validation_max_rel_error, 2) + ")";
}

std::string mean_text(const PointRow& r) {
  if (!r.normality.applicable) return "n/a (n<8)";
  if (r.normality.rejects()) return "not normal (AD " + fmt_p(r.normality.p_value) + ")";
  if (!r.mean_trusted()) return "not shown: outliers";
  return fmt_time(r.mean.mean) + " [" + fmt_time(r.mean.lo) + ", " + fmt_time(r.mean.hi) + "]";
}

namespace {

double fact_number(const PointRow& r, const std::string& k) {
  auto it = r.facts.find(k);
  if (it == r.facts.end()) return std::nan("");
  if (const auto* i = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&it->second)) return *d;
  if (const auto* b = std::get_if<bool>(&it->second)) return *b ? 1 : 0;
  return std::nan("");
}

std::string fact_text(const PointRow& r, const std::string& k) { return str_param_or(r.facts, k, ""); }

}  // namespace

std::string reps_text(const PointRow& r) {
  if (r.time.n == 0) return "-";
  if (const std::string why = fact_text(r, "repetitions.stopped_by"); !why.empty()) {
    const std::string width =
        r.time.has_ci ? fmt_sig((r.time.hi - r.time.lo) / r.time.median * 100, 2) + "% wide" : "no interval";
    if (why == "ci_width") return "auto: stopped at n=" + std::to_string(r.time.n) + ", CI " + width;
    if (why == "max") return "auto: max n=" + std::to_string(r.time.n) + " reached, CI still " + width;
    if (why == "max_time") return "auto: max_time reached at n=" + std::to_string(r.time.n) + ", CI " + width;
  }
  if (r.advice.enough) return "yes (" + fmt_sig(r.advice.rel_half_width * 100, 2) + "%)";
  // Beyond a thousand, the advice says only that the samples are too noisy (or not one
  // distribution) for repetitions to fix: say that instead of "~16133".
  if (r.advice.capped || r.advice.needed > kMostAdvisedRepetitions)
    return "no (CI +/-" + fmt_sig(r.advice.rel_half_width * 100, 2) + "%): over " +
           std::to_string(kMostAdvisedRepetitions) +
           " needed, too noisy";  // for repetitions alone: quality_note says what to do
  return "no, ~" + std::to_string(r.advice.needed) + " needed";
}

std::string ranks_text(const PointRow& r) {
  if (!r.ranks_test.applicable) return "-";
  return r.ranks_test.p_value < 0.01 ? "differ (" + r.ranks_test.method + " " + fmt_p(r.ranks_test.p_value) + ")"
                                     : "alike";
}

std::string independence_text(const PointRow& r) {
  const auto& c = r.independence;
  if (!c.applicable) return "-";
  std::vector<std::string> found;
  if (c.trend()) found.push_back("trend rho=" + fmt_sig(c.trend_rho, 2) + " (" + fmt_p(c.trend_p) + ")");
  if (c.autocorrelated(r.time.n)) found.push_back("lag-1 r=" + fmt_sig(c.lag1, 2));
  if (found.empty()) return "yes";
  return "no: " + join(found, "; ");  // what to do: quality_note
}

std::string machine_text(const PointRow& r) {
  const double busy = fact_number(r, "machine.busy"), load = fact_number(r, "machine.other_load"),
               steal = fact_number(r, "machine.steal_share");
  if (std::isnan(busy)) return "-";
  // The load average less the job's own threads: below zero where they did not all run at once
  // (waits, a lone rank's idle cores), which is no load of others'.
  const std::string figures = (std::isnan(load) ? std::string("load unknown")
                               : load <= 0      ? std::string("no other load")
                                                : "+" + fmt_sig(load, 2) + " load") +
                              ", " + fmt_sig(steal * 100, 2) + "% steal";
  std::string text = (busy > 0 ? "busy: " : "quiet: ") + figures;  // what busy means: quality_note
  // The GPUs' state over the repetitions, where NVML could be read (device.*).
  const double throttled = fact_number(r, "device.throttled");
  if (std::isnan(throttled)) return text;
  const double capped = fact_number(r, "device.capped_s"), span = fact_number(r, "device.span_s"),
               clock = fact_number(r, "device.sm_clock_mhz_end"), energy = fact_number(r, "device.energy_j");
  std::string gpu =
      "capped " + (std::isnan(capped) ? std::string("unknown") : fmt_sig(capped, 2) + " s") + " of " +
      fmt_sig(span, 3) + " s, SM clock at the end " +
      (std::isnan(clock) ? std::string("unknown") : fmt_sig(clock, 4) + " MHz") +
      ", reasons: " + fact_text(r, "device.clock_event_reasons") +
      (!std::isnan(energy)                          ? ", " + fmt_sig(energy, 3) + " J"
       : fact_text(r, "device.energy_note").empty() ? std::string()
                                                    : ", energy not resolved: NVML's counter did not advance");
  return text + (throttled > 0 ? "; GPU held back (" + gpu + "): timings are of a slowed GPU"
                               : "; GPU at its clocks (" + gpu + ")");
}

std::string ratio_text(const stats::RatioInterval& x) {
  if (x.method == "base") return "1 (base)";
  if (!x.withheld.empty()) return fmt_sig(x.estimate, 3) + " [no CI: too few repetitions]";
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
    return c.other + " is " + fmt_sig(s.estimate, 3) + "x faster than " + c.baseline + " (" + level +
           " of the speedup: [" + fmt_sig(s.lo, 3) + ", " + fmt_sig(s.hi, 3) + "])";
  return c.other + " is " + fmt_sig(1 / s.estimate, 3) + "x slower than " + c.baseline + " (" + level +
         " of the slowdown: [" + fmt_sig(1 / s.hi, 3) + ", " + fmt_sig(1 / s.lo, 3) + "])";
}

std::string tta_median_text(const TtaSummary& s) {
  if (!s.median_defined)
    return "undefined (" + std::to_string(s.runs - s.reached) + " of " + std::to_string(s.runs) + " runs missed)";
  return fmt_time(s.median);
}

std::string tta_ci_text(const TtaSummary& s) {
  if (s.beyond_budget) return "> budget (" + fmt_time(s.budget_s) + ") at both bounds: the median exceeds the budget";
  if (!s.has_ci) return "none (n=" + std::to_string(s.runs) + ")";
  return "[" + fmt_time(s.lo) + ", " + (s.hi_censored() ? "> budget (" + fmt_time(s.budget_s) + ")" : fmt_time(s.hi)) +
         "]";
}

std::string tta_success_text(const TtaSummary& s) {
  return std::to_string(s.reached) + "/" + std::to_string(s.success.n) + " [" + fmt_sig(s.success.lo, 2) + ", " +
         fmt_sig(s.success.hi, 2) + "]";
}

using Table = std::vector<std::vector<std::string>>;

Table results_table(const Report& rep) {
  const std::string ci = std::to_string(static_cast<int>(rep.confidence * 100 + .5)) + "% CI";
  Table t{{"point", "ranks", "reps", "median", ci, "rate", "rate CI", "validation", "status"}};
  for (const auto& r : rep.rows)
    t.push_back({point_label(rep, r),
                 std::to_string(r.ranks) + (r.oversubscribed           ? " (oversubscribed)"
                                            : r.threads_oversubscribed ? " (threads oversubscribed)"
                                                                       : ""),
                 std::to_string(r.time.n), r.time.n ? fmt_time(r.time.median) : "-", ci_text(r), rate_text(r),
                 rate_ci_text(r), validation_text(r), r.status});
  return t;
}

Table training_table(const Report& rep) {
  Table t{{"point", "step (median)", "data", "forward", "backward", "update", "data share", "pipeline /s"}};
  for (const auto& r : rep.rows) {
    if (r.level != 2 || r.time.n == 0) continue;
    double by[4] = {std::nan(""), std::nan(""), std::nan(""), std::nan("")};
    const char* names[4] = {"data", "forward", "backward", "update"};
    for (const auto& ph : r.phases)
      for (int k = 0; k < 4; ++k)
        if (ph.phase == names[k] && ph.time.n > 0) by[k] = ph.time.median;
    if (std::isnan(by[0])) continue;
    std::vector<std::string> row{point_label(rep, r), fmt_time(r.time.median)};
    for (double v : by) row.push_back(std::isnan(v) ? "-" : fmt_time(v));
    row.push_back(fmt_sig(100 * by[0] / r.time.median, 3) + "%");
    row.push_back(by[0] > 0 && r.work > 0 ? fmt_sig(r.work / by[0], 3) : "-");
    t.push_back(std::move(row));
  }
  return t;
}

std::string training_note() {
  return "Level 2, per point: medians over the timed steps of the step and of its phases (data: the sampler's indices, "
         "reading, augmenting and converting the batch and handing it to the executor; on a device, the host's time "
         "before the device starts). Data share = data / step: how much of a step the input pipeline takes. Pipeline /s "
         "= batch / data: the samples per second the pipeline alone delivers, against which the step's own "
         "rate (Results) tells whether reading binds training. A step recorded once and replayed (cuda_graph = \"step\") "
         "has no forward, backward and update of its own (-): the device's time of the whole recording is in the Device "
         "section.";
}

Table distributed_table(const Report& rep) {
  Table t{{"point", "scheme", "workers", "step (median)", "forward+backward", "communication", "wait",
           "communication share", "sent / step", "effective bandwidth", "parameters across workers"}};
  for (const auto& r : rep.rows) {
    const std::string scheme = fact_text(r, "dist.scheme");
    if (scheme.empty() || r.time.n == 0) continue;
    double comm = 0, wait = 0, fb = 0;
    for (const auto& ph : r.phases) {
      if (ph.phase == "communication") comm = ph.time.median;
      if (ph.phase == "wait") wait = ph.time.median;
      if (ph.phase == "forward" || ph.phase == "backward") fb += ph.time.median;
    }
    const bool consistent = fact_number(r, "dist.consistent") == 1;
    const double sent = fact_number(r, "comm.bytes_sent_per_step"), mismatches = fact_number(r, "dist.hash_mismatches");
    std::string params =
        consistent ? (mismatches == 0
                          ? "identical (" + std::to_string(static_cast<long long>(fact_number(r, "dist.hash_checks"))) +
                                " hash checks)"
                          : "DIFFERED from step " +
                                std::to_string(static_cast<long long>(fact_number(r, "dist.first_mismatch_step"))))
                   : "inconsistent scheme: not expected to agree";
    // The scheme has its own column: the point is named by the rest of what varies.
    t.push_back({rep.names.label(r, {"scheme"}), scheme + (consistent ? "" : " (inconsistent)"),
                 std::to_string(static_cast<long long>(fact_number(r, "dist.workers"))), fmt_time(r.time.median),
                 fb > 0 ? fmt_time(fb) : "-", fmt_time(comm), wait > 0 ? fmt_time(wait) : "-",
                 fmt_sig(100 * (comm + wait) / r.time.median, 3) + "%", fmt_bytes(static_cast<std::int64_t>(sent)),
                 comm > 0 && sent > 0 ? fmt_sig(sent / comm / 1e9, 3) + " GB/s" : "-", params});
  }
  return t;
}

std::string distributed_note() {
  return "Level 3, per point: medians over the timed steps of the phases of the step's slowest rank (each step's breakdown is one rank's own, so the phases add up to at most the step; communication: time inside the scheme's MPI calls; "
         "wait: the barrier before a synchronous exchange). Communication share = (communication + wait) / step. Sent / step: bytes a rank "
         "hands to MPI per step, the mean over ranks, counted by d500's communication layer (collectives by their textbook algorithm, "
         "point-to-point exactly); effective bandwidth = sent / communication. Consistent schemes are checked by a hash of every "
         "worker's parameters; inconsistent ones (ps-async, model averaging, D-PSGD) are labelled and evaluated on the model their "
         "scheme defines.";
}

const PointRow::PhaseTime* device_phase(const PointRow& r) {
  for (const auto& ph : r.phases)
    if (ph.phase == "device" && ph.time.n > 0) return &ph;
  return nullptr;
}

double peak_fraction(const PointRow& r) {
  const PointRow::PhaseTime* d = device_phase(r);
  const double peak = fact_number(r, "device.peak_flops");
  if (!d || !(d->time.median > 0) || !(peak > 0) || !(r.flops > 0)) return std::nan("");
  return r.flops / d->time.median / peak;
}

Table device_table(const Report& rep) {
  Table t{{"point", "host median", "device median (CI)", "device rate", "of peak", "launch and wait",
           "peak device memory", "library's choice"}};
  for (const auto& r : rep.rows) {
    const PointRow::PhaseTime* d = device_phase(r);
    if (!d || r.time.n == 0) continue;
    const stats::Summary& s = d->time;
    const double memory = fact_number(r, "device.peak_memory_bytes");
    std::string choice = fact_text(r, "cudnn.algorithm");
    if (choice.empty()) choice = fact_text(r, "cuda.gemm");
    if (choice.empty()) choice = fact_text(r, "cudnn.choice");
    t.push_back({point_label(rep, r), fmt_time(r.time.median),
                 fmt_time(s.median) + (s.has_ci ? " [" + fmt_time(s.lo) + ", " + fmt_time(s.hi) + "]" : ""),
                 s.median > 0 ? fmt_sig(r.rate * r.time.median / s.median, 4) + " " + r.rate_unit : "-",
                 std::isnan(peak_fraction(r)) ? "-" : fmt_sig(100 * peak_fraction(r), 3) + "%",
                 fmt_sig(100 * (r.time.median - s.median) / r.time.median, 3) + "%",
                 std::isnan(memory) ? "-" : fmt_bytes(static_cast<std::int64_t>(memory)),
                 choice.empty() ? "-" : choice});
  }
  return t;
}

std::string device_note() {
  return "Points timed on a GPU. Host median: the harness's repetition (the library call's launch, its run, and the wait for the "
         "event after it), the slowest rank's, as in Results. Device median: the CUDA events recorded on the kernel's stream around "
         "the call, the slowest rank's per repetition, with its interval; the device rate is the work over it. Launch and wait = "
         "(host - device) / host of the medians. Of peak: the device rate over the GPU's arithmetic peak for the point's "
         "arithmetic (strict float32: the FP32 cores; tf32, bf16, fp16: the tensor cores), SMs x dense FLOP per clock per SM (NVIDIA's "
         "whitepapers) x the device's peak SM clock, an upper bound a power-capped tensor-core kernel does not reach (each point's "
         "device.peak_basis states it; \"-\" where d500's table has no peak for the GPU). Peak device memory: the largest over ranks "
         "of the memory the kernel held (cudaMemGetInfo, device-wide).";
}

Table collectives_table(const Report& rep) {
  Table t{{"point", "ranks", "median", "algorithm bandwidth (CI)", "bus bandwidth (CI)", "bus factor"}};
  for (const auto& r : rep.rows) {
    if (r.bus_factor <= 0 || r.time.n == 0) continue;
    auto bw = [&](double f) {
      return fmt_sig(r.rate * f, 4) + " GB/s" +
             (r.time.has_ci ? " [" + fmt_sig(r.rate_lo * f, 4) + ", " + fmt_sig(r.rate_hi * f, 4) + "]" : "");
    };
    t.push_back({point_label(rep, r), std::to_string(r.ranks), fmt_time(r.time.median), bw(1), bw(r.bus_factor),
                 fmt_sig(r.bus_factor, 3)});
  }
  return t;
}

std::string collectives_note() {
  return "Collectives, as nccl-tests defines their bandwidths: algorithm bandwidth = size / time, the size being the buffer "
         "(allreduce, broadcast), the gathered result (allgather) or each rank's input (reduce_scatter); bus bandwidth = "
         "algorithm bandwidth x the bus factor (allreduce 2(n-1)/n, allgather and reduce_scatter (n-1)/n, broadcast 1, n ranks), "
         "which a link's speed bounds whatever the rank count. Times: medians of the slowest rank, intervals as for every point.";
}

Table overlap_table(const Report& rep) {
  Table t{{"point (overlapped)", "workers", "plain step", "overlapped step", "speedup (CI)",
           "plain communication + wait", "hidden (CI)"}};
  for (const auto& c : rep.overlap) {
    const std::string hidden =
        fmt_sig(100 * c.hidden, 3) + "%" +
        (c.hidden_withheld.empty() ? " [" + fmt_sig(100 * c.hidden_lo, 3) + "%, " + fmt_sig(100 * c.hidden_hi, 3) + "%]"
                                   : " (no interval: " + c.hidden_withheld + ")");
    t.push_back({c.group, std::to_string(c.workers), fmt_time(c.plain_step), fmt_time(c.overlap_step),
                 ratio_text(c.speedup), fmt_time(c.plain_exposed), hidden});
  }
  return t;
}

std::string overlap_note(const Report& rep) {
  return "The bucketed, overlapped allreduce against the plain one on otherwise identical points (the same network, data, "
         "ranks and seed; bucket_bytes aside). Steps are the slowest rank's, medians over the timed steps. Speedup = plain step / "
         "overlapped step (" +
         std::to_string(static_cast<int>(100 * rep.confidence + 0.5)) + "% " +
         std::string(kRatioMethod == stats::BootstrapMethod::BCa ? "BCa" : "percentile") +
         " bootstrap of the ratio of "
         "medians). Hidden = (plain step - overlapped step) / the plain scheme's communication + wait: the share of the "
         "communication the plain scheme exposes that overlapping took off the step (100%: all of it; below 0: the overlapped "
         "step is slower), with a percentile bootstrap over the steps (the plain point's step and communication resampled "
         "together).";
}

Table network_table(const Report& rep) {
  Table t{{"point", "samples/s", "its CI", "GFLOP/s", "forward", "backward", "planned memory", "peak RSS",
           "on the backend"}};
  for (const auto& r : rep.rows) {
    if (r.level != 1 || r.time.n == 0) continue;
    std::string fwd = "-", bwd = "-";
    for (const auto& ph : r.phases) {
      if (ph.phase == "forward") fwd = fmt_time(ph.time.median);
      if (ph.phase == "backward") bwd = fmt_time(ph.time.median);
    }
    std::string mem = "-";
    if (auto it = r.facts.find("memory.planned_bytes");
        it != r.facts.end() && std::holds_alternative<std::int64_t>(it->second))
      mem = fmt_bytes(std::get<std::int64_t>(it->second));
    const std::string where = r.steps ? fmt_sig(100 * (1 - r.fallback_share), 3) + "%" : "own executor";
    // The header has the unit: the cell a bare number and its interval.
    const std::string rate = r.rate_unit == "samples/s" ? fmt_sig(r.rate, 4) : rate_text(r);
    t.push_back({point_label(rep, r), rate, rate_ci_text(r),
                 r.flops > 0 && r.time.median > 0 ? fmt_sig(r.flops / r.time.median / 1e9, 4) : "-", fwd, bwd, mem,
                 r.peak_rss_bytes >= 0 ? fmt_bytes(r.peak_rss_bytes) : "-", where});
  }
  return t;
}

Table steps_table(const PointRow& r) {
  Table t{{"step", "operator", "pass", "computed by", "median", "share", "GFLOP/s"}};
  for (const auto& s : r.top_steps)
    t.push_back({s.name, s.op, s.direction, s.impl, fmt_time(s.median_s), fmt_sig(100 * s.share, 3) + "%",
                 s.gflops > 0 ? fmt_sig(s.gflops, 4) : "-"});
  return t;
}

std::string steps_caption(const Report& rep, const PointRow& r) {
  return point_label(rep, r) + ": the " + std::to_string(r.top_steps.size()) + " costliest of " +
         std::to_string(r.steps) + " steps (their medians add up to " + fmt_time(r.steps_total_s) + " of a " +
         fmt_time(r.time.median) + " step" +
         (r.fallback_share > 0
              ? "; " + fmt_sig(100 * r.fallback_share, 3) + "% ran on the reference, which the backend lacks"
              : "") +
         ")";
}

Table operators_table(const PointRow& r) {
  Table t{{"operator", "pass", "steps", "medians added", "share", "GFLOP/s"}};
  for (const auto& g : r.by_operator)
    t.push_back({g.op, g.direction, std::to_string(g.steps), fmt_time(g.median_s), fmt_sig(100 * g.share, 3) + "%",
                 g.gflops > 0 ? fmt_sig(g.gflops, 4) : "-"});
  return t;
}

std::string operators_caption(const Report& rep, const PointRow& r) {
  return point_label(rep, r) + ": all " + std::to_string(r.steps) +
         " steps by operator and pass (each step's median added, as a " +
         "profiler groups kernels; the shares are of " + fmt_time(r.steps_total_s) + ")";
}

std::string network_note() {
  return "Networks (level 1): samples/s is the batch over the median step time; GFLOP/s counts the graph's work (multiply-adds "
         "twice). A training step's forward and backward phases are the phases of each repetition's slowest rank (one "
         "rank's own breakdown, so they add up to at most the step), summarised as the whole step is. Planned memory is the executor's arena of activations and gradients, placed by lifetime; peak RSS "
         "is the process's. On the backend: the share of the timed steps' medians that the backend computed itself (the rest "
         "ran on the reference, which it lacks); a framework that runs the network on its own executor (libtorch-native) "
         "has no steps of d500's. On d500's executor every node's forward and backward step is timed inside the repetitions "
         "(two clock reads each); a step's median is over the timed repetitions of its slowest rank, and its share is of "
         "the steps' medians added up.";
}

Table quality_table(const Report& rep, const std::string& workload) {
  // The tail quantiles every point has (p90, p99): a column each.
  std::vector<double> tails;
  for (const auto& r : rep.rows)
    if (r.time.n > 0 && tails.empty())
      for (const auto& q : r.tail) tails.push_back(q.p);
  // A rank count that differs between the workload's points is a column (the rank durations read with it).
  std::set<int> counts;
  for (const auto& r : rep.rows)
    if (r.workload == workload && r.time.n > 0) counts.insert(r.ranks);
  const bool ranks = counts.size() > 1;
  Table t{{"point"}};
  if (ranks) t[0].push_back("ranks");
  for (const char* h : {"reps", "mean (t-interval)"}) t[0].push_back(h);
  for (double p : tails) t[0].push_back("p" + fmt_sig(100 * p, 2));
  for (const char* h : {"outliers (low/high)", "enough repetitions", "rank durations", "independent", "machine"})
    t[0].push_back(h);
  for (const auto& r : rep.rows) {
    if (r.workload != workload || r.time.n == 0) continue;
    std::vector<std::string> row{point_label(rep, r)};
    if (ranks) row.push_back(std::to_string(r.ranks));
    for (auto&& c : {std::to_string(r.time.n), mean_text(r)}) row.push_back(c);
    for (std::size_t i = 0; i < tails.size(); ++i) {
      const stats::QuantileSummary* q = i < r.tail.size() ? &r.tail[i] : nullptr;
      row.push_back(
          !q ? "-" : fmt_time(q->estimate) + (q->has_ci ? " [" + fmt_time(q->lo) + ", " + fmt_time(q->hi) + "]" : ""));
    }
    for (auto&& c : {std::to_string(r.outliers.low) + "/" + std::to_string(r.outliers.high), reps_text(r),
                     ranks_text(r), independence_text(r), machine_text(r)})
      row.push_back(c);
    t.push_back(std::move(row));
  }
  return t;
}

std::string quality_note(const Report& rep) {
  std::string least;  // the repetitions each tail quantile's exact interval needs, where some point lacks it
  for (const auto& r : rep.rows)
    if (r.time.n > 0) {
      std::vector<std::string> need;
      for (const auto& q : r.tail)
        need.push_back(std::to_string(q.least_n_for_ci) + (need.empty() ? " repetitions" : "") + " for p" +
                       fmt_sig(100 * q.p, 2));
      least = join(need, ", ");
      break;
    }
  return "Per point, beside its median: the mean with Student's t interval, only where normality is not rejected "
         "(Anderson-Darling) and no value lies beyond Tukey's fences; the tail quantiles with their exact " +
         pct(rep.confidence) + " intervals where there are repetitions enough (from " + least +
         "; a bare value has none); outliers beyond Tukey's fences (1.5 IQR), counted, never removed; whether the "
         "repetitions were enough (the median's interval within 5% of it, else about how many would be; over " +
         std::to_string(kMostAdvisedRepetitions) +
         ", too noisy for repetitions alone: check the load, warm-ups, longer repetitions); whether the "
         "ranks' own durations differ (a paired test by repetition, p < 0.01: a rank that is always slower is a "
         "finding); whether the repetitions are independent draws (a trend, Spearman's rho against the repetition's "
         "index, or a lag-1 autocorrelation r says the "
         "intervals, which assume so, may be too narrow: try more warm-ups, longer repetitions, a quieter machine); "
         "and the machine's state: the load average beyond the job's own ranks x threads and the share of time "
         "stolen by a hypervisor (busy: another CPU's worth of such load, or 2% stolen, so its timings include other "
         "work).";
}

Table validation_table(const Report& rep) {
  Table t{{"point", "validation", "decisive tensor", "its error", "allowed", "a 2% error in one tensor fails in"}};
  for (const auto& r : rep.rows) {
    const double tensors = fact_number(r, "validation.tensors");
    if (!(tensors > 0)) continue;
    const auto decisive = r.facts.find("validation.decisive");
    const std::string* name = decisive == r.facts.end() ? nullptr : std::get_if<std::string>(&decisive->second);
    const auto count = [](double v) { return std::to_string(static_cast<long long>(v)); };
    t.push_back({point_label(rep, r), r.validation_status, name ? *name : "",
                 fmt_sig(fact_number(r, "validation.decisive_error"), 3),
                 fmt_sig(fact_number(r, "validation.decisive_allowed"), 3),
                 count(fact_number(r, "validation.caught_2pct")) + " of " + count(tensors) + " tensors"});
  }
  return t;
}

std::string validation_note() {
  return "Each network's step (its outputs; in training the loss and every weight's gradient) against d500's reference "
         "executor in double precision on the same weights and inputs, each tensor's relative L2 error. A tensor is "
         "allowed its own float32 rounding bound (1e-6 max(10, 4 sqrt(K)) sqrt(D): K the longest sum, D the "
         "longest chain of nodes it is computed through), or more where the step is ill-conditioned (10 x its simulated float32 "
         "rounding spread), where a Relu's input lies within float32's reach of zero (2 x how far the step moves "
         "when such inputs take the Relu's other branch) or its math rounds (tf32, bf16: 3 x its distance under "
         "that rounding, simulated): the decisive tensor is the one nearest its allowance. The last column is what "
         "the judgement can see: in how many tensors the same step with that one tensor 2% larger would have "
         "failed (a batch normalisation's gradients under reduced precision move by more than 2% of themselves, so "
         "an error there is invisible). validation_method in results.csv (validation.method in results.json) has "
         "the whole statement.";
}

Table comparison_table(const Report& rep) {
  Table t{{"shared parameters", "baseline", "backend", "speedup: ratio of medians (CI)", "verdict",
           "ratio of means (Fieller CI)"}};
  for (const auto& c : rep.comparisons)
    t.push_back({c.group, c.baseline, c.other, ratio_text(c.speedup),
                 c.speedup.excludes_one() ? "significant" : "not significant",
                 c.has_mean_ratio ? ratio_text(c.mean_ratio) : "- (normality rejected or n<8)"});
  return t;
}

Table scaling_table(const ScalingSeries& s) {
  // In weak scaling the efficiency is T(base)/T(p) itself: one column, not the same twice.
  const bool weak = s.kind == "weak" && s.bus.empty();
  Table t{{"ranks", "nodes", "reps", "median time", "CI"}};
  if (!weak) t[0].push_back("T(base)/T(p) (CI)");
  t[0].push_back(weak ? "efficiency = T(base)/T(p) (CI)" : "efficiency (CI)");
  for (const auto& p : s.points) {
    std::vector<std::string> row{std::to_string(p.ranks), std::to_string(p.nodes), std::to_string(p.time.n),
                                 fmt_time(p.time.median),
                                 p.time.has_ci ? "[" + fmt_time(p.time.lo) + ", " + fmt_time(p.time.hi) + "]" : "none"};
    if (!weak) row.push_back(ratio_text(p.speedup));
    row.push_back(fmt_sig(p.efficiency, 3) + " [" + fmt_sig(p.efficiency_lo, 3) + ", " + fmt_sig(p.efficiency_hi, 3) +
                  "]");
    t.push_back(std::move(row));
  }
  return t;
}

Table launches_table(const Report& rep) {
  const std::string ci = std::to_string(static_cast<int>(rep.confidence * 100 + .5)) + "%";
  Table t{{"point (all launches)", "launches", "across launches: typical median (" + ci + " t on log launch medians)",
           "between-launch share of variance", "each launch: median [" + ci + " CI within it]"}};
  for (const auto& g : rep.launches) {
    const auto& li = g.interval;
    std::vector<std::string> each;
    for (std::size_t i = 0; i < g.within.size(); ++i)
      each.push_back(
          std::to_string(g.launch_numbers[i]) + ": " + fmt_time(g.within[i].median) +
          (g.within[i].has_ci ? " [" + fmt_time(g.within[i].lo) + ", " + fmt_time(g.within[i].hi) + "]" : ""));
    t.push_back(
        {g.group, std::to_string(li.launches),
         fmt_time(li.estimate) + (li.has_ci ? " [" + fmt_time(li.lo) + ", " + fmt_time(li.hi) + "]" : " (no interval)"),
         fmt_sig(li.between_share * 100, 2) + "%", join(each, "; ")});
  }
  return t;
}

std::vector<std::string> paired_ratios(const LaunchComparison& c, int digits) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < c.launches.size(); ++i)
    out.push_back(std::to_string(c.launches[i]) + ": " + fmt_sig(c.baseline_medians[i] / c.other_medians[i], digits));
  return out;
}

std::string replicates_needed(const LaunchComparison& c) {
  if (c.speedup.excludes_one()) return "";
  const int n = stats::replicates_to_resolve(c.baseline_medians, c.other_medians, c.confidence);
  if (n == 0) return "";
  const std::string what = c.replicate == "seed" ? "seeds" : "launches";
  return n < 0 ? "over 200 " + what : "about " + std::to_string(n) + " " + what;
}

Table launch_comparison_table(const Report& rep) {
  const std::string ci = std::to_string(static_cast<int>(rep.confidence * 100 + .5)) + "%";
  Table t{{"compared", "shared parameters", "baseline", "against", "launches paired",
           "speedup T(baseline)/T(other) across launches (" + ci + " t on log ratios)",
           "verdict, or scaling efficiency (CI)", "each launch: T(baseline)/T(other)"}};
  for (const auto& c : rep.launch_comparisons) {
    const std::string needed = replicates_needed(c);
    const std::string verdict =
        c.varies == "ranks"
            ? fmt_sig(c.speedup.estimate / c.ideal, 3) +
                  (c.speedup.bounded
                       ? " [" + fmt_sig(c.speedup.lo / c.ideal, 3) + ", " + fmt_sig(c.speedup.hi / c.ideal, 3) + "]"
                       : "")
        : c.speedup.excludes_one()
            ? "significant"
            : "not significant" + (needed.empty() ? std::string() : "; " + needed + " would resolve it");
    t.push_back({c.varies, c.group, c.baseline, c.other, std::to_string(c.launches.size()), ratio_text(c.speedup),
                 verdict, join(paired_ratios(c, 4), "; ")});
  }
  return t;
}

std::string launch_comparison_note(const Report&) {
  return "Configurations measured in the same launches (backends; a scaling series' rank counts against its smallest): per "
         "launch the ratio of the two medians (above 1, the other is faster), then Student's t interval (launches - 1 degrees of "
         "freedom) on the logarithms of those ratios, exponentiated: the typical launch's speedup, paired by launch (a campaign's "
         "launches run one after the other, launch i of every point in the same period). A scaling efficiency is that speedup "
         "over the ideal (strong: p / p_base; weak: 1; a collective's weak: f(p_base) / f(p), its bus factor's). Where a "
         "speedup is not significant, about how many launches would resolve it: those whose t interval at the spread "
         "these show would exclude 1 (a plan: the spread is itself estimated from them). These intervals cover the variation between launches; the Backend "
         "comparisons and Scaling sections compare the points of one launch each and cover only the variation within it.";
}

Table launch_scaling_table(const Report& rep) {
  const std::string ci = std::to_string(static_cast<int>(rep.confidence * 100 + .5)) + "%";
  auto iv = [](double v, double lo, double hi) {
    return fmt_sig(v, 3) + " [" + fmt_sig(lo, 3) + ", " + fmt_sig(hi, 3) + "]";
  };
  Table t{{"series", "kind", "rank counts", "launches", "law (why)", "s (" + ci + " t over launches)", "k",
           "predicted efficiency at 2x", "at 4x", "each launch's s"}};
  for (const auto& m : rep.launch_scaling) {
    std::vector<std::string> counts, each;
    for (int r : m.ranks) counts.push_back(std::to_string(r));
    for (std::size_t i = 0; i < m.launches.size(); ++i)
      each.push_back(std::to_string(m.launches[i]) + ": " + fmt_sig(m.launch_s[i], 3));
    t.push_back({m.group, m.kind, join(counts, ", "), std::to_string(m.launches.size()),
                 m.failed.empty() ? law_words(m.kind, m.law) + " (" + m.why + ")" : "no model: " + m.failed,
                 iv(m.s, m.s_lo, m.s_hi), m.law == "USL" ? iv(m.k, m.k_lo, m.k_hi) : "0",
                 std::to_string(m.at2) + " ranks: " + iv(m.eff2, m.eff2_lo, m.eff2_hi),
                 std::to_string(m.at4) + " ranks: " + iv(m.eff4, m.eff4_lo, m.eff4_hi), join(each, "; ")});
  }
  return t;
}

std::string launch_scaling_note(const Report&) {
  return "A scaling series measured in the same launches: the model (capacity C(n) = n / (1 + s (n-1) + k n (n-1)), the "
         "speedup in strong scaling (Amdahl's law its k = 0 case, s the serial share) and n T(base) / T(p) in weak scaling "
         "(s the contention, k the coherency cost), n = ranks / the smallest; least squares on each launch's medians) "
         "fitted to each launch on its own, then "
         "Student's t interval (launches - 1 degrees of freedom) on the launches' s, k and predicted efficiencies. These intervals "
         "cover the variation between launches; the Scaling section's models are each one launch's, their bootstrap intervals "
         "cover only its repetitions. The predictions extrapolate the law's assumption; they are not measurements.";
}

Table tta_table(const Report& rep) {
  const std::string ci = std::to_string(static_cast<int>(rep.confidence * 100 + .5)) + "%";
  Table t{{"configuration", "target", "budget", "eval every", "runs reaching it (" + ci + " CI)",
           "median time to accuracy", ci + " CI"}};
  for (const auto& c : rep.tta)
    t.push_back({c.group, fmt_sig(c.summary.target, 3), fmt_time(c.summary.budget_s),
                 std::to_string(c.eval_interval_steps) + " steps", tta_success_text(c.summary),
                 tta_median_text(c.summary) + (c.cut_off ? " (Kaplan-Meier)" : "") +
                     (c.disagreements.empty() ? "" : " (ranks disagree)"),
                 tta_ci_text(c.summary)});
  return t;
}

void add_target_lines(svg::Plot& p, const std::vector<std::pair<std::string, double>>& targets, double budget_s) {
  // The budget's line spans the curves' accuracies and the targets, not [0, 1]: the curves keep the
  // plot's height; and a budget beyond twice the last evaluation would squeeze them into the axis'
  // first part: the title names it instead.
  double lo = 1, hi = 0, last = 0;
  for (const auto& [name, target] : targets) lo = std::min(lo, target), hi = std::max(hi, target);
  for (const auto& s : p.series)
    for (std::size_t i = 0; i < s.y.size(); ++i)
      lo = std::min(lo, s.y[i]), hi = std::max(hi, s.y[i]), last = std::max(last, s.x[i]);
  const bool drawn = budget_s > 0 && budget_s <= 2 * last;
  if (!drawn && budget_s > 0) p.title += "; budget " + fmt_time(budget_s) + ", off the axis";
  for (const auto& [name, target] : targets)
    p.series.push_back({name, {0, drawn ? budget_s : last}, {target, target}, {}, {}, true, false, true, {}});
  if (drawn) p.series.push_back({"budget", {budget_s, budget_s}, {lo, hi}, {}, {}, true, false, true, {}});
}

std::string tta_svg(const std::vector<const TtaConfig*>& targets, const Report& rep) {
  // The curves are the same runs' for every target: drawn once, each target a line with its mark.
  const TtaConfig& c = *targets.front();
  double highest = 0;
  for (const auto* t : targets) highest = std::max(highest, t->summary.target);
  svg::Plot p;
  std::vector<std::string> said;
  for (const auto* t : targets) said.push_back(fmt_sig(t->summary.target, 3));
  p.title = c.group + (targets.size() > 1 ? ", targets " : ", target ") + join(said, ", ");
  p.xlabel = "training time [s]";
  p.ylabel = "accuracy";
  for (std::size_t i = 0; i < c.ids.size(); ++i)
    for (const auto& r : rep.rows)
      if (r.id == c.ids[i]) {
        svg::Series s;
        const bool reached =
            std::any_of(r.curve.begin(), r.curve.end(), [&](const auto& e) { return e.second >= highest; });
        s.name = "seed " + std::to_string(c.seeds[i]) +
                 (reached                          ? ""
                  : r.outcome != Outcome::Complete ? " (cut off)"
                                                   : " (missed)");  // the highest target: the caption says
        s.dashed = !reached;
        s.markers = false;
        for (auto [t, a] : r.curve) s.x.push_back(t), s.y.push_back(a);
        p.series.push_back(s);
      }
  std::vector<std::pair<std::string, double>> lines;
  for (const auto* t : targets) {
    const TtaSummary& m = t->summary;
    lines.push_back({targets.size() > 1 ? "target " + fmt_sig(m.target, 3) : "target", m.target});
    if (!m.median_defined) continue;
    svg::Mark mark;
    mark.x = m.median;
    mark.y = m.target;
    mark.lo = m.has_ci ? m.lo : mark.x;
    mark.hi = m.has_ci ? (std::isfinite(m.hi) ? m.hi : m.budget_s) : mark.x;
    mark.tip = "target " + fmt_sig(m.target, 3) + ": median time to accuracy " + tta_median_text(m) + " " +
               tta_ci_text(m) + "; reached " + tta_success_text(m);
    p.marks.push_back(mark);
  }
  add_target_lines(p, lines, c.summary.budget_s);
  return svg::render(p);
}

std::string serial_share_text(double s, double lo, double hi) {
  // Every resample's fit clipped to 0 (each ran at or above ideal): "0.00 [0.00, 0.00]" would read
  // as a share known exactly.
  if (s == 0 && lo == 0 && hi == 0) return "0 (at or above ideal)";
  return fmt_sig(s, 3) + " [" + fmt_sig(lo, 3) + ", " + fmt_sig(hi, 3) + "]";
}

std::string law_words(const std::string& kind, const std::string& law) {
  return kind == "weak" && law == "Amdahl" ? "USL (k = 0)" : law;
}

std::string scaling_model_text(const ScalingSeries& s) {
  const auto& m = s.model;
  if (m.law.empty() && !m.failed.empty())
    return " No scaling model: " + m.failed + (m.left_out.empty() ? "" : " (" + m.left_out + ")") + ".";
  if (m.law.empty()) return m.left_out.empty() ? "" : " No scaling model: " + m.left_out + ".";
  auto iv = [](double v, double lo, double hi) {
    return fmt_sig(v, 3) + " [" + fmt_sig(lo, 3) + ", " + fmt_sig(hi, 3) + "]";
  };
  const bool weak = s.kind == "weak";
  const std::string load = "1 + s (n-1)" + std::string(m.law == "USL" ? " + k n (n-1)" : "");
  std::string t =
      " Fitted model (" + law_words(s.kind, m.law) + ", " + m.why + "; bootstrap intervals over the repetitions" +
      (m.exact_medians ? ", the resample medians of points of over " + std::to_string(stats::kDirectBootstrapMax) +
                             " repetitions drawn from their exact distribution"
                       : "") +
      "): capacity C(n) = " +
      (!weak           ? ""
       : s.bus.empty() ? "n T(base) / T(p) = "
                       : "n busbw(p) / busbw(base) = ") +
      "n / (" + load + "), n = ranks / " + std::to_string(s.base_ranks) +
      (!weak ? ""
             : ", so that T(p) = T(base) " + std::string(s.bus.empty() ? "" : "f(p) / f(base) ") + "(" + load + ")") +
      "; s" +
      (weak ? " (contention: the share of the base time that each further multiple of the base ranks adds; weak "
              "scaling shows no serial share)"
            : " (the serial share)") +
      " = " + serial_share_text(m.s, m.s_lo, m.s_hi);
  if (m.law == "USL") t += ", k (coherency) = " + iv(m.k, m.k_lo, m.k_hi);
  if (!m.left_out.empty()) t += " (" + m.left_out + ")";
  t += "; predicted efficiency at " + std::to_string(m.at2) + " ranks " + iv(m.eff2, m.eff2_lo, m.eff2_hi) + ", at " +
       std::to_string(m.at4) + " ranks " + iv(m.eff4, m.eff4_lo, m.eff4_hi) +
       " (extrapolated: the law's assumption, not a measurement).";
  return t;
}

std::string bus_ideal_words(const std::string& collective) {
  const std::string f = collective == "allreduce" ? "2(p-1)/p" : collective == "broadcast" ? "1" : "(p-1)/p";
  return "the bus bandwidth stays (nccl-tests' busbw = size / time x f(p), with f(p) = " + f + " for " + collective +
         ": f(p) x size is what each rank's link carries in the best algorithm, so the time may grow with it)";
}

std::string scaling_caption(const ScalingSeries& s) {
  std::string c = (s.kind == "weak" ? "Weak" : "Strong") + std::string(" scaling of ") + s.group + ". Base: the " +
                  std::to_string(s.base_ranks) + "-rank run of this configuration (not the best serial code), median " +
                  fmt_time(s.base_time) + ". ";
  if (s.kind == "weak" && !s.bus.empty())
    c += "Ideal: " + bus_ideal_words(s.bus) +
         "; efficiency = busbw(p) / busbw(base) = T(base) / T(p) x f(p) / f(base). " +
         (s.note.empty() ? "" : "What grows: " + s.note + ".");
  else if (s.kind == "weak")
    c += "Ideal: constant time; efficiency = T(base) / T(p). " + (s.note.empty() ? "" : "What grows: " + s.note + ".");
  else
    c += "Ideal: T(base) x base / p; efficiency = speedup x base / p.";
  c += scaling_model_text(s);
  return c;
}

std::string scaling_svg(const ScalingSeries& s) {
  svg::Plot p;
  p.title = s.group;
  p.xlabel = "ranks";
  p.ylabel = "time per repetition [s]";
  p.logx = p.logy = true;
  svg::Series m{"median, CI", {}, {}, {}, {}, false, true, true, {}};
  svg::Series ideal{"ideal", {}, {}, {}, {}, true, false, true, {}};
  // The fitted model's time, T(base) x n / C(n), at the measured counts and its two predictions.
  svg::Series model{law_words(s.kind, s.model.law) + " fit", {}, {}, {}, {}, true, false, true, {}};
  auto model_time = [&](double ranks) {
    const double n = ranks / s.base_ranks, load = 1 + s.model.s * (n - 1) + s.model.k * n * (n - 1);
    return s.base_time * s.ideal_load(ranks) * load;
  };
  for (const auto& pt : s.points) {
    const double x = pt.ranks;
    p.xticks.push_back(x);  // the rank counts measured, not 0.8, 0.9, 1.2
    m.x.push_back(x);
    m.y.push_back(pt.time.median);
    m.lo.push_back(pt.time.has_ci ? pt.time.lo : NAN);
    m.hi.push_back(pt.time.has_ci ? pt.time.hi : NAN);
    m.tips.push_back(std::to_string(pt.ranks) + (pt.ranks == 1 ? " rank" : " ranks") + ": median " +
                     fmt_time(pt.time.median) +
                     (pt.time.has_ci ? " [" + fmt_time(pt.time.lo) + ", " + fmt_time(pt.time.hi) + "]" : "") +
                     ", n=" + std::to_string(pt.time.n) + "; speedup " + ratio_text(pt.speedup) + ", efficiency " +
                     fmt_sig(pt.efficiency, 3));
    ideal.x.push_back(x);
    ideal.y.push_back(s.base_time * s.ideal_load(x));
    model.x.push_back(x);
    model.y.push_back(model_time(x));
  }
  p.series = {m, ideal};
  if (!s.model.law.empty()) {
    for (int at : {s.model.at2, s.model.at4}) model.x.push_back(at), model.y.push_back(model_time(at));
    p.series.push_back(model);
  }
  return svg::render(p);
}

Table environment_table(const Report& rep) {
  Table t{{"fact"}};
  std::set<std::string> names;
  for (std::size_t i = 0; i < rep.environments.size(); ++i) {
    t[0].push_back(rep.environments.size() == 1 ? "value" : "environment " + std::to_string(i + 1));
    for (const auto& [k, v] : rep.environments[i].facts) names.insert(k);
  }
  if (rep.environments.empty()) return t;
  std::vector<std::string> files{"files"}, hosts{"hosts"};
  for (const auto& e : rep.environments) {
    files.push_back(std::to_string(e.files));
    hosts.push_back(join(std::vector<std::string>(e.hosts.begin(), e.hosts.end()), " "));
  }
  t.push_back(files);
  t.push_back(hosts);
  for (const auto& n : names) {
    std::vector<std::string> row{n};
    for (const auto& e : rep.environments) {
      auto it = e.facts.find(n);
      std::string v = it == e.facts.end() ? "-" : it->second;
      if (n == "machine.memory_bytes" && v.find_first_not_of("0123456789") == std::string::npos)
        if (const std::int64_t bytes = parse_size(v, 0); bytes >= 0) v = fmt_bytes(bytes);
      row.push_back(v.empty() ? "(empty)" : v);
    }
    t.push_back(row);
  }
  return t;
}

void markdown_table(std::ostringstream& o, const Table& t) {
  for (std::size_t k = 0; k < t.size(); ++k) {
    o << "|";
    for (const auto& c : t[k]) {  // a cell's own bar, escaped, would otherwise end it
      o << " ";
      for (char ch : c) o << (ch == '|' ? "\\|" : std::string(1, ch));
      o << " |";
    }
    o << "\n";
    if (k == 0) {
      o << "|";
      for (std::size_t i = 0; i < t[k].size(); ++i) o << "---|";
      o << "\n";
    }
  }
  o << "\n";
}

void html_table(std::ostringstream& o, const Table& t, const std::vector<std::string>& row_class) {
  o << "<table>\n";
  for (std::size_t k = 0; k < t.size(); ++k) {
    std::string cls =
        k > 0 && k - 1 < row_class.size() && !row_class[k - 1].empty() ? " class=\"" + row_class[k - 1] + "\"" : "";
    o << "<tr" << cls << ">";
    for (const auto& c : t[k]) o << (k == 0 ? "<th>" : "<td>") << html_escape(c) << (k == 0 ? "</th>" : "</td>");
    o << "</tr>\n";
  }
  o << "</table>\n";
}

namespace {

// A failed validation's verdict without its judgement's words: "relative error 0.568 exceeds
// tolerance 0.444; decisive: the gradient of 'bn_bias_0' (report.md has the whole judgement)".
std::string brief_reason(const PointRow& r) {
  if (r.outcome != Outcome::FailedValidation) return r.status_reason;
  const std::size_t open = r.status_reason.find(" (");
  if (open == std::string::npos) return r.status_reason;
  const std::string decisive = fact_text(r, "validation.decisive");
  return r.status_reason.substr(0, open) + (decisive.empty() ? "" : "; decisive: " + decisive) +
         " (report.md has the whole judgement)";
}

}  // namespace

AttentionItems attention_items(const Report& rep) {
  std::vector<std::string> out, brief;
  // The points flagged for one reason: one item, the reason said once ("3 points ran with more
  // ranks than CPUs ...: a (id); b (id); c (id)"; the terminal's without the ids).
  auto flagged = [&](auto is, const std::string& one, const std::string& many) {
    std::vector<std::string> whole, named;
    for (const auto& w : report_workloads(rep))  // a workload's points together
      for (const auto& r : rep.rows)
        if (r.workload == w && is(r)) {
          whole.push_back(point_label(rep, r) + " (" + r.id + ")");
          named.push_back(point_label(rep, r));
        }
    if (whole.size() == 1) {
      out.push_back(whole[0] + ": " + one);
      brief.push_back(out.back());
    } else if (!whole.empty()) {
      const std::string head = std::to_string(whole.size()) + " points " + many + ": ";
      out.push_back(head + join(whole, "; "));
      brief.push_back(head + join(named, "; ") + " (report.md has their ids)");
    }
  };
  flagged([](const PointRow& r) { return r.threads_oversubscribed && !r.oversubscribed; },
          "its ranks x threads exceeded the CPUs of a host (threads oversubscribed): its times measure threads "
          "sharing cores",
          "whose ranks x threads exceeded the CPUs of a host (threads oversubscribed): their times measure threads "
          "sharing cores");
  flagged([](const PointRow& r) { return r.oversubscribed; },
          "ran with more ranks than CPUs on a host (oversubscribed): its times measure core sharing, not the "
          "operation",
          "ran with more ranks than CPUs on a host (oversubscribed): their times measure core sharing, not the "
          "operation");
  // On a device, a node the backend has no kernel for crosses to the host and back inside the
  // timed step (on the host the reference shares the memory: no copy, only another kernel).
  for (const auto& r : rep.rows) {
    const double fallback = fact_number(r, "executor.reference_fallback_steps");
    if (fallback > 0 && !std::isnan(fact_number(r, "device.peak_memory_bytes")))
      out.push_back(point_label(rep, r) + " (" + r.id + "): " + std::to_string(static_cast<long long>(fallback)) +
                    " of its node steps ran on d500's reference through host mirrors (" +
                    fact_text(r, "executor.reference_fallback_ops") +
                    "): each copies its tensors down and back inside the timed step");
  }
  for (const auto& r : rep.rows)
    if (const std::string d = fact_text(r, "ranks_differ"); !d.empty())
      out.push_back(point_label(rep, r) + " (" + r.id +
                    "): its ranks set up differently (the point records rank 0's): " + d);
  // A point that failed alike in every launch it was measured in (a campaign's launches repeat
  // each point) is said once, with its launches and ids; a backend whose every point of a workload
  // failed alike (no GPU on this host, a library built without what it needs) once for all of them.
  struct Failed {
    std::string label, what, brief, backend;  // backend: "workload:backend"; brief: what, as brief_reason says it
    std::vector<std::string> launches, ids;
  };
  std::vector<Failed> failed;
  std::map<std::string, std::size_t> index;
  struct Tally {
    std::size_t points = 0, failed = 0;
    std::set<std::string> reasons;  // what its failed points say
  };
  std::map<std::string, Tally> tally;  // workload:backend -> its points
  for (const auto& r : rep.rows) {
    const std::string backend = r.workload + ":" + r.backend;
    Tally& t = tally[backend];
    ++t.points;
    if (r.outcome == Outcome::Complete && !r.reps_incomplete) continue;
    std::string what = r.status + (r.status_reason.empty() ? "" : ": " + r.status_reason);
    std::string brief = r.status + (r.status_reason.empty() ? "" : ": " + brief_reason(r));
    if (r.reps_incomplete) {
      const std::string lacked =
          "; " + std::to_string(r.reps_incomplete) + " repetitions lacked some rank and were excluded";
      what += lacked;
      brief += lacked;
    }
    t.reasons.insert(what);
    ++t.failed;
    const auto launch = r.params.find("launch");
    const bool launched = launch != r.params.end() && rep.names.varies(r.workload, "launch");
    const std::string label = launched ? rep.names.label(r, {"launch"}) : point_label(rep, r);
    const auto [it, fresh] = index.try_emplace(label + "\x1f" + what, failed.size());
    if (fresh) failed.push_back({label, what, brief, backend, {}, {}});
    if (launched) failed[it->second].launches.push_back(canonical(launch->second));
    failed[it->second].ids.push_back(r.id);
  }
  for (std::size_t k = brief.size(); k < out.size(); ++k) brief.push_back(out[k]);  // the items so far say no failure
  std::set<std::string> said;
  for (const auto& f : failed) {
    const Tally& t = tally[f.backend];
    if (t.points > 1 && t.failed == t.points && t.reasons.size() == 1) {
      if (said.insert(f.backend).second) {
        const std::string every =
            "every " + f.backend + " point (" + std::to_string(t.points) + "; results.csv has their ids): ";
        out.push_back(every + f.what);
        brief.push_back(every + f.brief);
      }
      continue;
    }
    const std::string head = f.label + " (" +
                             (f.launches.size() > 1    ? "launches " + join(f.launches, ", ") + ": " + join(f.ids, ", ")
                              : f.launches.size() == 1 ? "launch " + f.launches[0] + ", " + f.ids[0]
                                                       : join(f.ids, ", ")) +
                             "): ";
    out.push_back(head + f.what);
    brief.push_back(head + f.brief);
  }
  return {out, brief};
}

std::vector<std::string> attention(const Report& rep) { return attention_items(rep).whole; }
std::vector<std::string> attention_brief(const Report& rep) { return attention_items(rep).brief; }

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
  return "{\"estimate\": " + jn(r.estimate) + ", \"lo\": " + (r.bounded ? jn(r.lo) : "null") +
         ", \"hi\": " + (r.bounded ? jn(r.hi) : "null") +
         ", \"significant\": " + (r.excludes_one() ? "true" : "false") + ", \"method\": " + js(r.method) +
         (r.withheld.empty() ? "" : ", \"withheld\": " + js(r.withheld)) + "}";
}

}  // namespace d500

namespace d500 {

std::string pct(double confidence) { return std::to_string(static_cast<int>(confidence * 100 + .5)) + "%"; }

std::string ratio_method_words() {
  return kRatioMethod == stats::BootstrapMethod::BCa ? "seeded BCa bootstrap" : "seeded percentile bootstrap";
}

std::string launch_model_words(const LaunchScalingModel& m) {
  if (!m.failed.empty()) return "no model: " + m.failed;
  return law_words(m.kind, m.law) + ", s " + fmt_sig(m.s, 3) + " [" + fmt_sig(m.s_lo, 3) + ", " + fmt_sig(m.s_hi, 3) +
         "]" +
         (m.law == "USL" ? ", k " + fmt_sig(m.k, 3) + " [" + fmt_sig(m.k_lo, 3) + ", " + fmt_sig(m.k_hi, 3) + "]"
                         : std::string()) +
         ", predicted efficiency at " + std::to_string(m.at2) + " ranks " + fmt_sig(m.eff2, 3) + " [" +
         fmt_sig(m.eff2_lo, 3) + ", " + fmt_sig(m.eff2_hi, 3) + "]";
}

}  // namespace d500
