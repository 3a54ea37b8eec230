#include "worker/worker.hpp"

#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <set>

#include "backends/registry.hpp"
#include "common/contain.hpp"
#include "common/crash_note.hpp"
#include "common/error.hpp"
#include "common/mpi_check.hpp"
#include "common/text.hpp"
#include "metrics/progress.hpp"
#include "plan/jobspec.hpp"
#include "plan/plan.hpp"
#include "rundir/layout.hpp"
#include "rundir/lock.hpp"
#include "store/checkpoint.hpp"
#include "store/guarded.hpp"
#include "store/h5.hpp"
#include "store/writer.hpp"
#include "workloads/registry.hpp"

namespace fs = std::filesystem;

namespace d500 {
namespace {

// SIGTERM while a training point that checkpoints runs: Slurm's warning at the time limit, which
// it follows with SIGKILL KillWait seconds later (30 by default), and `d500 run`'s when it is
// stopped. Noted, it rides the harness's per-step allreduce: every rank checkpoints before its
// next step and the process then ends as the signal asked (Harness::on_terminate). At any
// other time SIGTERM acts as it always did.
volatile std::sig_atomic_t g_sigterm_seen = 0;
extern "C" void note_sigterm(int) { g_sigterm_seen = 1; }

// While it lives, a SIGTERM is noted instead of acted upon (unless the process ignores it);
// when it ends, one noted and not yet acted upon is delivered as it came.
class SigtermDeferred {
 public:
  SigtermDeferred() {
    g_sigterm_seen = 0;
    struct sigaction sa {};
    sa.sa_handler = note_sigterm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // MPI's and HDF5's system calls go on across it
    armed_ = sigaction(SIGTERM, &sa, &old_) == 0;
    if (armed_ && !(old_.sa_flags & SA_SIGINFO) && old_.sa_handler == SIG_IGN) {
      sigaction(SIGTERM, &old_, nullptr);  // an ignored SIGTERM stays ignored
      armed_ = false;
    }
  }
  ~SigtermDeferred() {
    if (!armed_) return;
    sigaction(SIGTERM, &old_, nullptr);
    if (g_sigterm_seen) end();
  }
  SigtermDeferred(const SigtermDeferred&) = delete;
  SigtermDeferred& operator=(const SigtermDeferred&) = delete;
  bool armed() const { return armed_; }
  // Ends the process as the noted SIGTERM asked: by the action it had before, the default's
  // death by SIGTERM if that returns.
  [[noreturn]] void end() {
    std::fflush(nullptr);
    sigaction(SIGTERM, &old_, nullptr);
    raise(SIGTERM);
    std::signal(SIGTERM, SIG_DFL);
    raise(SIGTERM);
    std::_Exit(128 + SIGTERM);
  }

