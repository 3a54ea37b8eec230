#include "rundir/state.hpp"

#include "common/error.hpp"
#include "common/text.hpp"
#include "store/guarded.hpp"

namespace d500 {

bool better_record(const PointState& a, const PointState& b) {
  const int pa = outcome_preference(a.outcome), pb = outcome_preference(b.outcome);
  return pa > pb || (pa == pb && a.created_utc >= b.created_utc);
}

PointState RunState::of(const std::string& id) const {
  auto it = points.find(id);
  if (it != points.end()) return it->second;
  return {Outcome::Missing, "no results file holds this point (job not run, or killed before it started)", "", ""};
}

RunState scan_results(const RunLayout& dir, const std::function<void(const JobResult&)>& each) {
  RunState st;
  for (const auto& f : dir.results_files()) {
    JobResult j;
    try {
      j = read_job_file_guarded(f);
    } catch (const Error& e) {
      st.unreadable.push_back(e.what());
      continue;
    }
    st.files.push_back(f);
    for (const auto& p : j.points) {
      PointState s{p.outcome, p.status_reason, f, j.created_utc};
      auto it = st.points.find(p.id);
      if (it == st.points.end() || better_record(s, it->second)) st.points[p.id] = s;
    }
    if (each) each(j);
  }
  return st;
}

int PointCounts::count(Outcome o) const {
  auto it = by_outcome.find(o);
  return it == by_outcome.end() ? 0 : it->second;
}

std::string PointCounts::text() const {
  std::vector<std::string> parts;
  for (const auto& [o, n] : by_outcome) parts.push_back(std::to_string(n) + " " + outcome_name(o));
  return parts.empty() ? "no points" : join(parts, ", ");
}

PointCounts count_planned(const std::vector<PlannedPoint>& planned, const RunState& state) {
  PointCounts c;
  for (const auto& p : planned) {
    c.by_outcome[state.of(p.id).outcome]++;
    ++c.total;
  }
  return c;
}

}  // namespace d500
