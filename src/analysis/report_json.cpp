// The json reporter: results.json, points, comparisons, scaling series and time to accuracy.
#include <cmath>
#include <set>
#include <sstream>
#include <type_traits>

#include "analysis/document.hpp"
#include "analysis/format.hpp"
#include "analysis/reporters.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

// The environments the files were measured in.
void write_environments(std::ostringstream& o, const Report& rep) {
  for (std::size_t i = 0; i < rep.environments.size(); ++i) {
    const Environment& e = rep.environments[i];
    o << (i ? ", " : "") << "{\"files\": " << e.files << ", \"hosts\": [";
    std::size_t k = 0;
    for (const auto& h : e.hosts) o << (k++ ? ", " : "") << js(h);
    o << "], \"facts\": {";
    k = 0;
    for (const auto& [n, v] : e.facts) o << (k++ ? ", " : "") << js(n) << ": " << js(v);
    o << "}}";
  }
}

// Every point: its figures, its validation, on a GPU its device's, on a network its phases, facts and steps.
void write_points(std::ostringstream& o, const Report& rep) {
  for (std::size_t i = 0; i < rep.rows.size(); ++i) {
    const auto& r = rep.rows[i];
    // The parameters as typed fields, so that pd.json_normalize(results["points"]) gives each its
    // column (params.n, params.backend, ...).
    std::string params;
    for (const auto& [k, v] : r.params) {
      if (is_unset(v)) continue;
      params += (params.empty() ? "" : ", ") + js(k) + ": " +
                (std::holds_alternative<std::string>(v) ? js(std::get<std::string>(v))
                 : std::holds_alternative<double>(v)    ? jn(std::get<double>(v))
                                                        : canonical(v));
    }
    o << (i ? "," : "") << "\n    {\"id\": " << js(r.id) << ", \"label\": " << js(rep.names.label(r))
      << ", \"params\": {" << params << "}, \"canonical\": " << js(r.canonical) << ", \"level\": " << r.level
      << ", \"workload\": " << js(r.workload) << ", \"backend\": " << js(r.backend) << ", \"job\": " << js(r.job_id)
      << ", \"status\": " << js(r.status) << ", \"status_reason\": " << js(r.status_reason)
      << ", \"ranks\": " << r.ranks << ", \"oversubscribed\": " << (r.oversubscribed ? "true" : "false")
      << ", \"n\": " << r.time.n << ", \"warmups_excluded\": " << r.warmups_excluded
      << ", \"median_s\": " << (r.time.n ? jn(r.time.median) : "null")
      << ", \"ci\": " << (r.time.has_ci ? "[" + jn(r.time.lo) + ", " + jn(r.time.hi) + "]" : "null")
      << ", \"ci_coverage\": " << (r.time.has_ci ? jn(r.time.coverage) : "null") << ", \"mean\": "
      << (r.mean_trusted()
              ? "{\"mean_s\": " + jn(r.mean.mean) + ", \"ci\": [" + jn(r.mean.lo) + ", " + jn(r.mean.hi) + "]}"
              : "null")
      << ", \"normality_ad_p\": " << (r.normality.applicable ? jn(r.normality.p_value) : "null")
      << ", \"outliers\": {\"low\": " << r.outliers.low << ", \"high\": " << r.outliers.high << "}"
      << ", \"enough_repetitions\": " << (r.advice.enough ? "true" : "false")
      << ", \"repetitions_needed\": " << (r.advice.capped ? std::string("null") : std::to_string(r.advice.needed))
      << ", \"repetitions_needed_beyond_cap\": " << (r.advice.capped ? "true" : "false")
      << ", \"ranks_p\": " << (r.ranks_test.applicable ? jn(r.ranks_test.p_value) : "null")
      << ", \"ranks_test\": " << (r.ranks_test.applicable ? js(r.ranks_test.method) : "null") << ", \"independence\": "
      << (r.independence.applicable ? "{\"trend_rho\": " + jn(r.independence.trend_rho) + ", \"trend_p\": " +
                                          jn(r.independence.trend_p) + ", \"lag1\": " + jn(r.independence.lag1) + "}"
                                    : std::string("null"))
      << ", \"tail\": [";
    for (std::size_t k = 0; k < r.tail.size(); ++k) {
      const auto& q = r.tail[k];
      o << (k ? ", " : "") << "{\"p\": " << jn(q.p) << ", \"estimate_s\": " << jn(q.estimate)
        << ", \"ci\": " << (q.has_ci ? "[" + jn(q.lo) + ", " + jn(q.hi) + "]" : std::string("null"))
        << ", \"ci_coverage\": " << (q.has_ci ? jn(q.coverage) : std::string("null"))
        << ", \"least_n_for_ci\": " << q.least_n_for_ci << "}";
    }
    o << "], \"rank_medians_s\": [";
    for (std::size_t k = 0; k < r.rank_medians.size(); ++k) o << (k ? ", " : "") << jn(r.rank_medians[k]);
    o << "], \"rate\": " << (r.time.n ? jn(r.rate) : "null")
      << ", \"rate_is\": \"per rank\", \"rate_aggregate\": " << (r.time.n ? jn(r.rate_aggregate) : "null")
      << ", \"rate_unit\": " << js(r.rate_unit) << ", \"bus_bandwidth\": "
      << (r.bus_factor > 0 && r.time.n
              ? "[" + jn(r.rate * r.bus_factor) + ", " + (r.time.has_ci ? jn(r.rate_lo * r.bus_factor) : "null") +
                    ", " + (r.time.has_ci ? jn(r.rate_hi * r.bus_factor) : "null") + "]"
              : std::string("null"))
      << ", \"validation\": {\"status\": " << js(r.validation_status)
      << ", \"max_rel_error\": " << (r.validation_status == "not-run" ? "null" : jn(r.validation_max_rel_error))
      << ", \"tolerance\": " << (r.validation_status == "not-run" ? "null" : jn(r.validation_tolerance))
      << ", \"method\": " << (r.validation_method.empty() ? "null" : js(r.validation_method)) << "}"
      << ", \"peak_rss_bytes\": " << (r.peak_rss_bytes >= 0 ? std::to_string(r.peak_rss_bytes) : "null")
      << ", \"memory_estimate_bytes\": "
      << (r.memory_estimate_bytes >= 0 ? std::to_string(r.memory_estimate_bytes) : "null")
      << ", \"threads_oversubscribed\": " << (r.threads_oversubscribed ? "true" : "false");
    if (const PointRow::PhaseTime* d = device_phase(r)) {  // timed on a GPU: the CUDA events' own figures
      auto mem = r.facts.find("device.peak_memory_bytes");
      o << ", \"device\": {\"median_s\": " << jn(d->time.median)
        << ", \"ci\": " << (d->time.has_ci ? "[" + jn(d->time.lo) + ", " + jn(d->time.hi) + "]" : "null")
        << ", \"peak_memory_bytes\": " << (mem == r.facts.end() ? std::string("null") : canonical(mem->second))
        << ", \"peak_fraction\": " << (std::isnan(peak_fraction(r)) ? std::string("null") : jn(peak_fraction(r)))
        << ", \"peak_basis\": " << js(str_param_or(r.facts, "device.peak_basis", "")) << "}";
    }
    if (r.level >= 1) {  // networks and training steps: their phases (level 3: communication, wait)
      o << ", \"flops_per_repetition\": " << jn(r.flops) << ", \"samples_per_repetition\": " << r.work_items
        << ", \"phases\": {";
      for (std::size_t k = 0; k < r.phases.size(); ++k)
        o << (k ? ", " : "") << js(r.phases[k].phase) << ": {\"median_s\": " << jn(r.phases[k].time.median)
          << ", \"ci\": "
          << (r.phases[k].time.has_ci ? "[" + jn(r.phases[k].time.lo) + ", " + jn(r.phases[k].time.hi) + "]" : "null")
          << "}";
      o << "}, \"facts\": {";
      std::size_t k = 0;
      for (const auto& [name, v] : r.facts)
        o << (k++ ? ", " : "") << js(name) << ": "
          << (std::holds_alternative<std::string>(v) ? js(std::get<std::string>(v)) : canonical(v));
      o << "}, \"steps\": " << r.steps << ", \"steps_total_median_s\": " << jn(r.steps_total_s)
        << ", \"reference_fallback_share\": " << jn(r.fallback_share) << ", \"top_steps\": [";
      for (std::size_t q = 0; q < r.top_steps.size(); ++q) {
        const auto& st = r.top_steps[q];
        o << (q ? ", " : "") << "{\"name\": " << js(st.name) << ", \"op\": " << js(st.op)
          << ", \"direction\": " << js(st.direction) << ", \"impl\": " << js(st.impl)
          << ", \"median_s\": " << jn(st.median_s) << ", \"share\": " << jn(st.share) << "}";
      }
      o << "], \"by_operator\": [";
      for (std::size_t q = 0; q < r.by_operator.size(); ++q) {
        const auto& g = r.by_operator[q];
        o << (q ? ", " : "") << "{\"op\": " << js(g.op) << ", \"direction\": " << js(g.direction)
          << ", \"steps\": " << g.steps << ", \"median_s\": " << jn(g.median_s) << ", \"share\": " << jn(g.share)
          << ", \"gflops\": " << jn(g.gflops) << "}";
      }
      o << "]";
    }
    o << "}";
  }
}