 private:
  bool armed_ = false;
  struct sigaction old_ {};
};

std::string processor_name() {
  char buf[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  mpi_check(MPI_Get_processor_name(buf, &len), "MPI_Get_processor_name", "worker");
  return std::string(buf, static_cast<std::size_t>(len));
}

// What a reader of the results needs to know of the machine, as this rank sees it (rank 0's
// values are recorded): /env machine.<name>. Unreadable facts say so rather than guess.
std::vector<std::pair<std::string, std::string>> machine_facts() {
  auto first_line = [](const char* path) {
    std::ifstream in(path);
    std::string line;
    return in && std::getline(in, line) ? line : std::string("unreadable (" + std::string(path) + ")");
  };
  std::string cpu = "unknown", line;
  std::ifstream info("/proc/cpuinfo");
  while (std::getline(info, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  struct utsname u {};
  const std::string kernel = uname(&u) == 0 ? std::string(u.sysname) + " " + u.release + " " + u.machine : "unknown";
  const std::int64_t memory = host_memory_bytes();  // the planner's reading of MemTotal (0: unreadable)
  const std::string mem = memory > 0 ? std::to_string(memory) : "unknown";
  // Transparent huge pages: the mode in brackets ("always [madvise] never" -> madvise), which
  // decides whether large buffers get 2 MiB pages (a GEMM's or an activation's TLB misses).
  std::string thp = first_line("/sys/kernel/mm/transparent_hugepage/enabled");
  if (const auto a = thp.find('['), b = thp.find(']'); a != std::string::npos && b != std::string::npos && b > a)
    thp = thp.substr(a + 1, b - a - 1);
  // NUMA nodes with memory ("0-1": 2): where a rank's buffers may live apart from its cores.
  std::string numa = first_line("/sys/devices/system/node/has_memory");
  if (numa.rfind("unreadable", 0) != 0) {
    long nodes = 0;
    for (const auto& range : split(numa, ',')) {
      const auto dash = range.find('-');
      nodes += dash == std::string::npos ? 1 : std::atol(range.c_str() + dash + 1) - std::atol(range.c_str()) + 1;
    }
    numa = std::to_string(nodes);
  }
  return {{"cpu_model", cpu},
          {"cpus_online", std::to_string(sysconf(_SC_NPROCESSORS_ONLN))},
          {"cpu_governor", first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")},
          {"transparent_hugepages", thp},
          {"numa_nodes", numa},
          {"memory_bytes", mem},
          {"kernel", kernel},
          {"compiler", "g++ " __VERSION__}};
}

// The ranks on this rank's host and the CPUs they may use.
struct HostShape {
  int ranks_here = 1, cpus = 1;
};

HostShape host_shape(MPI_Comm comm) {
  HostShape h;
  MPI_Comm local;
  mpi_check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local), "MPI_Comm_split_type", "worker");
  mpi_check(MPI_Comm_size(local, &h.ranks_here), "MPI_Comm_size", "worker");
  mpi_check(MPI_Comm_free(&local), "MPI_Comm_free", "worker");
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  // A rank bound to one core sees one CPU; count the host's CPUs then.
  h.cpus = std::max<int>(cpus, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  return h;
}

// How busy the machine was over a point: this rank's host's CPU time stolen (by a hypervisor)
// and this process's involuntary context switches, read at the point's start and end.
struct MachineSample {
  double steal = 0, total = 0;  // jiffies since boot, all CPUs (/proc/stat)
  long involuntary = 0;         // getrusage(RUSAGE_SELF).ru_nivcsw
};

MachineSample machine_sample() {
  MachineSample m;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double v[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // user nice system idle iowait irq softirq steal
  if (stat >> cpu && cpu == "cpu") {
    for (double& x : v) stat >> x;
    for (double x : v) m.total += x;
    m.steal = v[7];
  }
  struct rusage u {};
  if (getrusage(RUSAGE_SELF, &u) == 0) m.involuntary = u.ru_nivcsw;
  return m;
}

// The point's machine.* attributes (collective; rank 0's host for the load and clock): the load
// beyond this job's own threads (1-minute load average less ranks x threads on the host, the
// largest of any host), the share of CPU time stolen (largest host), the job's involuntary
// context switches (all ranks), the mean clock of rank 0's CPUs where /proc/cpuinfo says, and
// `machine.busy` when another CPU's worth of load or 2% of stolen time was seen.
std::vector<std::pair<std::string, Value>> machine_state(const MachineSample& a, const MachineSample& b, int ranks_here,
                                                         std::int64_t threads, MPI_Comm comm) {
  double load1 = std::nan("");
  std::ifstream("/proc/loadavg") >> load1;
  const double mine[2] = {std::isnan(load1) ? -1e300 : load1 - static_cast<double>(ranks_here * threads),
                          b.total > a.total ? (b.steal - a.steal) / (b.total - a.total) : 0};
  double worst[2] = {0, 0};
  mpi_check(MPI_Allreduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce", "worker");
  long long invol = b.involuntary - a.involuntary, all = 0;
  mpi_check(MPI_Allreduce(&invol, &all, 1, MPI_LONG_LONG, MPI_SUM, comm), "MPI_Allreduce", "worker");
  double mhz = 0;
  int cpus = 0;
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("cpu MHz", 0) == 0 && line.find(':') != std::string::npos)
      mhz += std::atof(line.c_str() + line.find(':') + 1), ++cpus;
  const bool known_load = worst[0] > -1e299;
  std::vector<std::pair<std::string, Value>> out{
      {"machine.other_load", known_load ? worst[0] : std::nan("")},
      {"machine.steal_share", worst[1]},
      {"machine.involuntary_switches", std::int64_t{all}},
      {"machine.cpu_mhz", cpus ? mhz / cpus : std::nan("")},
      {"machine.busy", std::int64_t{(known_load && worst[0] >= 1) || worst[1] >= 0.02 ? 1 : 0}}};
  return out;
}

// Whether some host runs more than `per_rank` x its ranks CPUs' worth of threads (agreed by all
// ranks): timings then measure the sharing of cores, and the report says so.
bool oversubscribed(MPI_Comm comm, const HostShape& h, std::int64_t per_rank) {
  int mine = static_cast<std::int64_t>(h.ranks_here) * per_rank > h.cpus ? 1 : 0, any = 0;
  mpi_check(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm), "MPI_Allreduce", "worker");
  return any != 0;
}

// Peak memory per point: Linux keeps a high-water mark of the resident set (VmHWM), which writing
// "5" to /proc/self/clear_refs resets to the current size. The figure is the process's, so it
// includes what the worker held before the point (libraries, the recorder's buffer).
void reset_peak_rss() {
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

long long peak_rss_bytes() {
  long long kib = -1;
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmHWM: %lld kB", &kib) == 1) break;
    std::fclose(f);
  }
  return kib < 0 ? -1 : kib * 1024;
}

// Samples held in memory before a flush: enough for every repetition of most points, small
// enough (40 B a sample, 10 MB a rank) that it never matters for memory; large batches keep
// the flush rate high (see d500-bench-store).
constexpr std::size_t kRecorderCapacity = 1 << 18;

// Checkpoints of this job's training points that earlier attempts left (by point id).
using Checkpoints = std::map<std::string, CheckpointRef>;

// This process's rank as the launcher announced it, before MPI starts (-1: not announced).
int announced_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  return -1;
}

// The newest checkpoint of each training point of the job in the run directory's results files,
// `output` (this attempt's) aside, as checkpoints_text.
std::string look_for_checkpoints(const JobSpec& spec, const std::string& spec_path, const std::string& output) {
  try {
    std::vector<std::string> ids;
    for (const auto& p : spec.points)
      if (p.level >= 2) ids.push_back(p.id);
    if (ids.empty()) return "";
    const RunLayout layout = RunLayout::of_spec(spec_path);
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& f : layout.results_files())
      if (!fs::equivalent(f, output, ec)) files.push_back(f);
    std::vector<std::string> notes;
    const Checkpoints found = find_checkpoints(files, ids, spec.nodes * spec.ranks_per_node, notes);
    for (const auto& n : notes) std::fprintf(stderr, "d500-worker: note: looking for checkpoints: %s\n", n.c_str());
    return checkpoints_text(found);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "d500-worker: note: looking for checkpoints: %s; training starts over\n", e.what());
    return "";
  }
}

// Points of this job that an earlier attempt already ended with a final outcome (store/outcome:
// complete, failed validation, backend failed), by id: the outcome and the file. A requeued job
// (same spec, a new attempt: results/<spec>.slurm-<id>.<attempt>.h5) or a job run again measures
// nothing twice. The earlier attempts are the run directory's results files named after this spec
// (<spec>.h5, <spec>.*.h5, their .prev-N copies) other than `output`, of this campaign and job,
// read contained (read_job_files_guarded: untrusted files); a file that cannot be read is
// skipped with a note (its points run). As "id\toutcome\tfile" lines.
using Finished = std::map<std::string, std::pair<Outcome, std::string>>;

std::string look_for_finished(const JobSpec& spec, const std::string& spec_path, const std::string& output) {
  try {
    const std::string stem = fs::path(spec_path).stem().string();
    std::set<std::string> ids;
    for (const auto& p : spec.points) ids.insert(p.id);
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& f : RunLayout::of_spec(spec_path).results_files())
      if (fs::path(f).filename().string().rfind(stem + ".", 0) == 0 && !fs::equivalent(f, output, ec))
        files.push_back(f);
    Finished found;
    read_job_files_guarded(files, [&](std::size_t i, const JobResult* r, const std::string& error) {
      if (!r) {
        std::fprintf(stderr, "d500-worker: note: %s; its points are not taken as done\n", error.c_str());
        return;
      }
      if (r->campaign_hash != spec.campaign_hash || r->job_id != spec.id) return;
      for (const auto& p : r->points)
        if (ids.count(p.id) && is_final(p.outcome) && !found.count(p.id)) found[p.id] = {p.outcome, files[i]};
    });
    std::string text;
    for (const auto& [id, of] : found) text += id + "\t" + outcome_name(of.first) + "\t" + of.second + "\n";
    return text;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "d500-worker: note: looking for points an earlier attempt finished: %s; every point runs\n",
                 e.what());
    return "";
  }
}

