#pragma once
// Writes one job's results file. Two modes, one layout:
//  - parallel: every rank writes its own samples into the shared file through parallel HDF5
//    (MPI-IO), each rank's rows placed by an MPI_Exscan offset;
//  - gather: samples are gathered to rank 0, which alone opens and writes the file (for an HDF5
//    built without MPI, or a file system where MPI-IO misbehaves).
// All calls are collective: every rank calls them in the same order with the same arguments.
#include <mpi.h>

#include <span>
#include <string>
#include <vector>

#include "plan/jobspec.hpp"
#include "store/h5.hpp"
#include "workloads/harness.hpp"

namespace d500 {

struct EnvRecord {
  std::string campaign_text;
  std::string campaign_path;
  std::string host;  // this rank's host (differs per rank; gathered by the writer)
};

enum class StoreMode { Parallel, Gather };
// Parallel when HDF5 was built with MPI, unless D500_STORE=gather asks otherwise.
StoreMode default_store_mode();
const char* store_mode_name(StoreMode m);

class ResultWriter {
 public:
  ResultWriter(const std::string& path, MPI_Comm comm, const JobSpec& spec, const EnvRecord& env,
               StoreMode mode = default_store_mode());
  ~ResultWriter();

  struct PointMeta {
    Work work;
    std::string rate_unit, backend_version, scaling, scaling_note;
  };
  void begin_point(const PointSpec& p, int index, int warmups, int repetitions, const PointMeta& meta);
  // Collective; each rank passes its own samples (any number, zero included). `durable`
  // also flushes HDF5's metadata and MPI-IO's buffers to the file, so that a job killed after
  // it returns keeps these samples; without it they reach the file, but may not survive a kill.
  void append(std::span<const Sample> samples, bool durable = true);
  // Collective; `rel_error` is this rank's. Returns the worst rank's error.
  double validation(double rel_error, double tolerance, const std::string& method);
  void end_point(const std::string& status, const std::string& reason, double seconds);
  // Marks the file complete and closes it.
  void finish(const std::string& status);

 private:
  void flush();
  std::string what() const;
  bool writes() const { return mode_ == StoreMode::Parallel || rank_ == 0; }
  // Writes one element per rank into a new 1-D dataset (`type` in memory and file).
  void per_rank_dataset(hid_t parent, const char* name, hid_t type, const void* mine, std::size_t elem_size);
  void attr(hid_t obj, const std::string& name, const Value& v) {
    if (writes()) h5::write_attr(obj, name, v);
  }

  std::string path_;
  MPI_Comm comm_;
  StoreMode mode_;
  std::vector<Sample> gathered_;
  int rank_ = 0, size_ = 1;
  h5::Handle file_, point_, samples_, mem_type_, file_type_, dxpl_;
  std::string point_id_;
  hsize_t rows_ = 0;
};

}  // namespace d500