// Backends compared.
void write_comparisons(std::ostringstream& o, const Report& rep) {
  for (std::size_t i = 0; i < rep.comparisons.size(); ++i) {
    const auto& c = rep.comparisons[i];
    o << (i ? "," : "") << "\n    {\"group\": " << js(c.group) << ", \"baseline\": " << js(c.baseline)
      << ", \"backend\": " << js(c.other) << ", \"baseline_id\": " << js(c.baseline_id)
      << ", \"backend_id\": " << js(c.other_id) << ", \"speedup\": " << jratio(c.speedup)
      << ", \"mean_ratio\": " << (c.has_mean_ratio ? jratio(c.mean_ratio) : "null") << "}";
  }
}

// Scaling series and their models.
void write_scaling(std::ostringstream& o, const Report& rep) {
  for (std::size_t i = 0; i < rep.scaling.size(); ++i) {
    const auto& s = rep.scaling[i];
    o << (i ? "," : "") << "\n    {\"group\": " << js(s.group) << ", \"kind\": " << js(s.kind)
      << ", \"note\": " << js(s.note) << ", \"efficiency\": "
      << js(s.kind != "weak" ? "speedup x base / p"
            : s.bus.empty()  ? "T(base) / T(p)"
                             : "busbw(p) / busbw(base): " + s.bus + "'s bus factor")
      << ", \"base_ranks\": " << s.base_ranks << ", \"base_median_s\": " << jn(s.base_time);
    if (!s.model.law.empty()) {
      const auto& m = s.model;
      o << ", \"model\": {\"law\": " << js(m.law) << ", \"why\": " << js(m.why) << ", \"left_out\": " << js(m.left_out)
        << ", \"exact_medians\": " << (m.exact_medians ? "true" : "false") << ", \"s\": [" << jn(m.s) << ", "
        << jn(m.s_lo) << ", " << jn(m.s_hi) << "], \"k\": [" << jn(m.k) << ", " << jn(m.k_lo) << ", " << jn(m.k_hi)
        << "], \"predicted_efficiency\": {\"" << m.at2 << "\": [" << jn(m.eff2) << ", " << jn(m.eff2_lo) << ", "
        << jn(m.eff2_hi) << "], \"" << m.at4 << "\": [" << jn(m.eff4) << ", " << jn(m.eff4_lo) << ", " << jn(m.eff4_hi)
        << "]}}";
    }
    o << ", \"points\": [";
    for (std::size_t k = 0; k < s.points.size(); ++k) {
      const auto& p = s.points[k];
      o << (k ? ", " : "") << "{\"id\": " << js(p.id) << ", \"ranks\": " << p.ranks
        << ", \"median_s\": " << jn(p.time.median) << ", \"speedup\": " << jratio(p.speedup) << ", \"efficiency\": ["
        << jn(p.efficiency) << ", " << jn(p.efficiency_lo) << ", " << jn(p.efficiency_hi) << "]}";
    }
    o << "]}";
  }
}