Finished parse_finished(const std::string& text) {
  Finished out;
  for (const std::string& line : split(text, '\n')) {
    const auto f = split(line, '\t');
    if (f.size() != 3) continue;
    if (auto o = parse_outcome(f[1])) out[f[0]] = {*o, f[2]};
  }
  return out;
}

// What earlier attempts of the job left: its training points' checkpoints and the points they
// finished. Before MPI starts (each results file is read first in a forked child, and fork does
// not mix with MPI or threads), with the spec read once; ranks the launcher announced as other
// than 0 leave it to rank 0, which shares the answers. D500_RERUN=1 (`d500 run --rerun`): no
// point is taken as finished.
struct EarlierAttempts {
  std::string checkpoints, finished;
};

EarlierAttempts look_at_earlier_attempts(const std::string& spec_path, const std::string& output) {
  if (announced_rank() > 0) return {};
  JobSpec spec;
  try {
    spec = read_job_spec(spec_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "d500-worker: note: looking at earlier attempts: %s; every point runs from the start\n",
                 e.what());
    return {};
  }
  const char* rerun = std::getenv("D500_RERUN");
  const bool again = rerun && std::string(rerun) == "1";
  return {look_for_checkpoints(spec, spec_path, output),
          again ? std::string() : look_for_finished(spec, spec_path, output)};
}

