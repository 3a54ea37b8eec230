// The console reporter: the results table, comparisons, scaling and time to accuracy as plain text for the terminal (printed by `d500 report`, written nowhere).
#include <cmath>
#include <set>
#include <sstream>

#include "common/text.hpp"
#include "format.hpp"
#include "reporters.hpp"

namespace d500 {

namespace {

// A table in aligned columns, its header underlined.
void text_table(std::ostringstream& o, const Table& t) {
  std::vector<std::size_t> w(t.front().size(), 0);
  for (const auto& row : t)
    for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  for (std::size_t k = 0; k < t.size(); ++k) {
    for (std::size_t i = 0; i < t[k].size(); ++i)
      o << t[k][i] << std::string(w[i] - t[k][i].size() + (i + 1 < t[k].size() ? 2 : 0), ' ');
    o << "\n";
    if (k == 0) {
      for (std::size_t i = 0; i < w.size(); ++i) o << std::string(w[i], '-') << (i + 1 < w.size() ? "  " : "");
      o << "\n";
    }
  }
}

std::string render(const Report& rep) {
  std::ostringstream o;
  text_table(o, results_table(rep));
  const Table nets = network_table(rep);
  if (nets.size() > 1) {
    o << "\nnetworks (the costliest steps of each are in report.md):\n";
    text_table(o, nets);
  }
  const Table dist = distributed_table(rep);
  if (dist.size() > 1) {
    o << "\ndistributed training (phases per step; details in report.md):\n";
    text_table(o, dist);
  }
  if (!rep.overlap.empty()) {
    o << "\noverlap (bucketed allreduce against the plain one; hidden = share of the plain scheme's communication + wait taken off the step):\n";
    text_table(o, overlap_table(rep));
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
        << ", efficiency " << fmt_sig(p.efficiency, 3) << " [" << fmt_sig(p.efficiency_lo, 3) << ", " << fmt_sig(p.efficiency_hi, 3) << "]\n";
    if (!s.model.law.empty()) o << " " << scaling_model_text(s) << "\n";
  }
  for (const auto& g : rep.launches)
    o << "\nacross " << g.interval.launches << " launches, " << g.group << ": " << fmt_time(g.interval.estimate)
      << (g.interval.has_ci ? " [" + fmt_time(g.interval.lo) + ", " + fmt_time(g.interval.hi) + "]" : "")
      << ", between-launch share of variance " << fmt_sig(g.interval.between_share * 100, 2) << "%\n";
  for (const auto& c : rep.launch_comparisons)
    o << "\nacross " << c.launches.size() << " launches, " << c.other << " vs " << c.baseline << ", " << c.group << ": speedup "
      << ratio_text(c.speedup)
      << (c.varies == "ranks" ? ", efficiency " + fmt_sig(c.speedup.estimate / c.ideal, 3)
          : c.speedup.excludes_one() ? std::string(" (significant)") : std::string(" (not significant)"))
      << "\n";
  for (const auto& m : rep.launch_scaling)
    o << "\nacross " << m.launches.size() << " launches, scaling model of " << m.group << ": " << m.law << ", s " << fmt_sig(m.s, 3)
      << " [" << fmt_sig(m.s_lo, 3) << ", " << fmt_sig(m.s_hi, 3) << "]"
      << (m.law == "USL" ? ", k " + fmt_sig(m.k, 3) + " [" + fmt_sig(m.k_lo, 3) + ", " + fmt_sig(m.k_hi, 3) + "]" : std::string())
      << ", predicted efficiency at " << m.at2 << " ranks " << fmt_sig(m.eff2, 3) << "\n";
  for (const auto& c : rep.tta)
    o << "\ntime to accuracy " << fmt_sig(c.summary.target, 3) << ", " << c.group << ": median "
      << tta_median_text(c.summary) << " " << tta_ci_text(c.summary) << "; reached " << tta_success_text(c.summary)
      << (c.cut_off ? "; " + std::to_string(c.cut_off) + " run(s) cut off, censored (" + c.summary.method + ")" : "")
      << (c.disagreements.empty() ? "" : "; RANKS DISAGREE: " + c.disagreements.front()) << "\n";
  for (const auto& u : rep.unreadable) o << "unreadable: " << u << "\n";
  return o.str();
}

}  // namespace

std::unique_ptr<Reporter> console_reporter() { return make_reporter("console", "", render); }

}  // namespace d500
