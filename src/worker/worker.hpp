#pragma once
// The MPI worker: runs the points of one job on every rank and streams samples to the job's
// results file. Started by the job script (mpirun or srun) as `d500-worker SPEC OUTPUT`.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backends/nvml.hpp"
#include "common/value.hpp"

namespace d500 {
int worker_main(int argc, char** argv);

// What a rank says when an allocation fails outside a point's set-up (which fails the point
// alone): what it was doing (the crash note's context), what it maps, and the address-space
// limit (ulimit -v; <= 0: none) with what to do about it.
std::string out_of_memory_text(const std::string& doing, std::int64_t mapped, std::int64_t limit);

// A point's device.* attributes from every rank's NVML readings of its GPU before and after the
// repetitions, `seconds` apart (collective over `comm`; nothing when no rank could read NVML).
std::vector<std::pair<std::string, Value>> device_state(const nvml::Reading& a, const nvml::Reading& b, double seconds,
                                                        MPI_Comm comm);
}  // namespace d500