// Continues a training point from its checkpoint, when every rank can: the events up to it go
// into this attempt's file, so that its record holds the whole curve. Otherwise training starts
// over, and the point says why.
std::vector<std::pair<std::string, Value>> resume_point(Workload& wl, ResultWriter& out, const PointSpec& p,
                                                        const CheckpointRef& ref, int rank, MPI_Comm comm) {
  TrainingState st;
  std::string why;
  try {
    st = read_checkpoint(ref, p.id, rank);
    why = wl.why_not_resume(st);
  } catch (const std::exception& e) {
    why = e.what();
  }
  int bad = why.empty() ? 0 : 1, any = 0;
  mpi_check(MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm), "MPI_Allreduce", "worker");
  const std::string from = fs::path(ref.file).filename().string();
  if (any) {
    if (bad)
      std::fprintf(stderr, "d500-worker: point %s: not resumed from %s (step %lld): %s; training starts over\n",
                   p.id.c_str(), ref.file.c_str(), static_cast<long long>(ref.step), why.c_str());
    return {{"train.resume_refused",
             from + " (step " + std::to_string(ref.step) + "): " + (bad ? why : "refused by another rank")}};
  }
  wl.resume(st);
  out.append_events(st.events, true);
  return {{"train.resumed_from", from + ": the checkpoint after step " + std::to_string(st.step) + " (training time " +
                                     fmt_sig(ref.training_s, 4) +
                                     " s); events up to it copied from there, samples of this attempt only"}};
}

// What every point of a job shares.
struct JobRun {
  const JobSpec& spec;
  const std::string& spec_path;
  MPI_Comm comm;
  int rank = 0, size = 1;
  HostShape host;
  ResultWriter& out;
  Recorder& rec;
  const Checkpoints& checkpoints;
  int n = 0;  // points in the job
  std::int64_t flush_interval_ns = Harness::kDefaultFlushIntervalNs;
};

// How often a point's samples are made durable while it runs: D500_FLUSH_INTERVAL_S seconds of
// wall time (default 2; from 0.05 to 300, below the launcher's progress timeout, which counts on
// these flushes as the job's sign of life). Shorter loses less to a kill and costs more writes.
std::int64_t flush_interval_ns() {
  const char* e = std::getenv("D500_FLUSH_INTERVAL_S");
  if (!e || !*e) return Harness::kDefaultFlushIntervalNs;
  char* end = nullptr;
  const double s = std::strtod(e, &end);
  if (end == e || *end != '\0' || !(s >= 0.05 && s <= 300))
    throw Error("D500_FLUSH_INTERVAL_S=" + quote_value(e) + ": must be seconds from 0.05 to 300 (default 2)");
  return static_cast<std::int64_t>(s * 1e9);
}

