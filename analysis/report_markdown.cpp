// The markdown reporter: report.md, the whole report in Markdown.
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
  o << "# d500 report: " << rep.campaign << "\n\n- campaign hash: `" << rep.campaign_hash << "`\n- d500: " << rep.d500_version
    << "\n- files read: " << rep.files.size() << "\n- bootstrap seed: " << rep.seed << "\n\n## Method\n\n"
    << method_statement(rep) << "\n\n## Results\n\n";
  markdown_table(o, results_table(rep));
  if (network_table(rep).size() > 1) {
    o << "## Networks\n\n" << network_note() << "\n\n";
    markdown_table(o, network_table(rep));
    for (const auto& r : rep.rows)
      if (!r.top_steps.empty()) {
        o << steps_caption(r) << "\n\n";
        markdown_table(o, steps_table(r));
        o << operators_caption(r) << "\n\n";
        markdown_table(o, operators_table(r));
      }
  }
  if (device_table(rep).size() > 1) {
    o << "## On the device\n\n" << device_note() << "\n\n";
    markdown_table(o, device_table(rep));
  }
  if (collectives_table(rep).size() > 1) {
    o << "## Collectives\n\n" << collectives_note() << "\n\n";
    markdown_table(o, collectives_table(rep));
  }
  if (distributed_table(rep).size() > 1) {
    o << "## Distributed training\n\n" << distributed_note() << "\n\n";
    markdown_table(o, distributed_table(rep));
    if (!rep.overlap.empty()) {
      o << "### Overlap\n\n" << overlap_note(rep) << "\n\n";
      markdown_table(o, overlap_table(rep));
    }
  }
  if (environment_table(rep).size() > 1) {
    o << "## Environment\n\nAs rank 0 of each job recorded it (`/env` of the results files; per-rank differences are not "
         "recorded). A governor other than `performance`, or one that is unreadable, may let clocks vary between repetitions.\n\n";
    markdown_table(o, environment_table(rep));
  }
  o << "## Measurement quality\n\n";
  markdown_table(o, quality_table(rep));
  if (!rep.launches.empty()) {
    o << "## Across launches\n\nPoints measured in separate launches (jobs): the primary interval covers the variation "
         "between launches (two-stage: launch medians, then a t interval on their logarithms); each launch's own interval "
         "covers only the variation within it.\n\n";
    markdown_table(o, launches_table(rep));
    if (!rep.launch_comparisons.empty()) {
      o << "### Comparisons across launches\n\n" << launch_comparison_note(rep) << "\n\n";
      markdown_table(o, launch_comparison_table(rep));
    }
    if (!rep.launch_scaling.empty()) {
      o << "### Scaling models across launches\n\n" << launch_scaling_note(rep) << "\n\n";
      markdown_table(o, launch_scaling_table(rep));
    }
  }
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

}  // namespace

std::unique_ptr<Reporter> markdown_reporter() { return make_reporter("markdown", "report.md", render); }

}  // namespace d500
