#include "store/writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "common/error.hpp"
#include "common/mpi_check.hpp"
#include "common/text.hpp"
#include "d500/version.hpp"
#include "store/liveness.hpp"
#include "store/schema.hpp"

namespace d500 {

namespace {
// Environment variables that change performance; recorded when set.
// A list written as it reads best; clang-format would put one entry a line.
// clang-format off
const char* kPerfEnv[] = {"OMP_NUM_THREADS",      "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                          "CUDA_VISIBLE_DEVICES", "OMP_PROC_BIND",        "OMP_PLACES",
                          "SLURM_JOB_ID",         "SLURM_ARRAY_JOB_ID",   "SLURM_ARRAY_TASK_ID",
                          "SLURM_JOB_NODELIST",   "SLURM_CPUS_PER_TASK",  "OMPI_MCA_btl",
                          "UCX_TLS",              "NCCL_ALGO",            "NCCL_PROTO",
                          "SLURM_HINT",           "SLURM_THREADS_PER_CORE", "SLURM_NTASKS_PER_NODE",
                          "SLURM_CPU_BIND",       "SLURM_DISTRIBUTION"};
// clang-format on
constexpr hsize_t kChunkRows = 8192;
constexpr std::size_t kHostLen = 256;

// Rank 0's value, on every rank.
Value bcast_value(const Value& v, MPI_Comm comm) {
  int kind = static_cast<int>(v.index());
  mpi_check(MPI_Bcast(&kind, 1, MPI_INT, 0, comm), "MPI_Bcast", "an attribute value");
  switch (kind) {
    case 0: {
      long long x = std::holds_alternative<std::int64_t>(v) ? std::get<std::int64_t>(v) : 0;
      mpi_check(MPI_Bcast(&x, 1, MPI_LONG_LONG, 0, comm), "MPI_Bcast", "an attribute value");
      return Value{static_cast<std::int64_t>(x)};
    }
    case 1: {
      double x = std::holds_alternative<double>(v) ? std::get<double>(v) : 0;
      mpi_check(MPI_Bcast(&x, 1, MPI_DOUBLE, 0, comm), "MPI_Bcast", "an attribute value");
      return Value{x};
    }
    case 2: {
      int x = std::holds_alternative<bool>(v) && std::get<bool>(v) ? 1 : 0;
      mpi_check(MPI_Bcast(&x, 1, MPI_INT, 0, comm), "MPI_Bcast", "an attribute value");
      return Value{x != 0};
    }
    default: return Value{bcast_string(std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : "", comm)};
  }
}

template <std::size_t N>
void put(char (&dst)[N], const std::string& s) {
  std::memset(dst, 0, N);
  std::memcpy(dst, s.data(), std::min(N, s.size()));
}
}  // namespace

StoreMode default_store_mode() {
#ifdef H5_HAVE_PARALLEL
  const char* env = std::getenv("D500_STORE");
  if (env && std::string(env) == "gather") return StoreMode::Gather;
  return StoreMode::Parallel;
#else
  return StoreMode::Gather;
#endif
}

const char* store_mode_name(StoreMode m) { return m == StoreMode::Parallel ? "parallel" : "gather"; }

std::string ResultWriter::what() const { return path_ + (point_id_.empty() ? "" : ":/points/" + point_id_); }

ResultWriter::ResultWriter(const std::string& path, MPI_Comm comm, const JobIdentity& spec, const EnvRecord& env,
                           StoreMode mode)
    : path_(path), comm_(comm), mode_(mode) {
  mpi_check(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank", path_);
  mpi_check(MPI_Comm_size(comm, &size_), "MPI_Comm_size", path_);
  if (const char* t = std::getenv("D500_STORE_TIMEOUT_S"); t && std::atoll(t) > 0)
    timeout_ns_ = std::atoll(t) * 1'000'000'000LL;
  watchdog_.start(rank_, path_, timeout_ns_);
  step("creating the results file", [&] {
    if (!writes()) return;
    h5::Handle fapl(h5::check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate", path), H5Pclose);
    if (mode_ == StoreMode::Parallel) {
#ifdef H5_HAVE_PARALLEL
      h5::check(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL), "H5Pset_fapl_mpio", path);
      h5::check(H5Pset_all_coll_metadata_ops(fapl, true), "H5Pset_all_coll_metadata_ops", path);
      h5::check(H5Pset_coll_metadata_write(fapl, true), "H5Pset_coll_metadata_write", path);
#endif
    }
    // H5F_ACC_EXCL: an existing results file is never overwritten; the launcher moves it aside.
    file_ = h5::checked(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl), H5Fclose, "H5Fcreate", path);
    dxpl_ = h5::checked(H5Pcreate(H5P_DATASET_XFER), H5Pclose, "H5Pcreate", path);
#ifdef H5_HAVE_PARALLEL
    if (mode_ == StoreMode::Parallel)
      h5::check(H5Pset_dxpl_mpio(dxpl_, H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio", path);
#endif
  });

  attr(file_, "schema", std::string(schema::kName));
  attr(file_, "schema_version", std::int64_t{schema::kVersion});
  attr(file_, "status", std::string("running"));
  attr(file_, "job_id", spec.id);
  attr(file_, "campaign", spec.campaign);
  attr(file_, "campaign_hash", spec.campaign_hash);
  attr(file_, "campaign_path", env.campaign_path);
  attr(file_, "nodes", std::int64_t{spec.nodes});
  attr(file_, "ranks_per_node", std::int64_t{spec.ranks_per_node});
  attr(file_, "ranks", std::int64_t{size_});
  attr(file_, "d500_version", std::string(kVersion));
  attr(file_, "d500_commit", std::string(kGitCommit));
  attr(file_, "created_utc", bcast_string(rank_ == 0 ? utc_now_iso8601() : "", comm_));
  // Rank 0's process, so that a reader on its machine can tell a dead job's file from a running one's.
  attr(file_, "writer", bcast_string(rank_ == 0 ? writer_identity() : "", comm_));
  attr(file_, "store_mode", std::string(store_mode_name(mode_)));
  attr(file_, "oversubscribed", std::int64_t{env.oversubscribed ? 1 : 0});
  attr(file_, "timer", std::string("std::chrono::steady_clock (CLOCK_MONOTONIC), ns, per rank"));
  attr(file_, "sync",
       std::string("MPI_Allreduce (MAX of int64 values: the durable-flush decision; in training also the stop "
                   "and checkpoint decisions; with adaptive repetitions also whether the point's time is up "
                   "and the previous repetition's time) before every repetition, as a barrier"));
  attr(file_, "phase_names", phase_names_csv());

  if (writes()) {  // The campaign text, byte for byte, as a scalar fixed-length string dataset.
    std::size_t n = std::max<std::size_t>(1, env.campaign_text.size());
    h5::Handle t(h5::check(H5Tcopy(H5T_C_S1), "H5Tcopy", path), H5Tclose);
    h5::check(H5Tset_size(t, n), "H5Tset_size", path);
    h5::Handle space(h5::check(H5Screate(H5S_SCALAR), "H5Screate", path), H5Sclose);
    h5::Handle d(h5::check(H5Dcreate2(file_, "campaign_toml", t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                           "H5Dcreate2", path + ":/campaign_toml"),
                 H5Dclose);
    std::string text = env.campaign_text;
    text.resize(n, '\0');
    h5::check(H5Dwrite(d, t, H5S_ALL, H5S_ALL, dxpl_, text.data()), "H5Dwrite", path + ":/campaign_toml");
  }

  h5::Handle envg;
  if (writes())
    envg = h5::checked(H5Gcreate2(file_, "env", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "H5Gcreate2",
                       path + ":/env");
  // Rank 0's (name, value) lists, as <prefix><name>: every rank must write the same attributes.
  auto rank0_list = [&](const std::string& prefix, const std::vector<std::pair<std::string, std::string>>& list) {
    std::string names;
    for (const auto& [name, value] : list) names += name + "\n";
    names = bcast_string(names, comm_);
    std::size_t i = 0;
    for (std::size_t at = 0, nl; (nl = names.find('\n', at)) != std::string::npos; at = nl + 1, ++i) {
      const std::string mine = i < list.size() ? list[i].second : "";
      attr(envg, prefix + names.substr(at, nl - at), bcast_string(mine, comm_));
    }
  };
  rank0_list("version.", env.backend_versions);
  rank0_list("machine.", env.machine);
  unsigned maj, min, rel;
  H5get_libversion(&maj, &min, &rel);
  attr(envg, "version.hdf5", std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel));
  // Environment as rank 0 sees it; per-rank differences are not recorded.
  for (const char* name : kPerfEnv) {
    const char* v = rank_ == 0 ? std::getenv(name) : nullptr;
    std::string value = bcast_string(v ? std::string("=") + v : "", comm_);
    if (!value.empty()) attr(envg, std::string("env.") + name, value.substr(1));
  }
  {  // Host of each rank.
    h5::Handle t(h5::check(H5Tcopy(H5T_C_S1), "H5Tcopy", path), H5Tclose);
    h5::check(H5Tset_size(t, kHostLen), "H5Tset_size", path);
    std::vector<char> host(kHostLen, 0);
    std::snprintf(host.data(), kHostLen, "%s", env.host.c_str());
    per_rank_dataset(envg, "hosts", t, host.data(), kHostLen);
    if (!env.device.empty()) {  // the same on every rank: a device job's text is never empty
      std::vector<char> device(kHostLen, 0);
      std::snprintf(device.data(), kHostLen, "%s", env.device.c_str());
      per_rank_dataset(envg, "devices", t, device.data(), kHostLen);
    }
  }
  if (writes())
    h5::Handle(
        h5::check(H5Gcreate2(file_, "points", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "H5Gcreate2", path + ":/points"),
        H5Gclose);
  flush();
}

void ResultWriter::Watchdog::start(int rank, std::string path, std::int64_t timeout_ns) {
  rank_ = rank;
  path_ = std::move(path);
  timeout_ns_ = timeout_ns;
  thread_ = std::thread([this] { run(); });
}

void ResultWriter::Watchdog::watch(const char* step) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    step_ = step;
    deadline_ns_ = step ? now_ns() + timeout_ns_ + margin_ns() : 0;
  }
  cv_.notify_one();
}

ResultWriter::Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ResultWriter::Watchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (deadline_ns_ == 0) {
      cv_.wait(lock);
      continue;
    }
    const std::int64_t deadline = deadline_ns_;
    if (now_ns() > deadline) {
      std::fprintf(stderr,
                   "d500-worker: error: rank %d: %s: %s did not end within %lld s: this rank is stuck in a "
                   "collective HDF5/MPI-IO call that other ranks left (a full disk or a failed file system does "
                   "this); ending the job. The file keeps what its last durable flush wrote.\n",
                   rank_, path_.c_str(), step_ ? step_ : "a store operation",
                   static_cast<long long>((timeout_ns_ + margin_ns()) / 1'000'000'000LL));
      std::fflush(stderr);
      _exit(3);  // from this thread: the main one is blocked; mpirun ends the other ranks
    }
    cv_.wait_for(lock, std::chrono::nanoseconds(deadline - now_ns() + 1'000'000));
  }
}

ResultWriter::~ResultWriter() {
  if (!failed_) return;
  // After an agreed failure the ranks are no longer in step inside HDF5 (a full disk fails the
  // flush on some ranks only), and closing the file is collective: give the handles up instead.
  // The job ends with the error; the file keeps what its last durable flush wrote.
  for (Stream* s : {&samples_, &events_, &steps_, &step_times_})
    s->dset.abandon(), s->mem_type.abandon(), s->file_type.abandon();
  for (h5::Handle* h : {&ckpt_.group, &ckpt_.state, &ckpt_.params, &ckpt_.opt}) h->abandon();
  point_.abandon();
  dxpl_.abandon();
  file_.abandon();
}

void ResultWriter::flush() {
  step("flushing the file", [&] {
    if (writes()) h5::check(H5Fflush(file_, H5F_SCOPE_GLOBAL), "H5Fflush", path_);
  });
}

void ResultWriter::agree(const std::string& mine, const char* step) {
  int bad = mine.empty() ? 0 : 1, any = 0;
  MPI_Request req;
  mpi_check(MPI_Iallreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm_, &req), "MPI_Iallreduce", path_);
  if (!bad) {
    mpi_check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait", path_);
  } else {
    // A rank that failed waits for the others a bounded time: one still inside a collective
    // HDF5 call that needs this rank would never arrive, and a job must end, not hang.
    const std::int64_t deadline = now_ns() + timeout_ns_;
    for (int done = 0;;) {
      mpi_check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test", path_);
      if (done) break;
      if (now_ns() > deadline) {
        std::fprintf(stderr,
                     "d500-worker: error: rank %d: %s: %s; the other ranks did not reach the agreement on it "
                     "within %lld s (stuck in a collective call): ending the job\n",
                     rank_, step, mine.c_str(), static_cast<long long>(timeout_ns_ / 1000000000));
        std::fflush(stderr);
        MPI_Abort(comm_, 1);
      }
      usleep(1000);
    }
  }
  if (any) {
    failed_ = true;
    throw Error(bad ? mine : path_ + ": " + step + " failed on another rank (its message is in the job's log)");
  }
}

void ResultWriter::per_rank_dataset(hid_t parent, const char* name, hid_t type, const void* mine,
                                    std::size_t elem_size) {
  hsize_t dims[1] = {static_cast<hsize_t>(size_)};
  std::vector<char> all;
  if (mode_ == StoreMode::Gather) {
    if (rank_ == 0) all.resize(elem_size * static_cast<std::size_t>(size_));
    mpi_check(MPI_Gather(mine, static_cast<int>(elem_size), MPI_BYTE, all.data(), static_cast<int>(elem_size), MPI_BYTE,
                         0, comm_),
              "MPI_Gather", path_);
    if (rank_ != 0) return;
  }
  const std::string w = path_ + ": dataset " + name;
  h5::Handle space(h5::check(H5Screate_simple(1, dims, nullptr), "H5Screate_simple", w), H5Sclose);
  h5::Handle d(h5::check(H5Dcreate2(parent, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "H5Dcreate2", w),
               H5Dclose);
  if (mode_ == StoreMode::Gather) {
    h5::check(H5Dwrite(d, type, H5S_ALL, H5S_ALL, dxpl_, all.data()), "H5Dwrite", w);
    return;
  }
  hsize_t start[1] = {static_cast<hsize_t>(rank_)}, count[1] = {1};
  h5::check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr), "H5Sselect_hyperslab", w);
  h5::Handle mem(h5::check(H5Screate_simple(1, count, nullptr), "H5Screate_simple", w), H5Sclose);
  h5::check(H5Dwrite(d, type, mem, space, dxpl_, mine), "H5Dwrite", w);
}

std::vector<std::pair<std::string, Value>> ResultWriter::rank0_attributes(
    const std::vector<std::pair<std::string, Value>>& mine_list) {
  // Attribute values must be equal on every rank: rank 0's names and values.
  std::vector<std::pair<std::string, Value>> out;
  long long n = static_cast<long long>(mine_list.size());
  mpi_check(MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, comm_), "MPI_Bcast", path_);
  for (long long i = 0; i < n; ++i) {
    const bool mine = static_cast<std::size_t>(i) < mine_list.size();
    const std::string name = bcast_string(mine ? mine_list[static_cast<std::size_t>(i)].first : "", comm_);
    out.push_back(
        {name, bcast_value(mine ? mine_list[static_cast<std::size_t>(i)].second : Value{std::string()}, comm_)});
  }
  // A rank whose own value of a string, integer or boolean attribute is not rank 0's (cuDNN's
  // find may choose another algorithm on another GPU) is named, with its value, in the point's
  // `ranks_differ`; a real number is a measurement, and rank 0's is the one written.
  std::string differ;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto& [name, v0] = out[i];
    if (std::holds_alternative<double>(v0)) continue;
    const bool have = i < mine_list.size() && mine_list[i].first == name;
    if (have && mine_list[i].second == v0) continue;
    differ += (differ.empty() ? "" : "; ") + name + ": rank " + std::to_string(rank_) + " has " +
              (have ? canonical(mine_list[i].second) : "none");
  }
  if (note_differences(differ)) out.push_back({"ranks_differ", ranks_differ_});
  return out;
}