// A progress line for the launcher (metrics/progress.hpp), from rank 0.
void progress(const JobRun& job, const std::string& line) {
  if (job.rank != 0) return;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// The job's environment record. The job's backends that live in modules are loaded here, before
// any point: their loading (LibTorch's static initialisation, CUDA's libraries) is never inside a
// point, and the versions recorded are those of the libraries this job runs. One that does not
// load fails its points at setup, with the reason (the planner refused it already where it failed
// there). A job with a point on a device backend (that loaded) records each rank's device and its
// facts.
EnvRecord job_environment(const JobSpec& spec, const std::string& spec_path, MPI_Comm comm, const HostShape& host) {
  const RunLayout run = RunLayout::of_job_spec(spec_path);
  EnvRecord env;
  env.campaign_text = read_file(run.campaign_file().string());
  env.campaign_path = run.campaign_file().string();
  env.host = processor_name();
  env.oversubscribed = oversubscribed(comm, host, 1);
  const BackendInfo* device_backend = nullptr;
  for (const PointSpec& p : spec.points) {
    const std::string& name = std::get<std::string>(p.params.at("backend"));
    const BackendInfo* b = find_backend(name);
    if (load_backend(name).empty() && b && b->built && b->rank_device) device_backend = b;
  }
  env.backend_versions = built_backend_versions();
  env.machine = machine_facts();
  if (device_backend) {
    env.device = device_backend->rank_device();
    for (auto& f : device_backend->device_facts()) env.machine.push_back(std::move(f));
  }
  return env;
}

// A point's workload made, described and validated: what the ranks agree on before anything is
// timed. A backend that throws while setting up or validating (a primitive the library cannot
// create, an operator it lacks at run time) fails this point, not the job: the ranks agree on it,
// the point is flagged with the library's message, and the job goes on. Memory that cannot be had
// is the same kind of failure, said in words with the estimate.
struct PointSetup {
  const WorkloadInfo* w = nullptr;
  const BackendInfo* b = nullptr;
  std::unique_ptr<Workload> wl;
  Validation v{std::nan(""), 0.0, ""};
  bool failed_here = false, failed_any = false;
};

// The point's attributes from its library: which file, and exactly which bytes (docs/trust.md).
void library_attributes(const PointSpec& p, ResultWriter::PointMeta& meta) {
  auto lib = p.params.find("library");
  if (lib == p.params.end()) return;
  const auto* path = std::get_if<std::string>(&lib->second);
  if (!path || path->empty()) return;
  std::error_code ec;
  const auto real = std::filesystem::canonical(*path, ec);
  meta.attributes.push_back({"library.path", ec ? *path : real.string()});
  try {
    meta.attributes.push_back({"library.sha256", sha256_file(*path)});
  } catch (const Error& e) {
    meta.attributes.push_back({"library.sha256", std::string("unreadable: ") + e.what()});
  }
}

PointSetup set_up_point(JobRun& job, const PointSpec& p, int i) {
  PointSetup s;
  const std::string wname = std::get<std::string>(p.params.at("workload"));
  const std::string bname = std::get<std::string>(p.params.at("backend"));
  s.w = builtin_workloads().find(wname);
  s.b = find_backend(bname);
  if (!s.w || !s.b || !s.b->built || !s.w->backends.count(bname))
    throw Error(job.spec_path + ": point " + p.id + " (" + p.canonical + ") is not runnable by this build of d500");
  const WorkloadInfo& w = *s.w;
  RunContext ctx{job.comm, job.rank, job.size, p.params,
                 static_cast<std::uint64_t>(std::get<std::int64_t>(p.params.at("seed")))};
  const std::int64_t estimate = w.memory_bytes ? w.memory_bytes(p.params) : -1;
  std::string backend_error;
  auto out_of_memory = [&] {
    return "out of memory: this rank could not allocate the point's data" +
           (estimate >= 0 ? " (the planner's estimate: " + fmt_bytes(estimate) + " per rank)" : std::string());
  };
  try {
    s.wl = w.backends.at(bname)(ctx);
  } catch (const std::bad_alloc&) {
    backend_error = out_of_memory();
  } catch (const std::exception& e) {
    backend_error = e.what();
  }
  // A backend whose module did not load on this node (its point failed above) says so instead.
  ResultWriter::PointMeta meta{s.wl ? s.wl->work() : Work{},
                               w.rate_unit,
                               backend_version(*s.b),
                               w.scaling_of ? w.scaling_of(p.params) : w.scaling,
                               w.scaling_note,
                               false,
                               -1,
                               {}};
  meta.threads_oversubscribed = oversubscribed(job.comm, job.host, int_param_or(p.params, "threads", 1));
  meta.memory_estimate_bytes = estimate;
  if (s.wl) {
    try {
      meta.attributes = s.wl->attributes();
    } catch (const std::exception& e) {
      backend_error = e.what();
    }
  }
  library_attributes(p, meta);
  for (auto& [k, means] : unset_meanings(w, p.params)) meta.attributes.push_back({"unset." + k, std::move(means)});
  job.out.begin_point(PointIdentity{p.id, p.canonical, p.level, p.params}, i, job.spec.warmups, job.spec.repetitions,
                      meta);
  if (s.wl) {
    try {
      s.v = s.wl->validate();
    } catch (const std::bad_alloc&) {
      backend_error = out_of_memory();
    } catch (const std::exception& e) {
      backend_error = e.what();
    }
  }
  int failed_here = backend_error.empty() ? 0 : 1, failed_any = 0;
  mpi_check(MPI_Allreduce(&failed_here, &failed_any, 1, MPI_INT, MPI_MAX, job.comm), "MPI_Allreduce", "worker");
  s.failed_here = failed_here, s.failed_any = failed_any;
  if (failed_any) {
    s.v.rel_error = std::nan("");
    s.v.method = failed_here ? "the backend failed: " + backend_error : "the backend failed on another rank";
  }
  return s;
}

// The checkpoints of a training point, the SIGTERM that ends it at its next step (armed in
// `sigterm`, which lives until the point's outcome is written), and its resume from an earlier
// attempt's checkpoint.
void arrange_checkpoints(JobRun& job, const PointSpec& p, int i, Workload& wl, Harness& h,
                         std::optional<SigtermDeferred>& sigterm) {
  h.on_checkpoint([&job, i](const TrainingState& st) {
    job.out.checkpoint(st);
    progress(job, progress_checkpoint_line(i + 1, job.n, st.step));
  });
  sigterm.emplace();
  if (sigterm->armed())
    h.on_terminate(&g_sigterm_seen, [&job, &p, &sigterm] {
      if (job.rank == 0)
        std::fprintf(stderr,
                     "d500-worker: SIGTERM during point %s: every rank flushed its samples and took a checkpoint "
                     "before its next step; ending as the signal asks (run again to resume from it)\n",
                     p.id.c_str());
      sigterm->end();
    });
  if (auto c = job.checkpoints.find(p.id); c != job.checkpoints.end()) {
    const auto said = resume_point(wl, job.out, p, c->second, job.rank, job.comm);
    job.out.point_attributes(said);
    if (said.front().first == "train.resumed_from") progress(job, progress_resumed_line(i + 1, job.n, c->second.step));
  }
}

// The timed part of a validated point: warm-ups and repetitions (or a training run's steps)
// through the harness, streamed to the results file; then what the workload says of itself.
void measure_point(JobRun& job, const PointSpec& p, int i, PointSetup& s, std::optional<SigtermDeferred>& sigterm) {
  const JobSpec& spec = job.spec;
  Workload& wl = *s.wl;
  long long flushed = 0;
  Harness h(
      job.comm, job.rec, spec.warmups, spec.repetitions, wl.work(),
      [&](std::span<const Sample> samples, bool durable) {
        job.out.append(samples, durable);
        // Tells the launcher (and tests) how much of this point is safely on disk.
        long long mine = static_cast<long long>(samples.size()), all = 0;
        mpi_check(MPI_Reduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, 0, job.comm), "MPI_Reduce", "worker");
        flushed += all;
        if (durable && flushed > 0) progress(job, progress_flushed_line(i + 1, job.n, flushed));
      },
      job.flush_interval_ns);
  const Workload::TimeToAccuracy* tta = wl.time_to_accuracy();
  if (tta) {
    job.out.set_time_to_accuracy(tta->target, tta->budget_s, tta->eval_interval_steps);
    h.on_events([&](std::span<const Event> e, bool durable) { job.out.append_events(e, durable); });
  }
  if (wl.checkpoints()) arrange_checkpoints(job, p, i, wl, h, sigterm);
  // Adaptive repetitions apply to points timed by repetitions; a training point's steps are its
  // own (it stops at its target, budget or step count).
  const bool adaptive = spec.auto_repetitions.on && !tta;
  if (adaptive) h.stop_adaptively(spec.auto_repetitions);
  // The GPU's counters around the repetitions (warm-ups included), outside them.
  const bool on_device = static_cast<bool>(s.b->device_reading);
  const nvml::Reading device_before = on_device ? s.b->device_reading() : nvml::Reading{};
  const std::int64_t measured_from = now_ns();
  wl.measure(h);
  if (on_device)
    job.out.point_attributes(device_state(device_before, s.b->device_reading(),
                                          static_cast<double>(now_ns() - measured_from) * 1e-9, job.comm));
  if (const StepTimes* st = wl.step_times()) {
    if (adaptive && st->repetitions > h.repetitions_run()) {  // preallocated for max: the rows run
      StepTimes run = *st;
      run.repetitions = h.repetitions_run();
      run.ns.resize(run.steps.size() * static_cast<std::size_t>(run.repetitions));
      job.out.step_times(run);
    } else {
      job.out.step_times(*st);
    }
  }
  auto after = wl.final_attributes();
  // A training point runs as many steps as it needs: its timed repetitions are those steps.
  if (tta) after.push_back({"repetitions", std::int64_t{std::max(0, h.trained_steps() - spec.warmups)}});
  if (adaptive) {
    after.push_back({"repetitions", std::int64_t{std::max(0, h.repetitions_run() - spec.warmups)}});
    after.push_back({"repetitions.rule", spec.auto_repetitions.rule()});
    after.push_back({"repetitions.stopped_by", std::string(stopped_by_name(h.stopped_by()))});
    after.push_back({"repetitions.ci_rel_width", h.stopped_at_width()});
  }
  job.out.point_attributes(after);
}