// Level 3's overlapped allreduce against the plain one.
void write_overlap(std::ostringstream& o, const Report& rep) {
  for (std::size_t i = 0; i < rep.overlap.size(); ++i) {
    const auto& c = rep.overlap[i];
    o << (i ? "," : "") << "\n    {\"group\": " << js(c.group) << ", \"plain_id\": " << js(c.plain_id)
      << ", \"overlap_id\": " << js(c.overlap_id) << ", \"workers\": " << c.workers
      << ", \"plain_step_s\": " << jn(c.plain_step) << ", \"overlap_step_s\": " << jn(c.overlap_step)
      << ", \"plain_exposed_s\": " << jn(c.plain_exposed) << ", \"speedup\": " << jratio(c.speedup) << ", \"hidden\": ["
      << jn(c.hidden) << ", "
      << (c.hidden_withheld.empty() ? jn(c.hidden_lo) + ", " + jn(c.hidden_hi) : std::string("null, null")) << "]}";
  }
}

// Replicated launches of one point.
void write_launches(std::ostringstream& o, const Report& rep) {
  for (std::size_t i = 0; i < rep.launches.size(); ++i) {
    const auto& g = rep.launches[i];
    const auto& li = g.interval;
    o << (i ? "," : "") << "\n    {\"group\": " << js(g.group) << ", \"launches\": " << li.launches
      << ", \"point_ids\": [";
    for (std::size_t k = 0; k < g.ids.size(); ++k) o << (k ? ", " : "") << js(g.ids[k]);
    o << "], \"launch_medians_s\": [";
    for (std::size_t k = 0; k < li.medians.size(); ++k) o << (k ? ", " : "") << jn(li.medians[k]);
    o << "], \"estimate_s\": " << jn(li.estimate)
      << ", \"ci_s\": " << (li.has_ci ? "[" + jn(li.lo) + ", " + jn(li.hi) + "]" : std::string("null"))
      << ", \"between_share\": " << jn(li.between_share) << ", \"between_sd_log\": " << jn(li.between_sd_log)
      << ", \"within_sd_log\": " << jn(li.within_sd_log)
      << ", \"method\": \"two-stage: launch medians; Student t on their logs (k-1 df); one-way random-effects ANOVA share\"}";
  }
}

