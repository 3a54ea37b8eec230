#pragma once
// Writes one job's results file. Two modes, one layout:
//  - parallel: every rank writes its own samples into the shared file through parallel HDF5
//    (MPI-IO), each rank's rows placed by an MPI_Exscan offset;
//  - gather: samples are gathered to rank 0, which alone opens and writes the file (for an HDF5
//    built without MPI, or a file system where MPI-IO misbehaves).
// All calls are collective: every rank calls them in the same order with the same arguments.
#include <mpi.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/value.hpp"
#include "metrics/metrics.hpp"
#include "metrics/outcome.hpp"
#include "store/h5.hpp"

namespace d500 {

// What the file says about the job and each point: the store's own view of the job spec
// (plan/jobspec.hpp), so that the store depends on nothing above it.
struct JobIdentity {
  std::string id, campaign, campaign_hash;
  int nodes = 1, ranks_per_node = 1;
};
struct PointIdentity {
  std::string id, canonical;
  int level = 0;
  Params params;
};

struct EnvRecord {
  std::string campaign_text;
  std::string campaign_path;
  std::string host;             // this rank's host (differs per rank; gathered by the writer)
  bool oversubscribed = false;  // some host runs more ranks than it has CPUs (same on all ranks)
  // (backend, library version) of every backend of the build, recorded as /env version.<name>;
  // rank 0's values are written.
  std::vector<std::pair<std::string, std::string>> backend_versions;
  // Facts of the machine as rank 0 sees it (CPU model, CPUs, governor, memory, kernel, compiler),
  // recorded as /env machine.<name>.
  std::vector<std::pair<std::string, std::string>> machine;
  // This rank's device in words (a job with points on a device backend; "" otherwise, on every
  // rank alike), recorded per rank as /env/devices: the rank -> device map.
  std::string device = {};
};

enum class StoreMode { Parallel, Gather };
// Parallel when HDF5 was built with MPI, unless D500_STORE=gather asks otherwise.
StoreMode default_store_mode();
const char* store_mode_name(StoreMode m);

class ResultWriter {
 public:
  ResultWriter(const std::string& path, MPI_Comm comm, const JobIdentity& spec, const EnvRecord& env,
               StoreMode mode = default_store_mode());
  ~ResultWriter();

  struct PointMeta {
    Work work;
    std::string rate_unit, backend_version, scaling, scaling_note;
    bool threads_oversubscribed = false;      // ranks x threads beyond some host's CPUs (same on all ranks)
    std::int64_t memory_estimate_bytes = -1;  // the planner's estimate per rank; < 0: none
    // Further facts of the point (level 1: network.*, executor, memory.*); rank 0's are written.
    std::vector<std::pair<std::string, Value>> attributes;
  };
  void begin_point(const PointIdentity& p, int index, int warmups, int repetitions, const PointMeta& meta);
  // Collective; each rank passes its own samples (any number, zero included). `durable`
  // also flushes HDF5's metadata and MPI-IO's buffers to the file, so that a job killed after
  // it returns keeps these samples; without it they reach the file, but may not survive a kill.
  void append(std::span<const Sample> samples, bool durable = true);
  // Collective; each rank passes its own training events (levels 2 and 3). The first call of
  // a point creates its `events` dataset; `tta` gives the target accuracy and budget.
  void append_events(std::span<const Event> events, bool durable = true);
  void set_time_to_accuracy(double target, double budget_s, std::int64_t eval_interval_steps);
  // Collective: further facts of the running point, known after it ran (level 2: the steps run,
  // why training stopped); rank 0's are written, covered by the point's checksum.
  void point_attributes(const std::vector<std::pair<std::string, Value>>& attributes);
  // Collective; each rank passes its own durations of the same steps (level 1: d500's executor):
  // the `steps` table (rank 0's) and every rank's `step_times` rows.
  void step_times(const StepTimes& t);
  // Collective; each rank passes its own training state (levels 2, 3): written into the
  // running point's `checkpoint` group (store/checkpoint.hpp), in the slot that does not hold
  // the last complete checkpoint, flushed, then named the newest. Durable when it returns.
  void checkpoint(const TrainingState& state);
  // Collective; `rel_error` is this rank's. Returns the worst rank's error.
  // A network's step also says what decided it (metrics.hpp): the worst rank's is written
  // (validation.decisive, .decisive_error, .decisive_allowed, .tensors, .caught_2pct), none where
  // its tensors is 0.
  double validation(double rel_error, double tolerance, const std::string& method, const StepVerdict& step = {});
  // Collective. peak_rss_bytes: the largest peak resident set of any rank during the point; < 0:
  // unknown. Rank 0's seconds and peak are written (the worker agrees them first).
  void end_point(Outcome outcome, const std::string& reason, double seconds, std::int64_t peak_rss_bytes = -1);
  // Marks the file complete and closes it.
  void finish(const std::string& status);

