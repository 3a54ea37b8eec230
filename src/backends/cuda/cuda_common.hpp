#pragma once
// What the cuda backend's kernels share (cuBLAS in cuda_backend.cpp, cuDNN in cudnn_conv.cpp):
// checked CUDA calls, the devices this process sees and the one a rank uses, device buffers,
// and DeviceKernel, the timing every GPU kernel does the same way: its work between two CUDA
// events on its own stream, then a wait for the second event (the host's duration, the
// harness's `op` row, spans the launch and the wait; device_ns() is the events' own).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/device.hpp"
#include "backends/graph.hpp"
#include "backends/kernel.hpp"
#include "backends/nvml.hpp"

namespace d500::cuda {

void check(cudaError_t e, const char* call);  // throws d500::Error naming the call and CUDA's words
// CUDA's version numbers (1000 major + 10 minor) as major.minor.
std::string version_text(int v);

// The devices this process sees: their count, or why there are none (no driver, no device).
struct Devices {
  int count = 0;
  std::string why_none;
};
Devices visible_devices();
// "" when a device is visible, else why none is (BackendInfo::no_device of cuda and nccl).
std::string no_device_reason();

// The device this rank uses among those visible (count > 0): its local rank on its node
// (common/node_rank.hpp) modulo their count.
int rank_device_index(const Devices& d);

// Selects this rank's device (local rank modulo the visible devices), or throws saying why there
// is none.
void use_rank_device();

// This rank's device in words, for the job's rank -> device map (/env/devices): its index among
// the visible ones, model, PCI bus id and UUID; "none: <why>" without one. Creates no context.
std::string rank_device_text();
// A device's PCI bus id as CUDA and NVML both spell it ("0000:17:00.0"), or "" with `why` set.
// Creates no context.
std::string pci_bus_id(int device, std::string& why);
// The device's facts as this rank sees them, for /env machine.gpu_*: model, memory, SM and
// memory clocks (the peak clocks the device reports, kHz), ECC, compute capability, driver; and
// NVML's (backends/nvml.hpp): the driver's version, the clocks now, allowed and at most, the power
// limit, persistence and the clock-event reasons (or why NVML gave none).
std::vector<std::pair<std::string, std::string>> device_facts();
// NVML's counters of this rank's device (energy, time capped by power or temperature, the SM
// clock now), for a point's device.* state; all NaN with the reason without a device or NVML.
nvml::Reading device_reading();
// The arithmetic peak of this rank's device for `arithmetic` (peak.hpp: "fp32", "tf32", "bf16",
// "fp16") at its peak SM clock, as a kernel's facts: device.peak_flops (FLOP/s; 0 when unknown)
// and device.peak_basis (the formula, or why there is none), which the report shows rates against.
std::vector<std::pair<std::string, Value>> device_peak_facts(const std::string& arithmetic);

// The device memory a kernel holds: the device's used memory (cudaMemGetInfo: total - free)
// beyond what it was when the kernel began its setup, its context already made. Device-wide:
// another process on the same device counts too; in the driver's allocation granules.
class DeviceMemoryUse {
 public:
  DeviceMemoryUse();  // the baseline
  // Samples now and returns the largest use seen.
  std::int64_t peak() const;

 private:
  std::int64_t baseline_ = 0;
  mutable std::int64_t peak_ = 0;
};

// A device buffer, freed with its owner.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;

 private:
  void* p_ = nullptr;
};

// A stream on this rank's device and two events around the work timed on it.
class DeviceTimer {
 public:
  DeviceTimer();  // selects this rank's device
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;
  cudaStream_t stream() const { return stream_; }
  // Runs launch() (which enqueues work on stream()) between the events and waits for the
  // second: the host's timed region ends there, as a bare loop's does.
  template <class Launch>
  void timed(Launch&& launch) {
    cudaEventRecord(start_, stream_);
    launch();
    cudaEventRecord(stop_, stream_);
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    unread_ = true;
  }
  // The events' duration of the last timed(), read from them (cudaEventElapsedTime) at the first
  // call after it, outside the host's timed region (the harness asks after the repetition's op
  // row); 0 before any.
  std::int64_t ns() const {
    if (unread_) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
      ns_ = static_cast<std::int64_t>(std::llround(static_cast<double>(ms) * 1e6));
      unread_ = false;
    }
    return ns_;
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  mutable std::int64_t ns_ = 0;
  mutable bool unread_ = false;
};

// A level-0 operator's kernel on the GPU, timed by its DeviceTimer, its device memory measured
// from before its setup (allocations happen at setup only: the use after the last run is the
// peak of the kernel's own buffers and its libraries' handles and workspaces).
class DeviceKernel : public OpKernel {
 public:
  std::int64_t device_ns() const override { return timer_.ns(); }
  std::int64_t device_memory_bytes() const override { return memory_.peak(); }

 protected:
  DeviceTimer timer_;  // first: selects the device
  DeviceMemoryUse memory_;
};

// Level 1 (cuda_graph.cpp): the memory d500's executor keeps a network in on this rank's device,
// and the node kernels that run on it (nullptr for a node they do not cover, or for host memory).
std::unique_ptr<DeviceMemory> make_executor_memory();
std::unique_ptr<NodeKernel> make_node_kernel(const NodeProblem& p, int threads);
// How those kernels take channels-last tensors (BackendInfo::channels_last), and float32 ones
// stored in bfloat16 with math = "bf16" (BackendInfo::bf16_storage).
Takes channels_last(const NodeProblem& p);
Takes bf16_storage(const NodeProblem& p);

#ifdef D500_HAVE_CUDNN
// cuDNN's convolution of a conv2d problem (forward, backward_data or backward_filter).
std::unique_ptr<OpKernel> make_cudnn_conv(OpProblem& p);
// cuDNN's pooling, batch normalisation, ReLU and softmax (pool2d, batchnorm, relu, softmax).
std::unique_ptr<OpKernel> make_cudnn_op(OpProblem& p);
std::string cudnn_version();
#endif

}  // namespace d500::cuda