// Backends compared across their launches, or their seeds (`replicate` says which; `launches`
// holds the launch or seed numbers).
void write_launch_comparisons(std::ostringstream& o, const std::vector<LaunchComparison>& all) {
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& c = all[i];
    o << (i ? "," : "") << "\n    {\"varies\": " << js(c.varies) << ", \"replicate\": " << js(c.replicate)
      << ", \"group\": " << js(c.group) << ", \"baseline\": " << js(c.baseline) << ", \"other\": " << js(c.other)
      << ", \"ideal_speedup\": " << (c.varies == "ranks" ? jn(c.ideal) : std::string("null")) << ", \"launches\": [";
    for (std::size_t k = 0; k < c.launches.size(); ++k) o << (k ? ", " : "") << c.launches[k];
    o << "], \"baseline_medians_s\": [";
    for (std::size_t k = 0; k < c.baseline_medians.size(); ++k) o << (k ? ", " : "") << jn(c.baseline_medians[k]);
    o << "], \"other_medians_s\": [";
    for (std::size_t k = 0; k < c.other_medians.size(); ++k) o << (k ? ", " : "") << jn(c.other_medians[k]);
    // Where the interval holds 1: how many pairs at this spread would exclude it (0: nothing to
    // resolve; -1: over 200).
    o << "], \"speedup\": " << jratio(c.speedup) << ", \"replicates_to_resolve\": "
      << (c.varies != "ranks" && !c.speedup.excludes_one()
              ? std::to_string(stats::replicates_to_resolve(c.baseline_medians, c.other_medians, c.confidence))
              : std::string("null"))
      << "}";
  }
}