 private:
  // An extendible dataset of records appended by all ranks.
  struct Stream {
    h5::Handle dset, mem_type, file_type;
    hsize_t rows = 0;
    bool open = false;
    std::vector<char> gathered;            // gather mode, rank 0
    std::vector<char> packed, background;  // rows in the file's layout, and HDF5's conversion buffer
  };
  void open_stream(Stream& s, const char* name, h5::Handle mem_type, std::size_t expected_rows);
  void append_rows(Stream& s, const void* data, std::size_t count, std::size_t elem_size, bool durable);
  // Collective and agreed: H5Fflush on every writing rank, then agree() on its outcome.
  void flush();
  // Every rank says whether its part of `step` failed (`mine` is its error, "" if none); if any
  // did, all throw -- the failing ranks their own error, the others one naming the step -- so
  // that no rank goes on into a collective call the others never reach (a full disk fails on
  // one rank and hung the job). A failing rank waits at most agree_timeout_ns_ for the others,
  // then aborts the job: one stuck inside a collective HDF5 call would never arrive.
  void agree(const std::string& mine, const char* step);
  template <class F>
  void step(const char* name, F&& f) {
    watch(name);
    std::string err;
    try {
      f();
    } catch (const std::exception& e) {
      err = e.what();
    }
    agree(err, name);
    watch(nullptr);
  }
  // The watchdog: a step (named) must end within the store timeout, else this rank is stuck
  // inside a collective HDF5/MPI-IO call that other ranks left (seen on a full disk, inside
  // H5Dset_extent's chunk allocation): the watchdog thread says so and ends the process, and
  // mpirun ends the job. nullptr: no step is running.
  void watch(const char* step) { watchdog_.watch(step); }

  // Sleeps on a condition variable (no periodic wake-ups near timed code) until a step's
  // deadline, a new step, or its destruction, which stops and joins the thread (also when the
  // writer's constructor throws).
  class Watchdog {
   public:
    void start(int rank, std::string path, std::int64_t timeout_ns);
    void watch(const char* step);
    ~Watchdog();

   private:
    void run();
    // Beyond the agreement's own wait: a tenth of it, 1 to 10 s.
    std::int64_t margin_ns() const { return std::clamp<std::int64_t>(timeout_ns_ / 10, 1'000'000'000, 10'000'000'000); }
    std::mutex mutex_;
    std::condition_variable cv_;
    std::int64_t deadline_ns_ = 0;  // 0: no step running
    const char* step_ = nullptr;
    bool stop_ = false;
    int rank_ = 0;
    std::string path_;
    std::int64_t timeout_ns_ = 0;
    std::thread thread_;
  };
  std::string what() const;
  // Rank 0's attributes, on every rank, and `ranks_differ` where a rank's own differ (collective).
  std::vector<std::pair<std::string, Value>> rank0_attributes(const std::vector<std::pair<std::string, Value>>& mine);
  // Adds the ranks' differences (each rank's own text, "" where it agrees) to ranks_differ_, in
  // rank order (collective); whether there were any.
  bool note_differences(const std::string& mine);
  std::string ranks_differ_;  // this point's differences so far
  bool writes() const { return mode_ == StoreMode::Parallel || rank_ == 0; }
  // Writes one element per rank into a new 1-D dataset (`type` in memory and file).
  void per_rank_dataset(hid_t parent, const char* name, hid_t type, const void* mine, std::size_t elem_size);
  void attr(hid_t obj, const std::string& name, const Value& v) {
    if (!writes()) return;
    h5::write_attr(obj, name, v);
    // What the point's checksum covers, as it will read back (booleans are stored as 0/1).
    if (obj == point_.get())
      point_attrs_[name] = std::holds_alternative<bool>(v) ? Value{std::int64_t{std::get<bool>(v) ? 1 : 0}} : v;
  }

  std::string path_;
  MPI_Comm comm_;
  StoreMode mode_;
  int rank_ = 0, size_ = 1;
  h5::Handle file_, point_, dxpl_;
  Stream samples_, events_, steps_, step_times_;
  struct Checkpoints {
    h5::Handle group, state, params, opt;
    hsize_t opt_width = 0;
    int slot = -1;  // the newest complete slot
    std::int64_t count = 0;
  } ckpt_;
  std::string point_id_;
  std::map<std::string, Value> point_attrs_;  // the running point's attributes, for its checksum
  bool failed_ = false;
  // How long a step may take (D500_STORE_TIMEOUT_S, default 300 s): the agreement's wait on a
  // failing rank, and the watchdog's limit (the same plus a tenth, 1 to 10 s).
  std::int64_t timeout_ns_ = 300'000'000'000;
  Watchdog watchdog_;
};

}  // namespace d500