bool ResultWriter::note_differences(const std::string& mine) {
  // Every rank's differences, joined on rank 0 in rank order, then on every rank.
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(size_)), at(static_cast<std::size_t>(size_));
  mpi_check(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm_), "MPI_Gather", path_);
  int total = 0;
  for (std::size_t r = 0; r < lens.size(); ++r) at[r] = total, total += lens[r];
  std::string all(rank_ == 0 ? static_cast<std::size_t>(total) : 0, '\0');
  mpi_check(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), at.data(), MPI_CHAR, 0, comm_),
            "MPI_Gatherv", path_);
  std::string joined;
  for (std::size_t r = 0; rank_ == 0 && r < lens.size(); ++r)
    if (lens[r] > 0)
      joined +=
          (joined.empty() ? "" : "; ") + all.substr(static_cast<std::size_t>(at[r]), static_cast<std::size_t>(lens[r]));
  joined = bcast_string(joined, comm_);
  if (joined.empty()) return false;
  ranks_differ_ += (ranks_differ_.empty() ? "" : "; ") + joined;
  return true;
}

void ResultWriter::point_attributes(const std::vector<std::pair<std::string, Value>>& attributes) {
  const auto agreed = rank0_attributes(attributes);
  step("writing point attributes", [&] {
    for (const auto& [k, v] : agreed) attr(point_, k, v);
  });
}

