#pragma once
// Helpers shared by the integration tests: run commands, make a scratch directory per test,
// read HDF5 with the plain C API (never through d500's own reader), parse results.csv.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace d500test {

namespace fs = std::filesystem;

struct Cmd {
  int code;
  std::string out;
};

// Runs a shell command line (all of it built from test-controlled strings) and captures
// stdout and stderr together.
// Reads a popen()ed command's output to its end and closes it.
inline Cmd drain(std::FILE* p) {
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 255, out};
}

inline Cmd sh(const std::string& cmd) { return drain(popen((cmd + " 2>&1").c_str(), "r")); }

// Waits until `pred` holds (every 0.1 s), at most `seconds`.
inline bool wait_for(const std::function<bool()>& pred, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

// An environment variable set for the commands a test runs, and unset again at its end.
struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) { ::setenv(name.c_str(), value.c_str(), 1); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

// The [axes] and [[exclude]] tables of a campaign that runs gemm on blas and allreduce on mpi,
// on `ranks` ranks: what most end-to-end tests need.
inline std::string gemm_and_allreduce(const std::string& n, const std::string& bytes, int ranks) {
  return "[axes]\nworkload = [\"gemm\", \"allreduce\"]\nbackend = [\"blas\", \"mpi\"]\nn = [" + n + "]\nbytes = [" +
         bytes + "]\nranks_per_node = [" + std::to_string(ranks) +
         "]\n[[exclude]]\nworkload = \"gemm\"\nbackend = \"mpi\"\n"
         "[[exclude]]\nworkload = \"allreduce\"\nbackend = \"blas\"\n";
}

// A whole file as text ("" when it cannot be read).
inline std::string read_file_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The d500 beside this test program: build/d500 for the build's own tests, build/minimal/d500 for
// those of the variant without the optional libraries (CMakeLists.txt).
inline std::string d500_bin() {
  static const std::string bin = (fs::read_symlink("/proc/self/exe").parent_path() / "d500").string();
  return bin;
}

inline std::string d500_cmd(const std::string& args) { return d500_bin() + " " + args; }

inline std::map<std::string, std::map<std::string, std::string>> read_csv(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> head;
  std::stringstream hs(line);
  for (std::string c; std::getline(hs, c, ',');) head.push_back(c);
  std::map<std::string, std::map<std::string, std::string>> out;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::string cur;
    bool q = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      char c = line[i];
      if (q && c == '"' && i + 1 < line.size() && line[i + 1] == '"')
        cur += '"', ++i;
      else if (c == '"')
        q = !q;
      else if (c == ',' && !q)
        f.push_back(cur), cur.clear();
      else
        cur += c;
    }
    f.push_back(cur);
    for (std::size_t i = 0; i < head.size() && i < f.size(); ++i) out[f[0]][head[i]] = f[i];
  }
  return out;
}

