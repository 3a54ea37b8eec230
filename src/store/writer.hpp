#pragma once
// Writes one job's results file through parallel HDF5: every rank of the job writes its own
// samples into one shared file. All calls are collective (every rank calls them in the same
// order with the same arguments), except where noted.
#include <mpi.h>

#include <span>
#include <string>

#include "plan/jobspec.hpp"
#include "store/h5.hpp"
#include "workloads/harness.hpp"

namespace d500 {

struct EnvRecord {
  std::string campaign_text;
  std::string campaign_path;
  std::string host;  // this rank's host (differs per rank; gathered by the writer)
};

class ResultWriter {
 public:
  ResultWriter(const std::string& path, MPI_Comm comm, const JobSpec& spec, const EnvRecord& env);
  ~ResultWriter();

  void begin_point(const PointSpec& p, int index, int warmups, int repetitions, const Work& work,
                   const std::string& rate_unit, const std::string& backend_version);
  // Collective; each rank passes its own samples (any number, zero included).
  void append(std::span<const Sample> samples);
  // Collective; `rel_error` is this rank's.
  void validation(double rel_error, double tolerance, const std::string& method);
  void end_point(const std::string& status, const std::string& reason, double seconds);
  // Marks the file complete and closes it.
  void finish(const std::string& status);

 private:
  void flush();
  std::string what() const;

  std::string path_;
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  h5::Handle file_, point_, samples_, mem_type_, file_type_, dxpl_;
  std::string point_id_;
  hsize_t rows_ = 0;
};

}  // namespace d500