void ResultWriter::begin_point(const PointIdentity& p, int index, int warmups, int repetitions, const PointMeta& meta) {
  point_id_ = p.id;
  point_attrs_.clear();
  ranks_differ_.clear();
  const std::string backend_version = bcast_string(meta.backend_version, comm_);
  const auto extra = rank0_attributes(meta.attributes);
  step("starting a point", [&] {
    if (writes())
      point_ = h5::checked(H5Gcreate2(file_, ("/points/" + p.id).c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                           H5Gclose, "H5Gcreate2", what());
    attr(point_, "canonical", p.canonical);
    attr(point_, "index", std::int64_t{index});
    attr(point_, "level", std::int64_t{p.level});
    attr(point_, "warmups", std::int64_t{warmups});
    attr(point_, "repetitions", std::int64_t{repetitions});
    attr(point_, "work_flops", meta.work.flops);
    attr(point_, "work_bytes", meta.work.bytes);
    attr(point_, "rate_unit", meta.rate_unit);
    attr(point_, "backend_version", backend_version);
    attr(point_, "scaling", meta.scaling);
    attr(point_, "scaling_note", meta.scaling_note);
    attr(point_, "threads_oversubscribed", std::int64_t{meta.threads_oversubscribed ? 1 : 0});
    if (meta.memory_estimate_bytes >= 0) attr(point_, "memory_estimate_bytes", meta.memory_estimate_bytes);
    if (meta.work.items > 0) attr(point_, "work_items", meta.work.items);
    attr(point_, "status", std::string(file_status(Outcome::Incomplete)));
    attr(point_, "status_reason", std::string("the job ended while this point was running"));
    for (const auto& [k, v] : p.params) attr(point_, "param." + k, v);
    for (const auto& [k, v] : extra) attr(point_, k, v);
    open_stream(samples_, "samples", h5::sample_mem_type(),
                static_cast<std::size_t>(warmups + repetitions) * static_cast<std::size_t>(size_));
  });
  flush();
}

void ResultWriter::open_stream(Stream& s, const char* name, h5::Handle mem_type, std::size_t expected_rows) {
  s.rows = 0;
  s.open = true;  // on every rank, so that all ranks take the same branches
  if (!writes()) return;
  s.mem_type = std::move(mem_type);
  s.file_type = h5::checked(H5Tcopy(s.mem_type), H5Tclose, "H5Tcopy", what());
  h5::check(H5Tpack(s.file_type), "H5Tpack", what());
  // A chunk holds a whole small point, or kChunkRows rows of a large one: small points do not
  // pay for a mostly empty chunk, large ones extend in big steps.
  hsize_t dims[1] = {0}, maxdims[1] = {H5S_UNLIMITED},
          chunk[1] = {std::clamp<hsize_t>(static_cast<hsize_t>(expected_rows), 64, kChunkRows)};
  h5::Handle space(h5::check(H5Screate_simple(1, dims, maxdims), "H5Screate_simple", what()), H5Sclose);
  h5::Handle dcpl(h5::check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate", what()), H5Pclose);
  h5::check(H5Pset_chunk(dcpl, 1, chunk), "H5Pset_chunk", what());
  // Every chunk carries a Fletcher-32 checksum (HDF5's filter): a damaged chunk fails to read
  // instead of passing as samples.
  h5::check(H5Pset_fletcher32(dcpl), "H5Pset_fletcher32", what());
  s.dset = h5::checked(H5Dcreate2(point_, name, s.file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose,
                       "H5Dcreate2", what() + "/" + name);
}

void ResultWriter::append(std::span<const Sample> samples, bool durable) {
  append_rows(samples_, samples.data(), samples.size(), sizeof(Sample), durable);
}

void ResultWriter::append_events(std::span<const Event> events, bool durable) {
  if (!events_.open) open_stream(events_, "events", h5::event_mem_type(), 256);
  append_rows(events_, events.data(), events.size(), sizeof(Event), durable);
}

void ResultWriter::set_time_to_accuracy(double target, double budget_s, std::int64_t eval_interval_steps) {
  attr(point_, "tta_target", target);
  attr(point_, "tta_budget_s", budget_s);
  attr(point_, "eval_interval_steps", eval_interval_steps);
}

void ResultWriter::step_times(const StepTimes& t) {
  std::vector<h5::StepRow> table;
  if (rank_ == 0)
    for (std::size_t i = 0; i < t.steps.size(); ++i) {
      h5::StepRow r{};
      r.index = static_cast<std::int32_t>(i);
      put(r.name, t.steps[i].name);
      put(r.op, t.steps[i].op);
      put(r.direction, t.steps[i].direction);
      put(r.impl, t.steps[i].impl);
      r.flops = t.steps[i].flops;
      table.push_back(r);
    }
  // A step whose implementation on this rank is not rank 0's (cuDNN's find chose another
  // algorithm here) is named in the point's ranks_differ.
  // Rank 0's implementations in one broadcast, each ended by a NUL.
  std::string joined;
  for (const StepInfo& st : t.steps) joined += st.impl + '\0';
  joined = bcast_string(joined, comm_);
  std::string differ;
  std::size_t i = 0;
  for (std::size_t at = 0; at < joined.size(); ++i) {
    const std::size_t end = joined.find('\0', at);
    const std::string mine = i < t.steps.size() ? t.steps[i].impl : "none";
    if (mine != joined.substr(at, end - at))
      differ += (differ.empty() ? "" : "; ") +
                ("step " + std::to_string(i) + " impl: rank " + std::to_string(rank_) + " has " + mine);
    at = end + 1;
  }
  if (note_differences(differ)) step("writing point attributes", [&] { attr(point_, "ranks_differ", ranks_differ_); });
  std::vector<h5::StepTimeRow> rows;
  rows.reserve(t.ns.size());
  const std::size_t n = t.steps.size();
  for (std::size_t k = 0; n && k < t.ns.size(); ++k)
    rows.push_back(h5::StepTimeRow{rank_, static_cast<std::int32_t>(k / n), static_cast<std::int32_t>(k % n), t.ns[k]});
  step("writing the step table", [&] { open_stream(steps_, "steps", h5::step_mem_type(), n); });
  append_rows(steps_, table.data(), table.size(), sizeof(h5::StepRow), false);
  step("writing step times", [&] {
    open_stream(step_times_, "step_times", h5::step_time_mem_type(), t.ns.size() * static_cast<std::size_t>(size_));
  });
  append_rows(step_times_, rows.data(), rows.size(), sizeof(h5::StepTimeRow), true);
}

void ResultWriter::append_rows(Stream& st, const void* data, std::size_t count, std::size_t elem, bool durable) {
  long long mine = static_cast<long long>(count), before = 0, total = 0;
  const void* rows = data;
  if (mode_ == StoreMode::Gather) {
    std::vector<int> counts(static_cast<std::size_t>(size_)), displs(static_cast<std::size_t>(size_));
    int my_bytes = static_cast<int>(count * elem);
    mpi_check(MPI_Gather(&my_bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm_), "MPI_Gather", path_);
    if (rank_ == 0) {
      long long sum = 0;
      for (int r = 0; r < size_; ++r) {
        displs[static_cast<std::size_t>(r)] = static_cast<int>(sum);
        sum += counts[static_cast<std::size_t>(r)];
      }
      st.gathered.resize(static_cast<std::size_t>(sum));
    }
    mpi_check(
        MPI_Gatherv(data, my_bytes, MPI_BYTE, st.gathered.data(), counts.data(), displs.data(), MPI_BYTE, 0, comm_),
        "MPI_Gatherv", path_);
    long long gathered = rank_ == 0 ? static_cast<long long>(st.gathered.size() / elem) : 0;
    mpi_check(MPI_Bcast(&gathered, 1, MPI_LONG_LONG, 0, comm_), "MPI_Bcast", path_);
    rows = st.gathered.data();
    total = gathered;
    mine = rank_ == 0 ? gathered : 0;
  } else {
    mpi_check(MPI_Exscan(&mine, &before, 1, MPI_LONG_LONG, MPI_SUM, comm_), "MPI_Exscan", path_);
    if (rank_ == 0) before = 0;  // MPI_Exscan leaves rank 0's result undefined
    mpi_check(MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, comm_), "MPI_Allreduce", path_);
  }
  if (total > 0 && writes())
    step("writing rows", [&] {
      hsize_t new_size[1] = {st.rows + static_cast<hsize_t>(total)};
      h5::check(H5Dset_extent(st.dset, new_size), "H5Dset_extent", what());
      h5::Handle fspace(h5::check(H5Dget_space(st.dset), "H5Dget_space", what()), H5Sclose);
      hsize_t cnt[1] = {static_cast<hsize_t>(mine)};
      h5::Handle mspace(h5::check(H5Screate_simple(1, cnt, nullptr), "H5Screate_simple", what()), H5Sclose);
      if (mine > 0) {
        hsize_t start[1] = {st.rows + static_cast<hsize_t>(before)};
        h5::check(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, cnt, nullptr), "H5Sselect_hyperslab",
                  what());
      } else {
        h5::check(H5Sselect_none(fspace), "H5Sselect_none", what());
        h5::check(H5Sselect_none(mspace), "H5Sselect_none", what());
      }
      // Rows are converted to the file's packed layout here, so that HDF5 converts nothing during
      // the write: a conversion would break collective I/O, which the checksum filter needs.
      const std::size_t file_size = H5Tget_size(st.file_type), n = static_cast<std::size_t>(mine);
      st.packed.assign(std::max(elem, file_size) * std::max<std::size_t>(n, 1), 0);
      st.background.assign(st.packed.size(), 0);
      if (n > 0) std::memcpy(st.packed.data(), rows, n * elem);
      if (n > 0)
        h5::check(H5Tconvert(st.mem_type, st.file_type, n, st.packed.data(), st.background.data(), H5P_DEFAULT),
                  "H5Tconvert", what());
      h5::check(H5Dwrite(st.dset, st.file_type, mspace, fspace, dxpl_, st.packed.data()), "H5Dwrite", what());
    });
  else if (total > 0)
    step("writing rows", [] {});  // gather mode: rank 0 writes, every rank agrees
  st.rows += static_cast<hsize_t>(total);
  if (durable) flush();
}

double ResultWriter::validation(double rel_error, double tolerance, const std::string& method_here,
                                const StepVerdict& step_here) {
  double worst = 0;
  mpi_check(MPI_Allreduce(&rel_error, &worst, 1, MPI_DOUBLE, MPI_MAX, comm_), "MPI_Allreduce", path_);
  // The method's words carry each rank's own figures; the attribute (equal on every rank, as
  // parallel HDF5 requires) is the words of the worst rank (NaN counts as worst; ties: the lowest).
  struct {
    double v;
    int rank;
  } mine{std::isnan(rel_error) ? std::numeric_limits<double>::infinity() : rel_error, rank_}, owner{0, 0};
  mpi_check(MPI_Allreduce(&mine, &owner, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm_), "MPI_Allreduce", path_);
  const std::string method = bcast_string(method_here, comm_, owner.rank);
  const std::string decisive = bcast_string(step_here.decisive, comm_, owner.rank);
  std::int64_t counts[2] = {step_here.tensors, step_here.caught_2pct};
  double figures[2] = {step_here.error, step_here.allowed};
  mpi_check(MPI_Bcast(counts, 2, MPI_INT64_T, owner.rank, comm_), "MPI_Bcast", path_);
  mpi_check(MPI_Bcast(figures, 2, MPI_DOUBLE, owner.rank, comm_), "MPI_Bcast", path_);
  step("recording the validation", [&] {
    if (counts[0] > 0) {
      attr(point_, "validation.decisive", decisive);
      attr(point_, "validation.decisive_error", figures[0]);
      attr(point_, "validation.decisive_allowed", figures[1]);
      attr(point_, "validation.tensors", counts[0]);
      attr(point_, "validation.caught_2pct", counts[1]);
    }
    per_rank_dataset(point_, "validation_rel_error", H5T_NATIVE_DOUBLE, &rel_error, sizeof(double));
    attr(point_, "validation_max_rel_error", worst);
    attr(point_, "validation_tolerance", tolerance);
    attr(point_, "validation_method", method);
    attr(point_, "validation_status", std::string(worst <= tolerance ? "passed" : "failed"));
  });
  return worst;
}

void ResultWriter::end_point(Outcome outcome, const std::string& reason, double seconds_here,
                             std::int64_t peak_rss_here) {
  // Rank 0's figures on every rank: a collective attribute write needs one value, and the
  // checksum below must be of the value the file holds (a caller whose ranks pass their own
  // clocks' seconds once left points whose checksum did not match).
  const double seconds = std::get<double>(bcast_value(Value{seconds_here}, comm_));
  const std::int64_t peak_rss_bytes = std::get<std::int64_t>(bcast_value(Value{peak_rss_here}, comm_));
  step("ending a point", [&] {
    attr(point_, "status", std::string(file_status(outcome)));
    if (peak_rss_bytes >= 0) attr(point_, "peak_rss_bytes", peak_rss_bytes);
    attr(point_, "status_reason", reason);
    attr(point_, "seconds", seconds);
    // Last: the checksum of every attribute above (schema version 2), verified on reading.
    if (writes()) h5::write_attr(point_, "checksum", h5::attributes_checksum(point_attrs_));
  });
  point_attrs_.clear();
  samples_ = Stream{};
  events_ = Stream{};
  steps_ = Stream{};
  step_times_ = Stream{};
  ckpt_ = Checkpoints{};
  point_.reset();
  point_id_.clear();
  flush();
}

void ResultWriter::finish(const std::string& status) {
  attr(file_, "status", status);
  flush();
  samples_ = Stream{};
  events_ = Stream{};
  steps_ = Stream{};
  step_times_ = Stream{};
  ckpt_ = Checkpoints{};
  point_.reset();
  file_.reset();
}

}  // namespace d500
