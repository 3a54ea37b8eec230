#include "store/guarded.hpp"

#include <sys/stat.h>
#include <time.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "common/contain.hpp"
#include "common/error.hpp"
#include "store/liveness.hpp"
#include "store/result_codec.hpp"

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

// A file that a job is still writing is read without the writer's knowledge (parallel HDF5 has
// no single-writer/multiple-reader mode): between two of HDF5's metadata writes a reader can
// meet an object header that is not on disk yet, and the file looks damaged. The writer flushes
// durably at least every 2 s (workloads/harness.hpp), so such a file changes again soon, and
// is then read again. What tells it apart from a damaged file is that it changes.
struct Stamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = -1;
  std::int64_t mtime_ns = 0;
  bool operator==(const Stamp&) const = default;
};

Stamp stamp_of(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return {st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec};
}

constexpr double kSettleS = 3.0;     // longer than the writer's 2 s between durable flushes
constexpr double kPatienceS = 30.0;  // the most time spent reading one file again and again

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Whether the file says its job is running and its writer is not known to be gone (a writer of
// this machine that has ended writes nothing more: store/liveness.hpp).
bool may_have_a_writer(const std::string& path) {
  const Contained c = run_contained(
      [&] {
        const JobStatus s = read_job_status(path);
        return s.status + '\n' + s.writer;
      },
      limits_for(path));
  if (!c.ok()) return false;
  const auto nl = c.text.find('\n');
  return c.text.substr(0, nl) == "running" &&
         !writer_gone(nl == std::string::npos ? std::string() : c.text.substr(nl + 1));
}

// After a failed read begun at `before`: whether the file changed since, or says its job is
// running and changes within kSettleS of its last change (a file last written longer ago than
// that, or whose writer on this machine has ended, has no writer: no wait).
bool being_written(const std::string& path, const Stamp& before) {
  if (!(stamp_of(path) == before)) return true;
  if (!may_have_a_writer(path)) return false;
  struct timespec now {};
  clock_gettime(CLOCK_REALTIME, &now);
  const double age = static_cast<double>(now.tv_sec * 1'000'000'000LL + now.tv_nsec - before.mtime_ns) * 1e-9;
  const auto t0 = std::chrono::steady_clock::now();
  while (seconds_since(t0) < kSettleS - age) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!(stamp_of(path) == before)) return true;
  }
  return false;
}

// Runs `attempt` (true: the file read cleanly) until it succeeds, the file is not being written,
// or kPatienceS has passed.
template <class Attempt>
void until_settled(const std::string& path, Attempt&& attempt) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const Stamp before = stamp_of(path);
    if (attempt() || seconds_since(t0) > kPatienceS || !being_written(path, before)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the writer finish its flush
  }
}

}  // namespace

JobResult read_job_file_guarded(const std::string& path) {
  if (const std::string why = not_a_regular_file(path); !why.empty()) throw Error(path + ": " + why);
  JobResult r;
  std::string error;
  until_settled(path, [&] {
    // What the child read comes back whole (store/result_codec): the file is never opened
    // here, where a change or damage since the child's read could take the report down.
    const Contained c = run_contained([&] { return encode_job_result(read_job_file(path)); }, limits_for(path));
    const bool own_error = c.kind == Contained::Failed && c.text.find(path) != std::string::npos;
    error = own_error ? c.text  // the reader's own error, already naming the file
            : c.ok()  ? std::string()
                      : path + ": " + damage(c);
    if (!error.empty()) return false;
    try {
      r = decode_job_result(c.text, path);
    } catch (const Error& e) {
      error = e.what();
    }
    return error.empty();
  });
  if (!error.empty()) throw Error(error);
  return r;
}

void read_job_files_guarded(const std::vector<std::string>& paths,
                            const std::function<void(std::size_t, const JobResult*, const std::string&)>& each) {
  constexpr std::size_t kBatchFiles = 64;
  constexpr std::int64_t kBatchBytes = 64LL << 20;
  auto alone = [&](std::size_t i) {
    try {
      const JobResult r = read_job_file_guarded(paths[i]);
      each(i, &r, "");
    } catch (const Error& e) {
      each(i, nullptr, e.what());
    }
  };
  std::size_t next = 0;
  while (next < paths.size()) {
    // The batch: consecutive regular files, up to the limits (a file over them goes alone).
    std::vector<std::size_t> batch;
    std::int64_t bytes = 0;
    for (; next < paths.size() && batch.size() < kBatchFiles; ++next) {
      if (!not_a_regular_file(paths[next]).empty()) {
        if (batch.empty()) alone(next++);
        break;
      }
      std::error_code ec;
      const auto size = static_cast<std::int64_t>(std::filesystem::file_size(paths[next], ec));
      if (!batch.empty() && bytes + size > kBatchBytes) break;
      batch.push_back(next);
      bytes += ec ? 0 : size;
    }
    if (batch.empty()) continue;
    // The child's answer: per file a byte ('1': read, '0': not), then for a read file its
    // encoding's length (8 bytes) and the encoding (store/result_codec).
    const Contained c = run_contained(
        [&] {
          std::string a;
          for (std::size_t i : batch) {
            std::string e;
            try {
              e = encode_job_result(read_job_file(paths[i]));
            } catch (const std::exception&) {
              a += '0';
              continue;
            }
            const std::uint64_t n = e.size();
            a += '1';
            a.append(reinterpret_cast<const char*>(&n), sizeof n);
            a += e;
          }
          return a;
        },
        read_limits(bytes));
    std::size_t at = 0;
    for (std::size_t i : batch) {
      std::optional<JobResult> r;
      if (c.ok() && at < c.text.size() && c.text[at] == '1' && at + 1 + sizeof(std::uint64_t) <= c.text.size()) {
        std::uint64_t n = 0;
        std::memcpy(&n, c.text.data() + at + 1, sizeof n);
        at += 1 + sizeof n;
        if (n <= c.text.size() - at) {
          try {
            r = decode_job_result(c.text.substr(at, n), paths[i]);
          } catch (const Error&) {}
          at += n;
        } else {
          at = c.text.size();
        }
      } else if (c.ok() && at < c.text.size()) {
        ++at;
      }
      if (r)
        each(i, &*r, "");
      else
        alone(i);
    }
  }
}

CheckResult check_file_guarded(const std::string& path) {
  CheckResult r;
  r.path = path;
  if (const std::string why = not_a_regular_file(path); !why.empty()) {
    r.problems.push_back(path + ": " + why);
    return r;
  }
  until_settled(path, [&] {
    r.summary.clear();
    r.problems.clear();
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
      return false;
    }
    if (!c.ok()) {
      r.problems.push_back(path + ": " + damage(c));
      return false;
    }
    std::size_t at = c.text.find('\0');
    r.summary = c.text.substr(0, at);
    while (at != std::string::npos) {
      const std::size_t next = c.text.find('\0', at + 1);
      r.problems.push_back(c.text.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1));
      at = next;
    }
    return r.problems.empty();
  });
  return r;
}

}  // namespace d500