// Scaling fitted per launch.
void write_launch_scaling(std::ostringstream& o, const Report& rep) {
  for (std::size_t i = 0; i < rep.launch_scaling.size(); ++i) {
    const auto& m = rep.launch_scaling[i];
    auto list = [&](const auto& v) {
      std::string s = "[";
      for (std::size_t k = 0; k < v.size(); ++k) {
        if constexpr (std::is_integral_v<std::decay_t<decltype(v[k])>>)
          s += (k ? ", " : "") + std::to_string(v[k]);
        else
          s += (k ? ", " : "") + jn(v[k]);
      }
      return s + "]";
    };
    auto iv = [&](double est, double lo, double hi) {
      return "{\"estimate\": " + jn(est) + ", \"lo\": " + jn(lo) + ", \"hi\": " + jn(hi) + "}";
    };
    o << (i ? "," : "") << "\n    {\"group\": " << js(m.group) << ", \"kind\": " << js(m.kind)
      << ", \"base_ranks\": " << m.base_ranks << ", \"ranks\": " << list(m.ranks)
      << ", \"launches\": " << list(m.launches) << ", \"law\": " << js(m.law) << ", \"why\": " << js(m.why)
      << ", \"launch_s\": " << list(m.launch_s) << ", \"launch_k\": " << list(m.launch_k)
      << ", \"s\": " << iv(m.s, m.s_lo, m.s_hi) << ", \"k\": " << iv(m.k, m.k_lo, m.k_hi)
      << ", \"efficiency_at_2x\": {\"ranks\": " << m.at2 << ", \"interval\": " << iv(m.eff2, m.eff2_lo, m.eff2_hi)
      << "}, \"efficiency_at_4x\": {\"ranks\": " << m.at4 << ", \"interval\": " << iv(m.eff4, m.eff4_lo, m.eff4_hi)
      << "}, \"confidence\": " << jn(m.confidence)
      << ", \"method\": \"least squares of the law on each launch's medians; Student t over the launches' fits (k-1 df)\"}";
  }
}

// Time to accuracy per configuration.
void write_time_to_accuracy(std::ostringstream& o, const Report& rep) {
  for (std::size_t i = 0; i < rep.tta.size(); ++i) {
    const auto& c = rep.tta[i];
    const auto& s = c.summary;
    o << (i ? "," : "") << "\n    {\"group\": " << js(c.group) << ", \"target\": " << jn(s.target)
      << ", \"budget_s\": " << jn(s.budget_s) << ", \"eval_interval_steps\": " << c.eval_interval_steps
      << ", \"runs\": " << s.runs << ", \"reached\": " << s.reached << ", \"method\": " << js(s.method)
      << ", \"cut_off_s\": [";
    for (std::size_t k = 0; k < s.cut_off.size(); ++k) o << (k ? ", " : "") << jn(s.cut_off[k]);
    o << "], \"ranks_disagree\": [";
    for (std::size_t k = 0; k < c.disagreements.size(); ++k) o << (k ? ", " : "") << js(c.disagreements[k]);
    o << "]"
      << ", \"success_rate\": {\"estimate\": " << jn(s.success.estimate) << ", \"lo\": " << jn(s.success.lo)
      << ", \"hi\": " << jn(s.success.hi)
      << ", \"method\": \"Clopper-Pearson\"}, \"median_s\": " << (s.median_defined ? jn(s.median) : "null")
      << ", \"ci_s\": "
      << (s.beyond_budget ? std::string("[\"> budget\", \"> budget\"]")
          : s.has_ci      ? "[" + jn(s.lo) + ", " + (s.hi_censored() ? std::string("\"> budget\"") : jn(s.hi)) + "]"
                          : "null")
      << ", \"tta_s\": [";
    for (std::size_t k = 0; k < s.tta.size(); ++k)
      o << (k ? ", " : "") << (std::isfinite(s.tta[k]) ? jn(s.tta[k]) : "\"> budget\"");
    o << "]}";
  }
}

