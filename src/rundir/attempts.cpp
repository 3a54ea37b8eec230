#include "rundir/attempts.hpp"

#include <toml++/toml.h>
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/crash_note.hpp"
#include "common/text.hpp"
#include "rundir/submissions.hpp"

namespace fs = std::filesystem;

namespace d500 {

namespace {

constexpr const char* kObservedHeader = "# slurm_id\ttask\tstate\treason\texit\tsignal\trestarts\tnodes\tseen_utc";

template <class T>
bool number(const std::string& s, T& v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// "key=value" from the words of a record line; `rest` keys (log=) run to the end of the line.
std::string field(const std::string& text, const std::string& key, bool rest = false) {
  const std::string k = key + "=";
  std::size_t at = text.rfind(" " + k);
  at = text.rfind(k, 0) == 0 ? 0 : (at == std::string::npos ? std::string::npos : at + 1);
  if (at == std::string::npos) return "";
  const std::size_t from = at + k.size();
  if (rest) return text.substr(from);
  return text.substr(from, text.find(' ', from) - from);
}

// "123_4.2.tsv" -> task (123, 4), attempt 2.
bool parse_attempt_name(const std::string& name, TaskKey& task, int& attempt) {
  if (!name.ends_with(".tsv")) return false;
  const std::string stem = name.substr(0, name.size() - 4);
  const auto us = stem.find('_'), dot = stem.find('.');
  if (us == std::string::npos || dot == std::string::npos || dot < us) return false;
  return number(stem.substr(0, us), task.first) && number(stem.substr(us + 1, dot - us - 1), task.second) &&
         number(stem.substr(dot + 1), attempt);
}

std::string clean(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s.empty() ? "-" : s;
}

}  // namespace

std::vector<AttemptRecord> read_attempts(const RunLayout& dir) {
  std::vector<AttemptRecord> out;
  std::error_code ec;
  if (!fs::is_directory(dir.attempts_dir(), ec)) return out;
  for (const auto& e : fs::directory_iterator(dir.attempts_dir(), ec)) {
    AttemptRecord a;
    if (!e.is_regular_file() || !parse_attempt_name(e.path().filename().string(), a.task, a.attempt)) continue;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      const auto t1 = line.find('\t'), t2 = t1 == std::string::npos ? t1 : line.find('\t', t1 + 1);
      if (t2 == std::string::npos) continue;
      const std::string kind = line.substr(0, t1), utc = line.substr(t1 + 1, t2 - t1 - 1), rest = line.substr(t2 + 1);
      if (kind == "start") {
        a.started_utc = utc;
        a.host = field(rest, "host");
        a.log = field(rest, "log", true);
      } else if (kind == "signal") {
        a.terminated = true;
        a.timed_out = field(rest, "verdict") == "timed-out";
        double s = -1;
        if (number(field(rest, "elapsed_s"), s)) a.term_elapsed_s = s;
        int before = 0;
        if (number(field(rest, "before_s"), before)) a.signal_before_s = before;
      } else if (kind == "end") {
        int code = 0;
        if (number(field(rest, "exit"), code)) a.exit_code = code;
      }
    }
    out.push_back(a);
  }
  std::sort(out.begin(), out.end(), [](const AttemptRecord& x, const AttemptRecord& y) {
    return std::tie(x.task, x.attempt) < std::tie(y.task, y.attempt);
  });
  return out;
}

std::map<TaskKey, ObservedState> read_observed(const RunLayout& dir) {
  std::map<TaskKey, ObservedState> out;
  std::ifstream in(dir.observed_file());
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> c = split(line, '\t');
    ObservedState s;
    if (c.size() != 9 || !number(c[0], s.task.first) || !number(c[1], s.task.second) || !number(c[4], s.exit_code) ||
        !number(c[5], s.signal) || !number(c[6], s.restarts))
      continue;  // a line cut by a crash
    s.state = c[2];
    s.reason = c[3] == "-" ? "" : c[3];
    s.nodes = c[7] == "-" ? "" : c[7];
    s.seen_utc = c[8];
    out[s.task] = s;
  }
  return out;
}