// One point, start to end: set up and validated, timed unless it failed, its outcome written.
void run_point(JobRun& job, const PointSpec& p, int i) {
  progress(job, progress_point_line(i + 1, job.n, p.canonical));
  set_crash_context("in point " + std::to_string(i + 1) + "/" + std::to_string(job.n) + " " + p.id);
  const std::int64_t t0 = now_ns();
  reset_peak_rss();
  const MachineSample machine_before = machine_sample();
  PointSetup s = set_up_point(job, p, i);
  const double worst = job.out.validation(s.v.rel_error, s.v.tolerance, s.v.method, s.v.step);
  Outcome outcome = Outcome::Complete;
  std::string reason;
  // Armed for a training point that checkpoints; ends with the point (its outcome written).
  std::optional<SigtermDeferred> sigterm;
  if (s.failed_any) {
    // An error of the backend, not a wrong result: its own outcome, so that reports and resumes
    // can tell a library that cannot run a point from one that computes it wrongly.
    outcome = Outcome::BackendFailed;
    reason = s.v.method;
    if (s.failed_here) std::fprintf(stderr, "d500-worker: point %s: %s\n", p.id.c_str(), s.v.method.c_str());
  } else if (!(worst <= s.v.tolerance)) {
    // Validate, then time: a wrong result is never timed.
    outcome = Outcome::FailedValidation;
    reason = "relative error " + fmt_sig(worst, 3) + " exceeds tolerance " + fmt_sig(s.v.tolerance, 3) + " (" +
             s.v.method + ")";
  } else {
    measure_point(job, p, i, s, sigterm);
  }
  const double secs = static_cast<double>(now_ns() - t0) * 1e-9;  // rank 0's is written (end_point)
  long long peak = peak_rss_bytes(), max_peak = 0;
  mpi_check(MPI_Allreduce(&peak, &max_peak, 1, MPI_LONG_LONG, MPI_MAX, job.comm), "MPI_Allreduce", "worker");
  job.out.point_attributes(machine_state(machine_before, machine_sample(), job.host.ranks_here,
                                         int_param_or(p.params, "threads", 1), job.comm));
  job.out.end_point(outcome, reason, secs, max_peak);
  progress(job, progress_done_line(i + 1, job.n, outcome, secs));
}