// The report's sections as the other formats show them (document.hpp): titles, notes, tables
// (rows of strings, the header first), lists and the figures' file names in figures/.
void write_sections(std::ostringstream& o, const Report& rep, const Document& doc) {
  for (std::size_t i = 0; i < doc.sections.size(); ++i) {
    const Section& sec = doc.sections[i];
    o << (i ? "," : "") << "\n    {\"title\": " << js(sec.title) << ", \"depth\": " << sec.depth << ", \"blocks\": [";
    for (std::size_t k = 0; k < sec.blocks.size(); ++k) {
      const Block& b = sec.blocks[k];
      o << (k ? ", " : "");
      switch (b.kind) {
        case Block::Kind::Text: o << "{\"text\": " << js(b.text) << "}"; break;
        case Block::Kind::Figure:
          o << "{\"figure\": " << js(figures_dir(rep.confidence) + "/" + b.name + ".svg")
            << ", \"caption\": " << js(b.text) << "}";
          break;
        case Block::Kind::List:
          o << "{\"list\": [";
          for (std::size_t j = 0; j < b.items.size(); ++j) o << (j ? ", " : "") << js(b.items[j]);
          o << "]}";
          break;
        case Block::Kind::Table:
          o << "{\"table\": [";
          for (std::size_t j = 0; j < b.table.table.size(); ++j) {
            o << (j ? ", " : "") << "[";
            for (std::size_t c = 0; c < b.table.table[j].size(); ++c) o << (c ? ", " : "") << js(b.table.table[j][c]);
            o << "]";
          }
          o << "]}";
          break;
      }
    }
    o << "]}";
  }
}

std::string render_json(const Report& rep, const Document& doc) {
  std::ostringstream o;
  o << "{\n  \"campaign\": " << js(rep.campaign) << ",\n  \"campaign_hash\": " << js(rep.campaign_hash)
    << ",\n  \"d500\": " << js(rep.d500_version) << ",\n  \"jobs_started\": [" << js(rep.first_started) << ", "
    << js(rep.last_started) << "],\n  \"confidence\": " << jn(rep.confidence) << ",\n  \"bootstrap_seed\": " << rep.seed
    << ",\n  \"method\": " << js(method_statement(rep)) << ",\n  \"environments\": [";
  write_environments(o, rep);
  o << "],\n  \"points\": [";
  write_points(o, rep);
  o << "\n  ],\n  \"comparisons\": [";
  write_comparisons(o, rep);
  o << "\n  ],\n  \"scaling\": [";
  write_scaling(o, rep);
  o << "\n  ],\n  \"overlap\": [";
  write_overlap(o, rep);
  o << "\n  ],\n  \"launches\": [";
  write_launches(o, rep);
  o << "\n  ],\n  \"launch_comparisons\": [";
  write_launch_comparisons(o, rep.launch_comparisons);
  o << "\n  ],\n  \"seed_comparisons\": [";
  write_launch_comparisons(o, rep.seed_comparisons);
  o << "\n  ],\n  \"launch_scaling\": [";
  write_launch_scaling(o, rep);
  o << "\n  ],\n  \"time_to_accuracy\": [";
  write_time_to_accuracy(o, rep);
  o << "\n  ],\n  \"unreadable\": [";
  for (std::size_t i = 0; i < rep.unreadable.size(); ++i) o << (i ? ", " : "") << js(rep.unreadable[i]);
  o << "],\n  \"sections\": [";
  write_sections(o, rep, doc);
  o << "\n  ]\n}\n";
  return o.str();
}

}  // namespace

std::unique_ptr<Reporter> json_reporter() { return make_reporter("json", "results.json", render_json); }

}  // namespace d500
