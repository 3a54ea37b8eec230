#pragma once
// The kernel contract of level 0's collectives on a backend other than the MPI library itself
// (which workloads/level0/collectives.cpp calls directly): NCCL on GPUs. The workload makes the
// host buffers and checks the result; a kernel copies the inputs where it works (untimed, at
// setup), runs the collective (the timed call, returning when it is done on this rank), and
// copies the result back in finish() (untimed).
#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backends/device.hpp"
#include "common/value.hpp"

namespace d500 {

enum class CollectiveKind { Allreduce, Allgather, Broadcast, ReduceScatter };

struct CollectiveProblem {
  CollectiveKind kind = CollectiveKind::Allreduce;
  MPI_Comm comm = MPI_COMM_NULL;  // the job's ranks (a kernel may use it at setup, e.g. to share an id)
  int rank = 0, size = 1;
  std::size_t count = 0;               // elements of the per-rank buffer the collective is named by
  bool in_place = false;               // allreduce: the result overwrites the input
  std::vector<float>* send = nullptr;  // this rank's input (in place: recv is the input)
  std::vector<float>* recv = nullptr;  // the result
};

class CollectiveKernel {
 public:
  virtual ~CollectiveKernel() = default;
  virtual void upload() = 0;  // untimed: the host input (send, or recv in place) to where the kernel works
  virtual void run() = 0;     // timed: the collective, returning when it is complete on this rank
  virtual void finish() = 0;  // untimed: the result into recv
  // The device's own duration of the last run (ns), as OpKernel::device_ns; -1 on the host.
  virtual std::int64_t device_ns() const { return -1; }
  // The most device memory it has held (bytes, this rank), as OpKernel's; -1 on the host.
  virtual std::int64_t device_memory_bytes() const { return -1; }
  // Facts for the point's attributes, the same on every rank (as OpKernel::facts).
  virtual std::vector<std::pair<std::string, Value>> facts() const { return {}; }
};

// Level 3 on a device: the collective a training scheme runs on d500's executor's device buffers
// (communication = "nccl"), ordered on that executor's DeviceMemory stream. Made collectively
// (every rank of the communicator at once), untimed, for one executor's memory.
class DeviceCollective {
 public:
  virtual ~DeviceCollective() = default;
  // `n` floats of the memory's device buffer `buf` are to become the mean of every rank's, once
  // the work enqueued on the memory's stream so far is done; returns at once (the collective
  // runs beside whatever is enqueued next). Every rank starts the same buffers in one order.
  virtual void start_mean(float* buf, std::size_t n) = 0;
  // Returns once every mean started is done on this rank.
  virtual void wait() = 0;
  void allreduce_mean(float* buf, std::size_t n) {
    start_mean(buf, n);
    wait();
  }
  // Point to point (D-PSGD's neighbours): `n` floats of the memory's device buffer `send` go to
  // each rank of `peers` (ranks of the communicator the collective was made over) and each peer's
  // arrive in the matching `recv` buffer, once the work enqueued on the memory's stream so far is
  // done; returns when this rank's transfers are done. Peers name each other (if I name you, you
  // name me), so that every send meets its receive.
  virtual void exchange(const float* send, const std::vector<float*>& recv, const std::vector<int>& peers,
                        std::size_t n) = 0;
  // A parameter server on rank `root` (ps-sync, ps_servers = 0): `n` floats of `buf` on `root`
  // become the mean of every rank's (the other ranks' are left as they were), once the work
  // enqueued on the memory's stream so far is done; returns when this rank's part is done.
  virtual void reduce_mean(float* buf, std::size_t n, int root) = 0;
  // `n` floats of `buf` on every rank become root's, once the work enqueued so far is done;
  // returns when this rank's part is done.
  virtual void broadcast(float* buf, std::size_t n, int root) = 0;
  // What it runs, in words ("NCCL 2.28.3 ncclAllReduce, ncclAvg, on a stream of its own").
  virtual std::string describe() const = 0;
};

}  // namespace d500
