// The `nccl` backend: level 0's collectives through NCCL, one GPU per rank (the device chosen
// by local rank, as the cuda backend does), float32, sum. At setup rank 0 makes NCCL's unique
// id and MPI_Bcast gives it to the others; every rank then joins the NCCL communicator and
// copies its input to the device. A repetition is the NCCL call between two CUDA events on the
// kernel's stream and the wait for the second (cuda_common.hpp); the harness's barrier between
// repetitions is MPI's, as for the MPI collectives. The result is copied back in finish().
// Level 3 (communication = "nccl"): the same communicator set-up for a training scheme, whose
// gradients d500's executor on cuda keeps on the device; ncclAllReduce with ncclAvg runs on a
// stream of its own, ordered after the executor's work by events (NcclDeviceCollective).
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/cuda_declared.hpp"
#include "backends/registry.hpp"
#include "common/error.hpp"
#include "common/mpi_check.hpp"

namespace d500 {

namespace {

void nccl_check(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) throw Error(std::string("nccl: ") + call + " failed: " + ncclGetErrorString(r));
}

std::string nccl_version() {
  int v = 0;
  ncclGetVersion(&v);  // major * 10000 + minor * 100 + patch since NCCL 2.9
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

// Every rank needs a device of its own before any joins NCCL: a rank without one, or two ranks
// on one GPU (which NCCL refuses), would leave the others waiting in the id's broadcast or in
// ncclCommInitRank. The ranks agree first, and all fail together, saying why.
void agree_on_devices(MPI_Comm comm) {
  int size = 1;
  mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size", "NCCL's device check");
  const cuda::Devices d = cuda::visible_devices();
  int mine = d.count > 0 ? 1 : 0, all = 0;
  mpi_check(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce", "NCCL's device check");
  if (!all)
    throw Error(mine ? "nccl: another rank of the job has no CUDA device; NCCL needs one GPU per rank"
                     : "nccl: no CUDA device on this host (" + d.why_none + ")");
  constexpr int kLen = 320;
  char here[kLen] = {0};
  int name_len = 0;
  mpi_check(MPI_Get_processor_name(here, &name_len), "MPI_Get_processor_name", "NCCL's device check");
  std::string why;
  const std::string bus = cuda::pci_bus_id(cuda::rank_device_index(d), why);
  if (bus.empty()) throw Error("nccl: " + why);
  std::snprintf(here + name_len, static_cast<std::size_t>(kLen - name_len), " %s", bus.c_str());
  std::vector<char> every(static_cast<std::size_t>(kLen) * static_cast<std::size_t>(size));
  mpi_check(MPI_Allgather(here, kLen, MPI_CHAR, every.data(), kLen, MPI_CHAR, comm), "MPI_Allgather",
            "NCCL's device check");
  for (int a = 0; a < size; ++a)
    for (int b = a + 1; b < size; ++b)
      if (std::strncmp(&every[static_cast<std::size_t>(a) * kLen], &every[static_cast<std::size_t>(b) * kLen], kLen) ==
          0)
        throw Error(
            "nccl: ranks " + std::to_string(a) + " and " + std::to_string(b) + " would share the GPU at " +
            std::string(&every[static_cast<std::size_t>(a) * kLen]) +
            ": NCCL needs one GPU per rank (no more ranks per node than the node's GPUs; under Slurm, gres = \"gpu:<ranks per node>\")");
}

// A communicator over `comm`'s ranks on this rank's current device: rank 0 makes NCCL's unique
// id, MPI_Bcast gives it to the others.
ncclComm_t join(MPI_Comm comm) {
  int rank = 0, size = 1;
  mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank", "NCCL's communicator");
  mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size", "NCCL's communicator");
  ncclUniqueId id{};
  if (rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  mpi_check(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm), "MPI_Bcast", "NCCL's unique id");
  ncclComm_t c = nullptr;
  nccl_check(ncclCommInitRank(&c, size, id, rank), "ncclCommInitRank");
  return c;
}

class NcclCollective final : public CollectiveKernel {
 public:
  explicit NcclCollective(CollectiveProblem& p) : p_(p) {
    agree_on_devices(p.comm);
    timer_ = std::make_unique<cuda::DeviceTimer>();       // before the communicator: selects the device
    memory_ = std::make_unique<cuda::DeviceMemoryUse>();  // from before the communicator (NCCL's buffers count)
    comm_ = join(p.comm);
    if (!p.in_place && !p.send->empty()) send_ = std::make_unique<cuda::DeviceBuffer>(p.send->size() * sizeof(float));
    recv_ = std::make_unique<cuda::DeviceBuffer>(p.recv->size() * sizeof(float));
  }
  ~NcclCollective() override {
    if (comm_) ncclCommDestroy(comm_);
  }

  void upload() override {
    if (send_) send_->upload(p_.send->data(), p_.send->size() * sizeof(float));
    if (p_.in_place || p_.kind == CollectiveKind::Broadcast)
      recv_->upload(p_.recv->data(), p_.recv->size() * sizeof(float));
  }

  void run() override {
    const void* in = send_ ? send_->get() : recv_->get();
    void* out = recv_->get();
    const std::size_t n = p_.count;
    ncclResult_t r = ncclSuccess;
    timer_->timed([&] {
      switch (p_.kind) {
        case CollectiveKind::Allreduce:
          r = ncclAllReduce(in, out, n, ncclFloat, ncclSum, comm_, timer_->stream());
          break;
        case CollectiveKind::Allgather: r = ncclAllGather(in, out, n, ncclFloat, comm_, timer_->stream()); break;
        case CollectiveKind::Broadcast: r = ncclBroadcast(out, out, n, ncclFloat, 0, comm_, timer_->stream()); break;
        case CollectiveKind::ReduceScatter:
          r = ncclReduceScatter(in, out, n / static_cast<std::size_t>(p_.size), ncclFloat, ncclSum, comm_,
                                timer_->stream());
          break;
      }
    });
    nccl_check(r, "the NCCL collective");
  }

  void finish() override { recv_->download(p_.recv->data(), p_.recv->size() * sizeof(float)); }
  std::int64_t device_ns() const override { return timer_->ns(); }
  std::int64_t device_memory_bytes() const override { return memory_->peak(); }
  std::vector<std::pair<std::string, Value>> facts() const override {
    return {{"nccl.method",
             std::string(
                 "NCCL on one GPU per rank (by local rank), float32 sum; the unique id shared by MPI_Bcast; "
                 "NCCL's own choice of algorithm and protocol (NCCL_ALGO, NCCL_PROTO as the environment sets them)")}};
  }

 private:
  CollectiveProblem& p_;
  std::unique_ptr<cuda::DeviceTimer> timer_;
  std::unique_ptr<cuda::DeviceMemoryUse> memory_;
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<cuda::DeviceBuffer> send_, recv_;
};

// Level 3: means of a scheme's device buffers over the ranks by ncclAllReduce (ncclAvg, in place)
// on a stream of the collective's own, each ordered after the work then enqueued on d500's
// executor's stream by an event (the stream waits on the device, the host does not), so that
// buckets reduce while backward goes on. The executor's memory was made on this rank's device,
// which is current.
class NcclDeviceCollective final : public DeviceCollective {
 public:
  NcclDeviceCollective(DeviceMemory& m, MPI_Comm comm) : compute_(static_cast<cudaStream_t>(m.native_stream())) {
    if (!compute_)
      throw Error("nccl: the executor's device memory (" + m.describe() + ") has no CUDA stream to order after");
    agree_on_devices(comm);
    cuda::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags (NCCL's stream)");
    cuda::check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    comm_ = join(comm);
  }
  ~NcclDeviceCollective() override {
    if (stream_) cudaStreamSynchronize(stream_);
    if (comm_) ncclCommDestroy(comm_);
    if (ready_) cudaEventDestroy(ready_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  NcclDeviceCollective(const NcclDeviceCollective&) = delete;
  NcclDeviceCollective& operator=(const NcclDeviceCollective&) = delete;

  void start_mean(float* buf, std::size_t n) override {
    after_compute("before a bucket's allreduce");
    nccl_check(ncclAllReduce(buf, buf, n, ncclFloat, ncclAvg, comm_, stream_), "ncclAllReduce");
  }
  void wait() override { cuda::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (NCCL's stream)"); }
  void exchange(const float* send, const std::vector<float*>& recv, const std::vector<int>& peers,
                std::size_t n) override {
    after_compute("before an exchange");
    // One group: every send and receive of this rank posted together, so that a ring never
    // waits on itself.
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t i = 0; i < peers.size(); ++i) {
      nccl_check(ncclSend(send, n, ncclFloat, peers[i], comm_, stream_), "ncclSend");
      nccl_check(ncclRecv(recv[i], n, ncclFloat, peers[i], comm_, stream_), "ncclRecv");
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    wait();
  }
  void reduce_mean(float* buf, std::size_t n, int root) override {
    after_compute("before a reduce");
    nccl_check(ncclReduce(buf, buf, n, ncclFloat, ncclAvg, root, comm_, stream_), "ncclReduce");
    wait();
  }
  void broadcast(float* buf, std::size_t n, int root) override {
    after_compute("before a broadcast");
    nccl_check(ncclBroadcast(buf, buf, n, ncclFloat, root, comm_, stream_), "ncclBroadcast");
    wait();
  }
  std::string describe() const override {
    return nccl_version() +
           " ncclAllReduce (float32, ncclAvg, in place), ncclReduce (ncclAvg, in place) and ncclBroadcast (in place), and "
           "ncclSend/ncclRecv (grouped) on a stream of its own, after an event on the executor's stream; NCCL's own "
           "choice of algorithm and protocol";
  }

 private:
  // NCCL's stream waits for the work enqueued on the executor's so far. A wait captures the
  // event's latest record when it is enqueued: one event serves every call.
  void after_compute(const char* what) {
    cuda::check(cudaEventRecord(ready_, compute_), (std::string("cudaEventRecord (") + what + ")").c_str());
    cuda::check(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
  }

  cudaStream_t compute_ = nullptr, stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

// The module's side of cuda_declared.hpp's declaration of nccl.
void provide_backend_nccl(BackendRegistry& r) {
  BackendInfo b = nccl_declared();
  b.version = nccl_version;
  b.make_collective = [](CollectiveProblem& p) -> std::unique_ptr<CollectiveKernel> {
    return std::make_unique<NcclCollective>(p);
  };
  b.make_device_collective = [](DeviceMemory& m, MPI_Comm comm) -> std::unique_ptr<DeviceCollective> {
    return std::make_unique<NcclDeviceCollective>(m, comm);
  };
  b.no_device = cuda::no_device_reason;
  b.rank_device = cuda::rank_device_text;
  b.device_facts = cuda::device_facts;
  b.device_reading = cuda::device_reading;
  r.add(std::move(b));
}

}  // namespace d500
