#pragma once
// The rank's index among the ranks of its node, from the launcher's environment (Open MPI,
// MPICH/Hydra, Slurm's srun, PMIx); 0 when none says. A device backend picks its GPU by it.
#include <cstdlib>

namespace d500 {

inline int node_local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMIX_LOCAL_RANK"})
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  return 0;
}

}  // namespace d500
