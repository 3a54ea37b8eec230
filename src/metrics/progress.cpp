#include "metrics/progress.hpp"

#include <cstdio>
#include <cstdlib>

namespace d500 {

namespace {
constexpr const char* kPoint = "d500:point ";
constexpr const char* kFlushed = "d500:flushed ";
constexpr const char* kDone = "d500:done ";
constexpr const char* kCheckpoint = "d500:checkpoint ";
constexpr const char* kResumed = "d500:resumed ";
constexpr const char* kSkipped = "d500:skipped ";

std::string counter(int index, int count) { return std::to_string(index) + "/" + std::to_string(count); }

// "I/N" at the start of `s`; the rest after one space goes to `rest`.
bool parse_counter(const std::string& s, ProgressLine& p, std::string& rest) {
  const auto slash = s.find('/'), space = s.find(' ');
  if (slash == std::string::npos || slash == 0) return false;
  char* end = nullptr;
  p.index = static_cast<int>(std::strtol(s.c_str(), &end, 10));
  if (end != s.c_str() + slash) return false;
  const std::string n = s.substr(slash + 1, space == std::string::npos ? std::string::npos : space - slash - 1);
  p.count = static_cast<int>(std::strtol(n.c_str(), &end, 10));
  if (n.empty() || *end != '\0') return false;
  rest = space == std::string::npos ? "" : s.substr(space + 1);
  return true;
}
}  // namespace

std::string progress_point_line(int index, int count, const std::string& canonical) {
  return kPoint + counter(index, count) + " " + canonical;
}

std::string progress_flushed_line(int index, int count, long long rows) {
  return kFlushed + counter(index, count) + " " + std::to_string(rows);
}

std::string progress_done_line(int index, int count, Outcome outcome, double seconds) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2fs", seconds);
  return kDone + counter(index, count) + " " + outcome_name(outcome) + " " + secs;
}

std::string progress_checkpoint_line(int index, int count, long long step) {
  return kCheckpoint + counter(index, count) + " " + std::to_string(step);
}

std::string progress_resumed_line(int index, int count, long long step) {
  return kResumed + counter(index, count) + " " + std::to_string(step);
}

std::string progress_skipped_line(int index, int count, Outcome outcome, const std::string& file) {
  return kSkipped + counter(index, count) + " " + outcome_name(outcome) + " " + file;
}

std::optional<ProgressLine> parse_progress_line(const std::string& line) {
  ProgressLine p;
  std::string rest;
  auto starts = [&](const char* prefix) { return line.rfind(prefix, 0) == 0; };
  for (const auto& [prefix, kind] :
       {std::pair{kCheckpoint, ProgressLine::Checkpoint}, std::pair{kResumed, ProgressLine::Resumed}})
    if (starts(prefix)) {
      if (!parse_counter(line.substr(std::string(prefix).size()), p, rest)) return std::nullopt;
      p.kind = kind;
      p.rows = std::atoll(rest.c_str());
      return p;
    }
  if (starts(kPoint)) {
    if (!parse_counter(line.substr(std::string(kPoint).size()), p, rest)) return std::nullopt;
    p.kind = ProgressLine::Point;
    p.canonical = rest;
    return p;
  }
  if (starts(kFlushed)) {
    if (!parse_counter(line.substr(std::string(kFlushed).size()), p, rest)) return std::nullopt;
    p.kind = ProgressLine::Flushed;
    p.rows = std::atoll(rest.c_str());
    return p;
  }
  if (starts(kSkipped)) {
    if (!parse_counter(line.substr(std::string(kSkipped).size()), p, rest)) return std::nullopt;
    const auto space = rest.find(' ');
    auto o = parse_outcome(rest.substr(0, space));
    if (!o || space == std::string::npos) return std::nullopt;
    p.kind = ProgressLine::Skipped;
    p.outcome = *o;
    p.canonical = rest.substr(space + 1);
    return p;
  }
  if (starts(kDone)) {
    if (!parse_counter(line.substr(std::string(kDone).size()), p, rest)) return std::nullopt;
    p.kind = ProgressLine::Done;
    const auto space = rest.find(' ');
    auto o = parse_outcome(rest.substr(0, space));
    if (!o) return std::nullopt;
    p.outcome = *o;
    if (space != std::string::npos) p.seconds = std::atof(rest.c_str() + space + 1);
    return p;
  }
  return std::nullopt;
}

}  // namespace d500