void record_observed(const RunLayout& dir, const ObservedState& s) {
  append_line_durably(dir.observed_file(), kObservedHeader,
                      std::to_string(s.task.first) + "\t" + std::to_string(s.task.second) + "\t" + clean(s.state) +
                          "\t" + clean(s.reason) + "\t" + std::to_string(s.exit_code) + "\t" +
                          std::to_string(s.signal) + "\t" + std::to_string(s.restarts) + "\t" + clean(s.nodes) + "\t" +
                          clean(s.seen_utc));
}

std::string exit_text(int exit_code, int signal) {
  if (signal) return std::string("signal ") + signal_name(signal);
  std::string s = "exit " + std::to_string(exit_code);
  if (exit_code == 127)
    s += " (command not found)";
  else if (exit_code == 126)
    s += " (not executable)";
  else if (exit_code > 128 && exit_code < 128 + 65)
    s += std::string(" (128 + ") + signal_name(exit_code - 128) + ")";
  return s;
}

std::vector<std::string> attempt_output_tail(const AttemptRecord& a, int n) {
  std::vector<std::string> lines;
  if (a.log.empty() || a.log == "-") return lines;
  std::ifstream in(a.log);
  // "d500: attempt 1 of Slurm job 41 (task 40_3) starts on ..." (templates/slurm-attempt.bash).
  const std::string marker = "d500: attempt " + std::to_string(a.attempt) + " of Slurm job ",
                    task = " (task " + std::to_string(a.task.first) + "_" + std::to_string(a.task.second) + ") ";
  std::size_t crash = std::string::npos;  // the index of this attempt's first crash note
  bool mine = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(marker, 0) == 0 && line.find(task) != std::string::npos) {
      lines.clear();  // this attempt's part starts here
      crash = std::string::npos;
      mine = true;
      continue;
    }
    if (mine && line.rfind("d500: attempt ", 0) == 0) break;  // and ends where another's starts
    if (crash == std::string::npos && is_crash_note(line)) crash = lines.size();
    lines.push_back(line);
  }
  while (!lines.empty() && lines.back().find_first_not_of(" \t\r") == std::string::npos) lines.pop_back();
  if (static_cast<int>(lines.size()) > n) {
    const std::size_t from = lines.size() - static_cast<std::size_t>(n);
    const std::string note = crash < from ? lines[crash] : "";
    lines.erase(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(from));
    if (!note.empty()) lines.insert(lines.begin(), note);
  }
  return lines;
}

std::string last_words(const TaskEnd& e) {
  if (e.tail.empty()) return "";
  return is_crash_note(e.tail.front()) ? e.tail.front() : e.tail.back();
}

