// The cuda module's CUDA-runtime helpers (cuda_common.hpp): errors, the rank's device and its
// facts, device memory, buffers and timers. They need the CUDA runtime alone, not cuBLAS, cuDNN
// or NCCL, so the libtorch module compiles this file too instead of linking libd500-cuda.so:
// loading LibTorch for a CPU point (every plan that names libtorch, every rank that runs it) no
// longer loads cuBLAS (0.33 s a process here).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/peak.hpp"
#include "common/error.hpp"
#include "common/node_rank.hpp"

namespace d500 {

namespace cuda {

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw Error(std::string("cuda: ") + call + " failed: " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

Devices visible_devices() {
  Devices d;
  const cudaError_t e = cudaGetDeviceCount(&d.count);
  if (e != cudaSuccess) {
    d.count = 0;
    d.why_none = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
  } else if (d.count == 0) {
    d.why_none = "cudaGetDeviceCount found no device";
  }
  return d;
}

std::string no_device_reason() { return visible_devices().why_none; }

int rank_device_index(const Devices& d) { return node_local_rank() % d.count; }

void use_rank_device() {
  const Devices d = visible_devices();
  if (d.count == 0) throw Error("cuda: no CUDA device on this host (" + d.why_none + ")");
  check(cudaSetDevice(rank_device_index(d)), "cudaSetDevice");
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

namespace {

// nvidia-smi's spelling of a device's UUID: GPU-8-4-4-4-12 hex digits.
std::string uuid_text(const cudaUUID_t& u) {
  static const char* hex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    const auto b = static_cast<unsigned char>(u.bytes[i]);
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}

int attribute(cudaDeviceAttr a, int device) {
  int v = -1;
  return cudaDeviceGetAttribute(&v, a, device) == cudaSuccess ? v : -1;
}

}  // namespace

std::string rank_device_text() {
  const Devices d = visible_devices();
  if (d.count == 0) return "none: " + d.why_none;
  const int dev = rank_device_index(d);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
    return "cuda:" + std::to_string(dev) + " (its properties are unreadable)";
  std::string why;
  const std::string bus = pci_bus_id(dev, why);
  return "cuda:" + std::to_string(dev) + " of " + std::to_string(d.count) + ", " + prop.name + ", PCI " +
         (bus.empty() ? "unknown" : bus) + ", " + uuid_text(prop.uuid);
}

std::string pci_bus_id(int device, std::string& why) {
  char bus[32] = {0};
  if (const cudaError_t e = cudaDeviceGetPCIBusId(bus, sizeof bus, device); e != cudaSuccess) {
    why = std::string("cudaDeviceGetPCIBusId: ") + cudaGetErrorString(e);
    return "";
  }
  return bus;
}

// This rank's device's PCI bus id, or "" with `why` set (no device, or CUDA's error).
std::string rank_bus_id(std::string& why) {
  const Devices d = visible_devices();
  if (d.count == 0) {
    why = "no CUDA device (" + d.why_none + ")";
    return "";
  }
  return pci_bus_id(rank_device_index(d), why);
}

std::vector<std::pair<std::string, std::string>> device_facts() {
  const Devices d = visible_devices();
  if (d.count == 0) return {{"gpu", "none: " + d.why_none}};
  const int dev = rank_device_index(d);
  cudaDeviceProp prop{};
  if (const cudaError_t e = cudaGetDeviceProperties(&prop, dev); e != cudaSuccess)
    return {{"gpu", std::string("unreadable: cudaGetDeviceProperties: ") + cudaGetErrorString(e)}};
  int driver = 0;
  cudaDriverGetVersion(&driver);
  auto khz = [](int v) { return v < 0 ? std::string("unknown") : std::to_string(v); };
  std::vector<std::pair<std::string, std::string>> out{
      {"gpu_model", prop.name},
      {"gpu_count", std::to_string(d.count)},
      {"gpu_compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
      {"gpu_sms", std::to_string(prop.multiProcessorCount)},
      {"gpu_memory_bytes", std::to_string(prop.totalGlobalMem)},
      {"gpu_sm_clock_khz", khz(attribute(cudaDevAttrClockRate, dev)) +
                               " (the peak SM clock CUDA reports; NVML's clocks are gpu_sm_clock_mhz_*)"},
      {"gpu_memory_clock_khz", khz(attribute(cudaDevAttrMemoryClockRate, dev))},
      {"gpu_ecc", prop.ECCEnabled ? "on" : "off"},
      {"gpu_driver", "CUDA " + version_text(driver)}};
  std::string why;
  const std::string bus = rank_bus_id(why);
  for (auto& [k, v] : bus.empty() ? std::vector<std::pair<std::string, std::string>>{{"nvml", "unavailable: " + why}}
                                  : nvml::facts(bus))
    out.emplace_back("gpu_" + k, std::move(v));
  return out;
}

std::vector<std::pair<std::string, Value>> device_peak_facts(const std::string& arithmetic) {
  std::string basis;
  double peak = 0;
  const Devices d = visible_devices();
  if (d.count == 0) {
    basis = "unknown: no CUDA device (" + d.why_none + ")";
  } else {
    const int dev = rank_device_index(d);
    cudaDeviceProp prop{};
    const std::string name = cudaGetDeviceProperties(&prop, dev) == cudaSuccess ? prop.name : "";
    peak = gpu_peak_flops(
        attribute(cudaDevAttrComputeCapabilityMajor, dev), attribute(cudaDevAttrComputeCapabilityMinor, dev),
        attribute(cudaDevAttrMultiProcessorCount, dev), attribute(cudaDevAttrClockRate, dev), arithmetic, basis, name);
  }
  return {{"device.peak_flops", peak}, {"device.peak_basis", basis}};
}

nvml::Reading device_reading() {
  std::string why;
  const std::string bus = rank_bus_id(why);
  if (!bus.empty()) return nvml::read(bus);
  nvml::Reading r;
  r.why = why;
  return r;
}

DeviceMemoryUse::DeviceMemoryUse() {
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  baseline_ = static_cast<std::int64_t>(total - free);
}

std::int64_t DeviceMemoryUse::peak() const {
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  peak_ = std::max(peak_, static_cast<std::int64_t>(total - free) - baseline_);
  return peak_;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) { check(cudaMalloc(&p_, bytes), "cudaMalloc"); }
DeviceBuffer::~DeviceBuffer() { cudaFree(p_); }
// cudaMemcpy from pageable memory may return before its DMA has landed, and it runs on the legacy
// default stream, which the kernels' non-blocking streams do not wait for: the wait makes the
// data the next kernel reads, on whatever stream, the uploaded data (setup only, never timed).
void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  check(cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (to the device)");
  check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize (the upload)");
}
void DeviceBuffer::download(void* host, std::size_t bytes) const {
  check(cudaMemcpy(host, p_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (to the host)");
}

DeviceTimer::DeviceTimer() {
  use_rank_device();
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreate(&start_), "cudaEventCreate");
  check(cudaEventCreate(&stop_), "cudaEventCreate");
}

DeviceTimer::~DeviceTimer() {
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
  if (stream_) cudaStreamDestroy(stream_);
}

}  // namespace cuda

}  // namespace d500