class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A parameterised test's name has a '/' ("Name/0"): one directory, not a parent TearDown leaves.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');
    dir_ = fs::temp_directory_path() / ("d500-e2e-" + std::to_string(getpid()) + "-" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream((dir_ / name).string()) << text;
    return (dir_ / name).string();
  }
  // Writes `text` as a campaign and plans it into dir_/run (dir_/run-2, run-3, ... when a test
  // plans again and left the earlier run in place); the plan's output goes to `plan_out`.
  fs::path planned(const std::string& text, std::string* plan_out = nullptr) {
    fs::path run = dir_ / "run";
    for (int k = 2; fs::exists(run); ++k) run = dir_ / ("run-" + std::to_string(k));
    Cmd plan = sh(d500_bin() + " plan " + write("campaign.toml", text) + " -o " + run.string());
    EXPECT_EQ(plan.code, 0) << plan.out;
    if (plan_out) *plan_out = plan.out;
    return run;
  }
  // planned(text), then `d500 run` and `d500 report` of it: results.csv's rows by point id.
  std::map<std::string, std::map<std::string, std::string>> reported(const std::string& text) {
    const fs::path run = planned(text);
    Cmd r = sh(d500_cmd("run " + run.string()));
    EXPECT_EQ(r.code, 0) << r.out;
    Cmd rep = sh(d500_cmd("report " + run.string()));
    EXPECT_EQ(rep.code, 0) << rep.out;
    return read_csv(run / "results.csv");
  }
  // `d500 run RUN` of a one-job run, `d500 check` of its results file, and the file opened
  // read-only (the caller closes it); a failure of any step fails the test and returns -1.
  hid_t ran_and_checked(const fs::path& run) {
    Cmd r = sh(d500_cmd("run " + run.string()));
    EXPECT_EQ(r.code, 0) << r.out;
    const fs::path file = run / "results" / "job-0000.h5";
    Cmd check = sh(d500_cmd("check " + file.string()));
    EXPECT_EQ(check.code, 0) << check.out;
    if (r.code != 0 || check.code != 0) return -1;
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    EXPECT_GE(f, 0) << file;
    return f;
  }
  // Plans `text` twice, into dir_/killed and dir_/whole, and runs dir_/whole to its end: the
  // pair a test of a killed and resumed run compares. Returns {killed, whole}.
  std::pair<fs::path, fs::path> planned_twice_and_one_run(const std::string& text) {
    const fs::path killed = dir_ / "killed", whole = dir_ / "whole";
    for (const fs::path& run : {killed, whole}) {
      Cmd plan = sh(d500_cmd("plan " + write("c.toml", text) + " -o " + run.string()));
      EXPECT_EQ(plan.code, 0) << plan.out;
    }
    Cmd r = sh(d500_cmd("run " + whole.string()));
    EXPECT_EQ(r.code, 0) << r.out;
    return {killed, whole};
  }
  // `d500 run RUN` of a one-job run (its output to dir_/attempt.txt), its workers sent `sig`
  // (SIGKILL, as a node lost or a time limit's end; SIGTERM, as Slurm's warning before it) once
  // the job's log has `n` lines starting with `prefix`; it returns once `d500 run` has ended.
  // Returns how many such lines the log had by then (-1 if the command failed).
  int run_killed_after(const fs::path& run, const std::string& prefix, int n, const std::string& sig = "KILL") {
    const std::string grep = "grep -c '^" + prefix + "' " + (run / "logs" / "job-0000.log").string();
    Cmd c =
        sh("(" + d500_cmd("run " + run.string()) + " > " + (dir_ / "attempt.txt").string() +
           " 2>&1 &\n"
           "for i in $(seq 1 1200); do n=$(" +
           grep + " 2>/dev/null); [ \"${n:-0}\" -ge " + std::to_string(n) + " ] && break; sleep 0.05; done\npkill -" +
           sig + " -f 'd500-worke[r] " + (run / "jobs").string() + "'\nwait; " + grep + ")");
    return c.code == 0 ? std::atoi(c.out.c_str()) : -1;
  }
  // A tmpfs of `size` (e.g. "1m") mounted at dir_/tmpfs, unmounted with the returned guard;
  // nullptr when it cannot be mounted (not root): the caller skips with that reason.
  struct Mounted {  // one owner only: a copy's end would unmount it under the test
    fs::path path;
    Mounted() = default;
    Mounted(const Mounted&) = delete;
    Mounted& operator=(const Mounted&) = delete;
    ~Mounted() { sh("umount " + path.string()); }
  };
  std::unique_ptr<Mounted> small_tmpfs(const std::string& size) {
    const fs::path mnt = dir_ / "tmpfs";
    fs::create_directories(mnt);
    if (geteuid() != 0 || sh("mount -t tmpfs -o size=" + size + " d500test " + mnt.string()).code != 0) return nullptr;
    auto m = std::make_unique<Mounted>();
    m->path = mnt;
    return m;
  }
  fs::path dir_;
};

inline std::string attr_string(hid_t obj, const char* name) {
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);  // the schema's strings are UTF-8; HDF5 1.10 will not convert
  char* p = nullptr;
  H5Aread(a, t, &p);
  std::string s = p ? p : "";
  H5free_memory(p);
  H5Tclose(t);
  H5Aclose(a);
  return s;
}

inline long long attr_int(hid_t obj, const char* name) {
  long long v = -1;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_LLONG, &v);
  H5Aclose(a);
  return v;
}

inline double attr_double(hid_t obj, const char* name) {
  double v = std::nan("");
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  if (a < 0) return v;
  H5Aread(a, H5T_NATIVE_DOUBLE, &v);
  H5Aclose(a);
  return v;
}

struct Row {
  int rank, rep;
  unsigned char warmup, phase;  // phase: 0 (op) in files without the column
  long long start_ns, end_ns;
};

