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
  const std::string hash = dir.campaign_hash();
  const std::vector<std::string> files = dir.results_files();
  read_job_files_guarded(files, [&](std::size_t i, const JobResult* read, const std::string& error) {
    const std::string& f = files[i];
    if (!read) {
      st.unreadable.push_back(error);
      return;
    }
    const JobResult& j = *read;
    if (!hash.empty() && j.campaign_hash != hash) {  // copied in from another run
      st.unreadable.push_back(f + ": foreign: written for campaign \"" + printable(j.campaign.substr(0, 80)) +
                              "\" (hash " + printable(j.campaign_hash.substr(0, 32)) + "), not this run's (hash " +
                              hash + "); none of it is used");
      return;
    }
    st.files.push_back(f);
    for (const auto& p : j.points) {
      PointState s{p.outcome, p.status_reason, f, j.created_utc};
      auto it = st.points.find(p.id);
      if (it == st.points.end() || better_record(s, it->second)) st.points[p.id] = s;
    }
    if (each) each(j);
  });
  return st;
}

std::map<std::string, MeasuredPoint> measured_points(const RunLayout& dir, std::vector<std::string>& unreadable) {
  std::map<std::pair<std::string, std::string>, MeasuredPoint> seen;  // (id, file): every complete record
  const RunState st = scan_results(dir, [&](const JobResult& j) {
    for (const auto& p : j.points) {
      if (p.outcome != Outcome::Complete) continue;
      MeasuredPoint m;
      m.level = p.level;
      if (auto b = p.params.find("backend"); b != p.params.end() && std::holds_alternative<std::string>(b->second))
        m.backend = std::get<std::string>(b->second);
      m.seconds = p.seconds;
      m.work_flops = p.work_flops;
      m.work_bytes = p.work_bytes;
      std::map<int, std::int64_t> slowest;  // rep -> the slowest rank's whole-step time
      for (const auto& s : p.samples)
        if (s.phase == static_cast<std::uint8_t>(Phase::Op))
          slowest[s.rep] = std::max(slowest[s.rep], s.end_ns - s.start_ns);
      for (const auto& [rep, ns] : slowest) m.reps_s += static_cast<double>(ns) * 1e-9;
      m.reps_run = static_cast<int>(slowest.size());
      seen[{p.id, j.path}] = m;
    }
  });
  // The record the run state keeps (better_record: the file created last among complete ones).
  std::map<std::string, MeasuredPoint> out;
  for (auto& [key, m] : seen)
    if (st.of(key.first).file == key.second) out[key.first] = std::move(m);
  unreadable.insert(unreadable.end(), st.unreadable.begin(), st.unreadable.end());
  return out;
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