TaskEnd resolve_task_end(const TaskKey& task, const std::optional<ObservedState>& live, bool final_live,
                         const std::map<TaskKey, ObservedState>& observed, const std::vector<AttemptRecord>& attempts,
                         int tail_lines) {
  TaskEnd e;
  const AttemptRecord* last = nullptr;
  for (const auto& a : attempts)
    if (a.task == task) ++e.attempts, last = &a;
  auto from_slurm = [&](const ObservedState& s) {
    e.state = s.state;
    e.nodes = s.nodes;
    if (s.state == "TIMEOUT" || s.state == "DEADLINE")
      e.cause = "time limit reached";
    else if (s.state == "NODE_FAIL" || s.state == "BOOT_FAIL")
      e.cause = "node failure on " + (s.nodes.empty() ? "?" : s.nodes);
    else if (s.state == "FAILED" || s.state == "OUT_OF_MEMORY" || (s.state == "COMPLETED" && (s.exit_code || s.signal)))
      e.cause = exit_text(s.exit_code, s.signal);
    else if (s.state == "PREEMPTED")
      e.cause = "preempted";
    if (s.restarts > 0)
      e.cause += std::string(e.cause.empty() ? "" : "; ") + "requeued " + std::to_string(s.restarts) + "x";
  };
  // The job ended on the signal d500 asked for before its limit (--signal): the worker took a
  // checkpoint and ended, the script's exit is the worker's; Slurm calls it FAILED or COMPLETED,
  // but it is the time limit, as at the limit itself.
  auto warned = [&] {
    if (!last || !last->timed_out || last->signal_before_s <= 0 || (e.state != "FAILED" && e.state != "COMPLETED"))
      return;
    e.state = "TIMEOUT";
    e.cause = "time limit reached: SIGTERM at " + std::to_string(static_cast<long>(last->term_elapsed_s)) + " s, " +
              std::to_string(last->signal_before_s) + " s before the limit (signal_before_limit), the job ended on it";
  };
  if (live) {
    e.source = "slurm";
    if (final_live) {
      from_slurm(*live);
      warned();
    } else {
      e.state = live->state;
      if (live->restarts > 0) e.cause = "requeued " + std::to_string(live->restarts) + "x";
    }
  } else if (observed.count(task)) {
    e.source = "observed";
    from_slurm(observed.at(task));
    warned();
  } else if (last) {
    e.source = "job record";
    if (last->timed_out) {
      e.state = "TIMEOUT";
      e.cause = "time limit reached (SIGTERM at " + std::to_string(static_cast<long>(last->term_elapsed_s)) + " s)";
    } else if (last->terminated) {
      e.state = "CANCELLED";
      e.cause = "SIGTERM at " + std::to_string(static_cast<long>(last->term_elapsed_s)) +
                " s, before the time limit: cancelled or preempted";
    } else if (!last->exit_code) {
      e.state = "LOST";
      e.cause =
          "attempt " + std::to_string(last->attempt) + " left no end: killed outright (SIGKILL) or its node failed";
    } else {
      e.state = *last->exit_code == 0 ? "COMPLETED" : "FAILED";
      if (*last->exit_code) e.cause = exit_text(*last->exit_code, 0);
    }
    e.nodes = last->host;
  }
  if (last) e.tail = attempt_output_tail(*last, tail_lines);
  return e;
}

std::optional<Outcome> outcome_of_slurm_state(const std::string& state) {
  if (state == "TIMEOUT" || state == "DEADLINE") return Outcome::TimedOut;
  if (state == "CANCELLED") return Outcome::Cancelled;
  if (state == "NODE_FAIL" || state == "PREEMPTED" || state == "BOOT_FAIL") return Outcome::NodeFailed;
  if (state == "FAILED" || state == "OUT_OF_MEMORY") return Outcome::JobFailed;
  return std::nullopt;
}

std::map<std::string, JobEnd> local_job_ends(const RunLayout& dir) {
  std::map<std::string, JobEnd> out;
  for (const auto& job : dir.job_ids()) {
    const auto status = dir.job_status(job);
    if (!std::filesystem::is_regular_file(status)) continue;
    try {
      const toml::table t = toml::parse_file(status.string());
      if (const auto why = t["ended_by"].value<std::string>())
        out[job] = JobEnd{Outcome::JobFailed, "ended by " + printable(why->substr(0, 300))};
    } catch (const toml::parse_error&) {
      // A damaged record of how the job ended says nothing of it.
    }
  }
  return out;
}

std::map<std::string, JobEnd> slurm_job_ends(const RunLayout& dir) {
  std::map<std::string, JobEnd> out;
  const auto subs = read_submissions(dir);
  if (subs.empty()) return out;
  const auto observed = read_observed(dir);
  const auto records = read_attempts(dir);
  for (const auto& s : subs)
    for (std::size_t i = 0; i < s.specs.size(); ++i) {
      const TaskKey key{s.slurm_id, static_cast<int>(i)};
      const TaskEnd e = resolve_task_end(key, std::nullopt, false, observed, records, 1);
      JobEnd j;
      j.outcome = outcome_of_slurm_state(e.state);
      if (!e.state.empty())
        j.text = "Slurm job " + task_name(s, i) + " " + e.state + (e.cause.empty() ? "" : ": " + e.cause) +
                 (e.tail.empty() || e.state == "COMPLETED" ? "" : "; last output: " + last_words(e));
      out[base_job(s.specs[i])] = j;  // later submissions of a job come later in the file
    }
  return out;
}

}  // namespace d500
