#pragma once
// The MPI worker: runs the points of one job on every rank and streams samples to the job's
// results file. Started by the job script (mpirun or srun) as `d500-worker SPEC OUTPUT`.
namespace d500 {
int worker_main(int argc, char** argv);
}
