// The `cuda` backend: level-0 GEMM through cuBLAS on one GPU per rank (the device chosen by the
// rank's local rank on its node). Inputs are made on the host, converted to the point's dtype
// and copied once at setup; outputs are copied back and converted to float in finish(), outside
// timing. run() is the timed call: the cuBLAS call between two CUDA events on the kernel's own
// stream, then a wait for the second event, so the host duration (the harness's) includes the
// launch and the wait, and device_ns() gives the events' own duration.
#include <cuda_runtime_api.h>
#include <cublas_api.h>
#include <cublas_v2.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/half.hpp"
#include "backends/registry.hpp"
#include "common/error.hpp"

namespace d500 {

namespace {

void cuda_check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw Error(std::string("cuda: ") + call + " failed: " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

void cublas_check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(std::string("cuda: ") + call + " failed: " + cublasGetStatusString(s));
}

// The devices this process sees: their count, or why there are none (no driver, no device).
struct Devices {
  int count = 0;
  std::string why_none;
};

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

// The rank's index among the ranks of its node, from the launcher's environment (Open MPI,
// MPICH/Hydra, Slurm's srun, PMIx); 0 when none says.
int local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMIX_LOCAL_RANK"})
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  return 0;
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

std::string cuda_version() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::string s = "CUDA runtime " + version_text(runtime) + ", cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) + "." +
                  std::to_string(CUBLAS_VER_MINOR) + "." + std::to_string(CUBLAS_VER_PATCH) + ", driver " +
                  (driver ? version_text(driver) : std::string("none"));
  const Devices d = visible_devices();
  if (d.count == 0) return s + "; no CUDA device (" + d.why_none + ")";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, local_rank() % d.count) == cudaSuccess)
    s += "; " + std::to_string(d.count) + " device(s), this rank's: " + prop.name + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) + " SMs, " +
         std::to_string(prop.totalGlobalMem >> 20) + " MiB, ECC " + (prop.ECCEnabled ? "on" : "off") + ", PCI " +
         std::to_string(prop.pciDomainID) + ":" + std::to_string(prop.pciBusID) + ":" + std::to_string(prop.pciDeviceID) + ")";
  return s;
}

// The element type of a dtype's tensors in device memory, and what cuBLAS computes in.
struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  std::size_t bytes;
};

GemmTypes gemm_types(const std::string& dtype) {
  if (dtype == "tf32") return {CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4};
  if (dtype == "bf16") return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2};
  if (dtype == "fp16") return {CUDA_R_16F, CUBLAS_COMPUTE_32F, 2};
  return {CUDA_R_32F, CUBLAS_COMPUTE_32F, 4};  // fp32 (and "": float32)
}

// A device buffer freed with its owner.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) { cuda_check(cudaMalloc(&p_, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

// The host bytes of a float tensor in a dtype's element type.
std::vector<unsigned char> to_device_type(const std::vector<float>& x, const std::string& dtype) {
  const GemmTypes t = gemm_types(dtype);
  std::vector<unsigned char> out(x.size() * t.bytes);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (t.bytes == 4) {
      std::memcpy(out.data() + 4 * i, &x[i], 4);
    } else {
      const std::uint16_t h = dtype == "bf16" ? to_bf16(x[i]) : to_half(x[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

// Row-major C = A B (A m x k, B k x n) as cuBLAS's column-major C^T = B^T A^T, in the point's
// dtype: fp32 (float32 in, float32 accumulation, no TF32), tf32 (float32 in and out, tensor
// cores rounding inputs to TF32), bf16 and fp16 (inputs and C in that type, accumulation in
// float32, as torch.mm does). One stream and handle per kernel.
class CudaGemm final : public OpKernel {
 public:
  explicit CudaGemm(OpProblem& p)
      : p_(p), m_(p.i("m")), n_(p.i("n")), k_(p.i("k")), dtype_(p.s("dtype")), types_(gemm_types(dtype_)) {
    const Devices d = visible_devices();
    if (d.count == 0) throw Error("cuda: no CUDA device on this host (" + d.why_none + ")");
    cuda_check(cudaSetDevice(local_rank() % d.count), "cudaSetDevice");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_check(cudaEventCreate(&start_), "cudaEventCreate");
    cuda_check(cudaEventCreate(&stop_), "cudaEventCreate");
    cublas_check(cublasCreate(&handle_), "cublasCreate");
    cublas_check(cublasSetStream(handle_, stream_), "cublasSetStream");
    cublas_check(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    const std::size_t e = types_.bytes;
    a_ = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(m_ * k_) * e);
    b_ = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(k_ * n_) * e);
    c_ = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(m_ * n_) * e);
    const auto a = to_device_type(p.in[0].data, dtype_), b = to_device_type(p.in[1].data, dtype_);
    cuda_check(cudaMemcpy(a_->get(), a.data(), a.size(), cudaMemcpyHostToDevice), "cudaMemcpy (A to the device)");
    cuda_check(cudaMemcpy(b_->get(), b.data(), b.size(), cudaMemcpyHostToDevice), "cudaMemcpy (B to the device)");
  }
  ~CudaGemm() override {
    if (handle_) cublasDestroy(handle_);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  void run() override {
    const float alpha = 1.0f, beta = 0.0f;
    cudaEventRecord(start_, stream_);
    const cublasStatus_t s = cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n_), static_cast<int>(m_), static_cast<int>(k_),
                                          &alpha, b_->get(), types_.data, static_cast<int>(n_), a_->get(), types_.data,
                                          static_cast<int>(k_), &beta, c_->get(), types_.data, static_cast<int>(n_), types_.compute,
                                          CUBLAS_GEMM_DEFAULT);
    cudaEventRecord(stop_, stream_);
    cuda_check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    cublas_check(s, "cublasGemmEx");
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    device_ns_ = static_cast<std::int64_t>(std::llround(static_cast<double>(ms) * 1e6));
  }

  std::int64_t device_ns() const override { return device_ns_; }

  void finish() override {
    const std::size_t count = static_cast<std::size_t>(m_ * n_);
    std::vector<unsigned char> c(count * types_.bytes);
    cuda_check(cudaMemcpy(c.data(), c_->get(), c.size(), cudaMemcpyDeviceToHost), "cudaMemcpy (C to the host)");
    float* out = p_.out[0].data.data();
    for (std::size_t i = 0; i < count; ++i) {
      if (types_.bytes == 4) {
        std::memcpy(out + i, c.data() + 4 * i, 4);
      } else {
        std::uint16_t h;
        std::memcpy(&h, c.data() + 2 * i, 2);
        out[i] = dtype_ == "bf16" ? from_bf16(h) : from_half(h);
      }
    }
  }

 private:
  OpProblem& p_;
  std::int64_t m_, n_, k_;
  std::string dtype_;
  GemmTypes types_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  std::unique_ptr<DeviceBuffer> a_, b_, c_;
  std::int64_t device_ns_ = 0;
};

}  // namespace

// For `d500 backends` and the tests: "" when a device is visible, else why none is.
std::string cuda_no_device_reason() { return visible_devices().why_none; }

void register_backend_cuda(BackendRegistry& r) {
  r.add({.name = "cuda",
         .description = "cuBLAS on the GPU (GEMM in fp32, tf32, bf16, fp16), one device per rank by local rank, timed by CUDA events",
         .version = cuda_version,
         .supports = [](const std::string& op) { return op == "gemm"; },
         .make_kernel = [](OpProblem& p, int) -> std::unique_ptr<OpKernel> { return std::make_unique<CudaGemm>(p); },
         .reduced_precision = true,
         .no_device = cuda_no_device_reason});
}

}  // namespace d500