void run_job(const std::string& spec_path, const std::string& output, MPI_Comm comm, const Checkpoints& checkpoints,
             const Finished& finished) {
  int rank = 0, size = 1;
  mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank", "worker");
  mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size", "worker");
  const JobSpec spec = read_job_spec(spec_path);
  if (size != spec.nodes * spec.ranks_per_node)
    throw Error(spec_path + ": job " + spec.id + " wants " + std::to_string(spec.nodes * spec.ranks_per_node) +
                " ranks (" + std::to_string(spec.nodes) + " nodes x " + std::to_string(spec.ranks_per_node) +
                "), but the worker was started with " + std::to_string(size));
  const std::int64_t flush_ns = flush_interval_ns();  // before the results file: a bad value writes nothing
  const HostShape host = host_shape(comm);
  ResultWriter out(output, comm,
                   JobIdentity{spec.id, spec.campaign, spec.campaign_hash, spec.nodes, spec.ranks_per_node},
                   job_environment(spec, spec_path, comm, host));
  Recorder rec(kRecorderCapacity);
  JobRun job{spec, spec_path, comm, rank, size, host, out, rec, checkpoints, static_cast<int>(spec.points.size())};
  job.flush_interval_ns = flush_ns;
  for (int i = 0; i < job.n; ++i) {
    const PointSpec& p = spec.points[static_cast<std::size_t>(i)];
    if (auto done = finished.find(p.id); done != finished.end())
      progress(job, progress_skipped_line(i + 1, job.n, done->second.first, done->second.second));
    else
      run_point(job, p, i);
  }
  set_crash_context("after the job's last point, writing its end");
  out.finish("complete");
}

}  // namespace

