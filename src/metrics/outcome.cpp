#include "metrics/outcome.hpp"

#include <array>
#include <utility>

namespace d500 {

namespace {
constexpr std::array<std::pair<Outcome, const char*>, 9> kOutcomeNames{{
    {Outcome::Complete, "complete"},
    {Outcome::Incomplete, "incomplete"},
    {Outcome::FailedValidation, "failed-validation"},
    {Outcome::BackendFailed, "backend-failed"},
    {Outcome::TimedOut, "timed-out"},
    {Outcome::Cancelled, "cancelled"},
    {Outcome::NodeFailed, "node-failed"},
    {Outcome::JobFailed, "job-failed"},
    {Outcome::Missing, "missing"},
}};
}  // namespace

const char* outcome_name(Outcome o) {
  for (const auto& [v, n] : kOutcomeNames)
    if (v == o) return n;
  return "unknown";
}

std::optional<Outcome> parse_outcome(const std::string& name) {
  for (const auto& [v, n] : kOutcomeNames)
    if (name == n) return v;
  return std::nullopt;
}

const char* file_status(Outcome o) { return o == Outcome::Incomplete ? "running" : outcome_name(o); }

std::optional<Outcome> outcome_from_file_status(const std::string& status) {
  if (status == "running") return Outcome::Incomplete;
  auto o = parse_outcome(status);
  if (o && (*o == Outcome::Complete || *o == Outcome::FailedValidation || *o == Outcome::BackendFailed)) return o;
  return std::nullopt;
}

bool is_final(Outcome o) {
  return o == Outcome::Complete || o == Outcome::FailedValidation || o == Outcome::BackendFailed;
}

int outcome_preference(Outcome o) {
  switch (o) {
    case Outcome::Complete: return 8;
    case Outcome::FailedValidation: return 7;
    case Outcome::BackendFailed: return 6;
    case Outcome::Incomplete: return 5;
    case Outcome::JobFailed: return 4;
    case Outcome::TimedOut: return 3;
    case Outcome::NodeFailed: return 2;
    case Outcome::Cancelled: return 1;
    case Outcome::Missing: return 0;
  }
  return 0;
}

}  // namespace d500
