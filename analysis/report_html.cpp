// The html reporter: report.html, the whole report with its plots (inline SVG).
#include <cmath>
#include <set>
#include <sstream>

#include "common/text.hpp"
#include "format.hpp"
#include "reporters.hpp"

namespace d500 {

namespace {

std::string render(const Report& rep) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>d500 report: "
    << html_escape(rep.campaign) << "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:90em}"
    << "table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}"
    << "td:first-child,th:first-child{text-align:left;font-family:monospace}"
    << ".bad{background:#fdd}.warn{background:#ffd}figure{display:inline-block;margin:0 1em 1em 0}</style></head><body>\n"
    << "<h1>d500 report: " << html_escape(rep.campaign) << "</h1>\n<p>campaign hash <code>" << html_escape(rep.campaign_hash)
    << "</code>; d500 " << html_escape(rep.d500_version) << "; " << rep.files.size() << " files read; bootstrap seed "
    << rep.seed << "</p>\n<h2>Method</h2>\n<p>" << html_escape(method_statement(rep)) << "</p>\n<h2>Results</h2>\n";
  std::vector<std::string> cls;
  for (const auto& r : rep.rows) {
    if (r.outcome != Outcome::Complete) cls.push_back("bad");
    else if (!r.time.has_ci || !r.advice.enough) cls.push_back("warn");
    else cls.push_back("");
  }
  html_table(o, results_table(rep), cls);
  for (const auto& plot : rate_svgs(rep)) o << "<figure>" << plot << "</figure>\n";
  if (device_table(rep).size() > 1) {
    o << "<h2>On the device</h2>\n<p>" << html_escape(device_note()) << "</p>\n";
    html_table(o, device_table(rep));
  }
  if (collectives_table(rep).size() > 1) {
    o << "<h2>Collectives</h2>\n<p>" << html_escape(collectives_note()) << "</p>\n";
    html_table(o, collectives_table(rep));
  }
  if (distributed_table(rep).size() > 1) {
    o << "<h2>Distributed training</h2>\n<p>" << html_escape(distributed_note()) << "</p>\n";
    html_table(o, distributed_table(rep));
    if (!rep.overlap.empty()) {
      o << "<h3>Overlap</h3>\n<p>" << html_escape(overlap_note(rep)) << "</p>\n";
      html_table(o, overlap_table(rep));
    }
  }
  if (network_table(rep).size() > 1) {
    o << "<h2>Networks</h2>\n<p>" << html_escape(network_note()) << "</p>\n";
    html_table(o, network_table(rep));
    for (const auto& r : rep.rows)
      if (!r.top_steps.empty()) {
        o << "<p>" << html_escape(steps_caption(r)) << "</p>\n";
        html_table(o, steps_table(r));
        o << "<p>" << html_escape(operators_caption(r)) << "</p>\n";
        html_table(o, operators_table(r));
      }
  }
  if (environment_table(rep).size() > 1) {
    o << "<h2>Environment</h2>\n<p>As rank 0 of each job recorded it (<code>/env</code> of the results files).</p>\n";
    html_table(o, environment_table(rep));
  }
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
  if (!rep.launches.empty()) {
    o << "<h2>Across launches</h2>\n<p>The primary interval covers the variation between launches (two-stage: launch medians, "
         "then a t interval on their logarithms); each launch's own interval covers only the variation within it.</p>\n";
    html_table(o, launches_table(rep));
    if (!rep.launch_comparisons.empty()) {
      o << "<h3>Comparisons across launches</h3>\n<p>" << html_escape(launch_comparison_note(rep)) << "</p>\n";
      html_table(o, launch_comparison_table(rep));
    }
    if (!rep.launch_scaling.empty()) {
      o << "<h3>Scaling models across launches</h3>\n<p>" << html_escape(launch_scaling_note(rep)) << "</p>\n";
      html_table(o, launch_scaling_table(rep));
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

}  // namespace

std::unique_ptr<Reporter> html_reporter() { return make_reporter("html", "report.html", render); }

}  // namespace d500