inline std::vector<Row> read_samples(hid_t file, const std::string& point) {
  hid_t d = H5Dopen2(file, ("/points/" + point + "/samples").c_str(), H5P_DEFAULT);
  EXPECT_GE(d, 0) << point;
  hid_t s = H5Dget_space(d);
  std::vector<Row> rows(static_cast<std::size_t>(H5Sget_simple_extent_npoints(s)), Row{});
  hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(Row));
  H5Tinsert(t, "rank", HOFFSET(Row, rank), H5T_NATIVE_INT);
  H5Tinsert(t, "rep", HOFFSET(Row, rep), H5T_NATIVE_INT);
  H5Tinsert(t, "warmup", HOFFSET(Row, warmup), H5T_NATIVE_UCHAR);
  hid_t ft = H5Dget_type(d);
  if (H5Tget_member_index(ft, "phase") >= 0) H5Tinsert(t, "phase", HOFFSET(Row, phase), H5T_NATIVE_UCHAR);
  H5Tclose(ft);
  H5Tinsert(t, "start_ns", HOFFSET(Row, start_ns), H5T_NATIVE_LLONG);
  H5Tinsert(t, "end_ns", HOFFSET(Row, end_ns), H5T_NATIVE_LLONG);
  if (!rows.empty()) H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data());
  H5Tclose(t);
  H5Sclose(s);
  H5Dclose(d);
  return rows;
}

inline herr_t names_cb(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

// results.csv as a map: point id -> column name -> value.
// The ids of the points a results file holds, by name.
inline std::vector<std::string> point_ids(hid_t file) {
  std::vector<std::string> ids;
  hid_t g = H5Gopen2(file, "/points", H5P_DEFAULT);
  H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, nullptr, names_cb, &ids);
  H5Gclose(g);
  return ids;
}

// The one point of a results file (a one-point job's), opened read-only and closed with it:
// `group` < 0 (and a failure of the test) when the file does not open or holds another number.
struct OnePoint {
  hid_t file = -1, group = -1;
  std::string id;
  explicit OnePoint(const fs::path& path) {
    file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    EXPECT_GE(file, 0) << path;
    if (file < 0) return;
    const std::vector<std::string> ids = point_ids(file);
    EXPECT_EQ(ids.size(), 1u) << path;
    if (ids.size() == 1) id = ids[0], group = H5Gopen2(file, ("points/" + id).c_str(), H5P_DEFAULT);
  }
  ~OnePoint() {
    if (group >= 0) H5Gclose(group);
    if (file >= 0) H5Fclose(file);
  }
  OnePoint(const OnePoint&) = delete;
  OnePoint& operator=(const OnePoint&) = delete;
};

// The number that ends the last line of `log` starting with `prefix` (a progress line's step:
// "d500:checkpoint 1/1 970"); -1 when there is none.
inline long long last_line_number(const std::string& log, const std::string& prefix) {
  long long found = -1;
  std::istringstream lines(log);
  for (std::string l; std::getline(lines, l);)
    if (l.rfind(prefix, 0) == 0) found = std::atoll(l.substr(l.rfind(' ') + 1).c_str());
  return found;
}

// Each of the `points` points of a results file: complete and validated (traced by its canonical
// text); then the test's own checks of its group.
inline void each_validated_point(
    hid_t file, std::size_t points,
    const std::function<void(hid_t group, const std::string& id, const std::string& canonical)>& more) {
  const auto ids = point_ids(file);
  ASSERT_EQ(ids.size(), points);
  for (const auto& id : ids) {
    hid_t g = H5Gopen2(file, ("points/" + id).c_str(), H5P_DEFAULT);
    const std::string canonical = attr_string(g, "canonical");
    SCOPED_TRACE(canonical);
    EXPECT_EQ(attr_string(g, "status"), "complete") << attr_string(g, "status_reason");
    EXPECT_EQ(attr_string(g, "validation_status"), "passed")
        << "error " << attr_double(g, "validation_max_rel_error") << ", tolerance "
        << attr_double(g, "validation_tolerance") << ": " << attr_string(g, "validation_method");
    more(g, id, canonical);
    H5Gclose(g);
  }
}

// A busy machine, as a shared login node is: one process spinning per CPU for the life of the
// object (none when `on` is false), started and ended by the test itself. Tests that kill,
// signal or time something run both idle and under it (issue 52).
class CpuHog {
 public:
  explicit CpuHog(bool on) {
    if (!on) return;
    const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    for (long i = 0; i < cpus; ++i) {
      const pid_t p = fork();
      if (p == 0) {
        for (;;) asm volatile("" ::: "memory");  // spins; never optimised away
      }
      if (p > 0) pids_.push_back(p);
    }
  }
  ~CpuHog() {
    for (pid_t p : pids_) kill(p, SIGKILL);
    for (pid_t p : pids_) waitpid(p, nullptr, 0);
  }
  CpuHog(const CpuHog&) = delete;
  CpuHog& operator=(const CpuHog&) = delete;

 private:
  std::vector<pid_t> pids_;
};

}  // namespace d500test