// The point's device.* state (collective: every rank of a job whose point runs on a device
// backend calls it, with NVML's readings of its own GPU before and after the measured
// repetitions, `seconds` apart): the energy the ranks' GPUs used (summed over ranks: a GPU that
// two ranks share counts twice), the longest time any GPU was held back by its power or thermal
// limit, the lowest SM clock at the end and the clock-event reasons any GPU gave there; and
// device.throttled when some GPU was held back for 1% of the span or a slowdown reason was
// standing at its end. Nothing when no rank could read NVML (the job's /env says why).
std::vector<std::pair<std::string, Value>> device_state(const nvml::Reading& a, const nvml::Reading& b, double seconds,
                                                        MPI_Comm comm) {
  const double nan = std::nan("");
  const bool read = a.why.empty() && b.why.empty();
  // NVML's energy counter advances in steps, not continuously: on the H100 that d500 was first
  // run on, the repetitions of a small kernel (a few ms in all) often read 0 J. A counter that did
  // not advance over the span states no energy (NaN, and device.energy_note says why), never 0 J.
  const bool counted = read && !std::isnan(a.energy_j) && !std::isnan(b.energy_j);
  const bool stalled = counted && b.energy_j <= a.energy_j;
  const double energy = counted ? (stalled ? 0.0 : b.energy_j - a.energy_j) : nan;
  const double capped = read ? (b.power_capped_s - a.power_capped_s) + (b.thermal_capped_s - a.thermal_capped_s) : nan;
  // NaN would poison MAX: -1 and -inf stand for "not read" there (the lowest clock is the
  // largest negated one); the count of readers comes with the energy's sum.
  const double mine_max[2] = {std::isnan(capped) ? -1 : capped, read && !std::isnan(b.sm_clock_mhz)
                                                                    ? -b.sm_clock_mhz
                                                                    : -std::numeric_limits<double>::infinity()};
  const double mine_sum[3] = {energy, read ? 1.0 : 0.0, stalled ? 1.0 : 0.0};
  double worst[2] = {0, 0}, sums[3] = {0, 0, 0};
  unsigned long long reasons = read ? b.clock_event_reasons : 0, any_reasons = 0;
  mpi_check(MPI_Allreduce(mine_max, worst, 2, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce", "worker");
  mpi_check(MPI_Allreduce(mine_sum, sums, 3, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce", "worker");
  mpi_check(MPI_Allreduce(&reasons, &any_reasons, 1, MPI_UNSIGNED_LONG_LONG, MPI_BOR, comm), "MPI_Allreduce", "worker");
  const auto readers = static_cast<int>(sums[1]);
  if (readers == 0) return {};
  int size = 1;
  MPI_Comm_size(comm, &size);
  const bool held = (worst[0] >= 0 && worst[0] >= 0.01 * seconds) || (any_reasons & nvml::kSlowdownReasons) != 0;
  const auto stalled_ranks = static_cast<int>(sums[2]);
  std::vector<std::pair<std::string, Value>> out{
      {"device.energy_j", readers == size && stalled_ranks == 0 ? sums[0] : nan},
      {"device.capped_s", worst[0] >= 0 ? worst[0] : nan},
      {"device.span_s", seconds},
      {"device.sm_clock_mhz_end", std::isinf(worst[1]) ? nan : -worst[1]},
      {"device.clock_event_reasons", nvml::reasons_text(any_reasons)},
      {"device.readers", std::int64_t{readers}},
      {"device.throttled", std::int64_t{held ? 1 : 0}}};
  if (stalled_ranks > 0)
    out.push_back({"device.energy_note",
                   "NVML's energy counter did not advance over the " + fmt_sig(seconds * 1e3, 3) + " ms span on " +
                       std::to_string(stalled_ranks) + " of " + std::to_string(size) +
                       " rank(s): the span is shorter than the counter's update interval, so no energy is stated"});
  return out;
}

std::string out_of_memory_text(const std::string& doing, std::int64_t mapped, std::int64_t limit) {
  std::string s = "out of memory (std::bad_alloc)" + (doing.empty() ? std::string() : " " + doing) +
                  ": this rank maps " + (mapped > 0 ? fmt_bytes(mapped) : std::string("an unknown amount"));
  if (limit > 0)
    return s + " under an address-space limit (ulimit -v) of " + fmt_bytes(limit) +
           ": raise the limit or lift it (ulimit -v unlimited), or run fewer ranks or threads per node";
  return s +
         " and has no address-space limit: the node's memory, or the job's share of it (Slurm's --mem), "
         "is used up; compare the planner's estimate (d500 plan prints it) with what the node has";
}

namespace {

// Who this process is before MPI says its rank: the launcher's task number, and the host as
// gethostname(2) says it (MPI_Get_processor_name may not be called before MPI_Init).
std::string task_before_mpi() {
  std::string task = "a task";
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK"})
    if (const char* s = std::getenv(v); s && *s) {
      task = std::string("task ") + s;
      break;
    }
  char host[256] = {0};
  return task + " on " + (gethostname(host, sizeof host - 1) == 0 && host[0] ? host : "an unnamed host");
}

}  // namespace

int worker_main(int argc, char** argv) {
  // The crash note from the start: a rank that dies inside MPI_Init (Open MPI's TCP transport
  // once took a message before its receiver was ready, in a CI run) is named as such, not
  // mistaken for d500's code. MPI_Init then installs no backtrace printer of its own; the
  // note prints the backtrace.
  install_crash_note("d500-worker: " + task_before_mpi());
  set_crash_context("before MPI_Init, looking at the job's earlier attempts");
  hold_rank_lock();  // a rank that outlives its runner and mpirun stays visible to the next runner
  const EarlierAttempts earlier = argc == 3 ? look_at_earlier_attempts(argv[1], argv[2]) : EarlierAttempts{};
  set_crash_context(kInsideMpiInit);
  MPI_Init(&argc, &argv);
  int rank = 0;
  // MPI failures come back as codes, which mpi_check turns into errors that name the call.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string where = "rank " + std::to_string(rank) + " on " + processor_name();
  h5::init(where);
  install_crash_note("d500-worker: " + where);  // installed again only where MPI replaced it
  set_crash_context("before the job's first point");
  if (argc != 3) {
    if (rank == 0) std::fprintf(stderr, "usage: d500-worker JOB_SPEC.toml OUTPUT.h5\n");
    MPI_Finalize();
    return 2;
  }
  try {
    // Rank 0's answer, on every rank (the lookup ran before MPI_Init).
    run_job(argv[1], argv[2], MPI_COMM_WORLD, parse_checkpoints_text(bcast_string(earlier.checkpoints, MPI_COMM_WORLD)),
            parse_finished(bcast_string(earlier.finished, MPI_COMM_WORLD)));
  } catch (const std::exception& e) {
    const bool memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
    std::fprintf(
        stderr, "d500-worker: error: %s: %s\n", where.c_str(),
        memory ? out_of_memory_text(crash_context(), mapped_bytes(), address_space_limit()).c_str() : e.what());
    std::fflush(stderr);
    // Other ranks may be inside a collective; only an abort ends them. What was flushed stays.
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}

}  // namespace d500
