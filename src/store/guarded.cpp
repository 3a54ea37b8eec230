#include "store/guarded.hpp"

#include <filesystem>

#include "common/contain.hpp"
#include "common/error.hpp"

namespace d500 {

namespace {

ContainLimits limits_for(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return read_limits(ec ? 0 : static_cast<std::int64_t>(size));
}

std::string damage(const Contained& c) {
  return "damaged: reading it (in a separate process) " + c.text + "; none of it is used";
}

}  // namespace

JobResult read_job_file_guarded(const std::string& path) {
  if (const std::string why = not_a_regular_file(path); !why.empty()) throw Error(path + ": " + why);
  const Contained c = run_contained(
      [&] {
        read_job_file(path);
        return std::string();
      },
      limits_for(path));
  if (c.kind == Contained::Failed) throw Error(c.text);  // the reader's own error, already naming the file
  if (!c.ok()) throw Error(path + ": " + damage(c));
  return read_job_file(path);
}

CheckResult check_file_guarded(const std::string& path) {
  CheckResult r;
  r.path = path;
  if (const std::string why = not_a_regular_file(path); !why.empty()) {
    r.problems.push_back(path + ": " + why);
    return r;
  }
  // The child's answer: the summary, then each problem, separated by NUL bytes.
  const Contained c = run_contained(
      [&] {
        CheckResult in = check_file(path);
        std::string s = in.summary;
        for (const auto& p : in.problems) s += '\0' + p;
        return s;
      },
      limits_for(path));
  if (c.kind == Contained::Failed) {
    r.problems.push_back(path + ": " + c.text);
    return r;
  }
  if (!c.ok()) {
    r.problems.push_back(path + ": " + damage(c));
    return r;
  }
  std::size_t at = c.text.find('\0');
  r.summary = c.text.substr(0, at);
  while (at != std::string::npos) {
    const std::size_t next = c.text.find('\0', at + 1);
    r.problems.push_back(c.text.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1));
    at = next;
  }
  return r;
}

}  // namespace d500
