#include "launch/submit_plan.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <tuple>

#include "common/text.hpp"

namespace d500 {

SubmitPlan plan_submissions(const SubmitFacts& facts, const Campaign& campaign, const RunLayout& dir) {
  const SlurmSettings& sl = campaign.slurm;
  SubmitPlan plan;
  std::vector<SubmitEntry> todo;
  for (const auto& [job, original] : facts.jobs) {
    std::vector<PointSpec> left;
    for (const auto& p : original.points) {
      if (facts.finished.count(p.id))
        ++plan.finished;
      else if (facts.in_flight.count(p.id))
        ++plan.in_flight;
      else
        left.push_back(p);
    }
    if (left.empty()) continue;
    const int attempts = facts.attempts.count(job) ? facts.attempts.at(job) : 0;
    const int timeouts = facts.timeouts.count(job) ? facts.timeouts.at(job) : 0;
    const int failures = facts.failures.count(job) ? facts.failures.at(job) : 0;
    // A job given up: said, and its points counted.
    auto give_up = [&](const char* what, int times, const std::string& more) {
      plan.notes.push_back(job + ": " + what + " " + std::to_string(times) +
                           " time(s), more than max_retries = " + std::to_string(sl.max_retries) +
                           "; not resubmitted (" + std::to_string(left.size()) + " points left)" + more);
      plan.gave_up += static_cast<int>(left.size());
    };
    // A job that failed for its own reasons (an exit code, a signal, out of memory: not its
    // node, not its limit) runs again at most max_retries times: an always-crashing job is
    // reported, not resubmitted for ever.
    if (failures > sl.max_retries && !facts.retry_failed) {
      give_up("failed", failures,
              ". Last failure: " +
                  (facts.failure_cause.count(job) ? facts.failure_cause.at(job) : std::string("cause unknown")) +
                  ". Fix the cause, then `d500 submit --resume --retry-failed`");
      continue;
    }
    int limit = sl.time_limit_min;
    if (timeouts > 0 && sl.retry_time_factor > 1) {
      if (timeouts > sl.max_retries) {
        give_up("timed out", timeouts, "");
        continue;
      }
      limit = static_cast<int>(std::ceil(sl.time_limit_min * std::pow(sl.retry_time_factor, timeouts)));
    }
    SubmitEntry e;
    e.job = job;
    e.spec = original;
    e.spec_path = dir.job_spec(job).string();
    e.time_limit_min = limit;
    if (left.size() != original.points.size() || attempts > 0) {
      // A resubmission runs only what is left, under a spec of its own.
      e.spec.id = job + ".r" + std::to_string(attempts);
      e.spec.points = left;
      e.spec_path = dir.job_spec(e.spec.id).string();
      e.new_spec = true;
    }
    todo.push_back(std::move(e));
  }

  // Nodes that failed under an earlier task are left out of every new one.
  std::vector<std::string> nodes;
  for (const auto& [node, task] : facts.failed_nodes) {
    nodes.push_back(node);
    plan.notes.push_back("excluding node " + node + " (--exclude): " + task + " ended NODE_FAIL on it");
  }
  plan.exclude = join(nodes, ",");

  // Jobs of one shape and time limit go into one array when the campaign allows (always with a
  // throttle, whose %N limits the array); arrays are chained when throttled, so that at most N of
  // the campaign's jobs are queued or running at once.
  std::map<std::tuple<int, int, int>, std::vector<SubmitEntry>> groups;
  std::vector<std::tuple<int, int, int>> order;
  for (auto& e : todo) {
    auto key = std::make_tuple(e.spec.nodes, e.spec.ranks_per_node, e.time_limit_min);
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(std::move(e));
  }
  // An array holds task ids 0 .. MaxArraySize - 1 (Slurm refuses more): a larger group becomes
  // several arrays.
  const std::size_t most = static_cast<std::size_t>(std::max(1, facts.max_array_size - 1));
  std::vector<std::vector<SubmitEntry>> batches;
  for (const auto& k : order) {
    auto& g = groups[k];
    if (sl.array || sl.throttle > 0)
      for (std::size_t from = 0; from < g.size(); from += most)
        batches.emplace_back(
            std::make_move_iterator(g.begin() + static_cast<std::ptrdiff_t>(from)),
            std::make_move_iterator(g.begin() + static_cast<std::ptrdiff_t>(std::min(g.size(), from + most))));
    else
      for (auto& e : g) batches.push_back({std::move(e)});
  }
  for (std::size_t i = 0; i < batches.size(); ++i) {
    SubmitBatch b;
    const int n = facts.earlier_submissions + static_cast<int>(i);
    b.entries = std::move(batches[i]);
    b.array = b.entries.size() > 1 || sl.throttle > 0;
    b.nodes = b.entries.front().spec.nodes;
    b.ranks_per_node = b.entries.front().spec.ranks_per_node;
    b.time_limit_min = b.entries.front().time_limit_min;
    b.name = campaign.name + "." + (b.array ? "array-" + std::to_string(n) : b.entries.front().job);
    b.list = dir.submit_list(n);
    if (b.array)
      b.array_expr =
          "0-" + std::to_string(b.entries.size() - 1) + (sl.throttle > 0 ? "%" + std::to_string(sl.throttle) : "");
    b.after_previous = sl.throttle > 0 && i > 0;
    plan.batches.push_back(std::move(b));
  }
  return plan;
}

}  // namespace d500
