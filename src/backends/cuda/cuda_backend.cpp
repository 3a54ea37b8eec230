// The `cuda` backend: level-0 GEMM through cuBLAS (and, with cuDNN, convolutions in
// cudnn_conv.cpp and the other operators in cudnn_ops.cpp) on one GPU per rank (the device chosen by the
// rank's local rank on its node). Inputs are made on the host, converted to the point's dtype
// and copied once at setup; outputs are copied back and converted to float in finish(), outside
// timing. run() is the timed call: the cuBLAS call between two CUDA events on the kernel's own
// stream, then a wait for the second event, so the host duration (the harness's) includes the
// launch and the wait, and device_ns() gives the events' own duration.
#include <cublas_api.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/cuda_declared.hpp"
#include "backends/half.hpp"
#include "backends/optimizer.hpp"
#include "backends/registry.hpp"
#include "common/error.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

using cuda::check;
using cuda::DeviceBuffer;

void cublas_check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(std::string("cuda: ") + call + " failed: " + cublasGetStatusString(s));
}

std::string cuda_version() {
  using cuda::version_text;
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::string s = "CUDA runtime " + version_text(runtime) + ", cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) + "." +
                  std::to_string(CUBLAS_VER_MINOR) + "." + std::to_string(CUBLAS_VER_PATCH) + ", driver " +
                  (driver ? version_text(driver) : std::string("none"));
#ifdef D500_HAVE_CUDNN
  s += ", " + cuda::cudnn_version();
#endif
  s += ", " + nvml::state();
  const cuda::Devices d = cuda::visible_devices();
  if (d.count == 0) return s + "; no CUDA device (" + d.why_none + ")";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, cuda::rank_device_index(d)) == cudaSuccess)
    s += "; " + std::to_string(d.count) + " device(s), this rank's: " + prop.name + " (sm_" +
         std::to_string(prop.major) + std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) +
         " SMs, " + std::to_string(prop.totalGlobalMem >> 20) + " MiB, ECC " + (prop.ECCEnabled ? "on" : "off") +
         ", PCI " + std::to_string(prop.pciDomainID) + ":" + std::to_string(prop.pciBusID) + ":" +
         std::to_string(prop.pciDeviceID) + ")";
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

// The host bytes of a float tensor in a dtype's element type.
std::vector<unsigned char> to_device_type(const std::vector<float>& x, const std::string& dtype) {
  const GemmTypes t = gemm_types(dtype);
  std::vector<unsigned char> out(x.size() * t.bytes);
  if (t.bytes == 4)
    std::memcpy(out.data(), x.data(), out.size());
  else
    std::memcpy(out.data(), to_16bit(x, dtype == "bf16").data(), out.size());
  return out;
}

// Row-major C = A B (A m x k, B k x n) as cuBLAS's column-major C^T = B^T A^T, in the point's
// dtype: fp32 (float32 in, float32 accumulation, no TF32), tf32 (float32 in and out, tensor
// cores rounding inputs to TF32), bf16 and fp16 (inputs and C in that type, accumulation in
// float32, as torch.mm does). One stream and handle per kernel.
class CudaGemm final : public cuda::DeviceKernel {
 public:
  explicit CudaGemm(OpProblem& p)
      : p_(p), m_(p.i("m")), n_(p.i("n")), k_(p.i("k")), dtype_(p.s("dtype")), types_(gemm_types(dtype_)) {
    cublas_check(cublasCreate(&handle_), "cublasCreate");
    cublas_check(cublasSetStream(handle_, timer_.stream()), "cublasSetStream");
    cublas_check(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    const std::size_t e = types_.bytes;
    a_ = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(m_ * k_) * e);
    b_ = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(k_ * n_) * e);
    c_ = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(m_ * n_) * e);
    const auto a = to_device_type(p.in[0].data, dtype_), b = to_device_type(p.in[1].data, dtype_);
    a_->upload(a.data(), a.size());
    b_->upload(b.data(), b.size());
  }
  ~CudaGemm() override {
    if (handle_) cublasDestroy(handle_);
  }

  void run() override {
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    timer_.timed([&] {
      s = cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n_), static_cast<int>(m_),
                       static_cast<int>(k_), &alpha, b_->get(), types_.data, static_cast<int>(n_), a_->get(),
                       types_.data, static_cast<int>(k_), &beta, c_->get(), types_.data, static_cast<int>(n_),
                       types_.compute, CUBLAS_GEMM_DEFAULT);
    });
    cublas_check(s, "cublasGemmEx");
  }

  std::vector<std::pair<std::string, Value>> facts() const override {
    auto f = cuda::device_peak_facts(dtype_.empty() ? "fp32" : dtype_);
    f.emplace_back("cuda.gemm",
                   std::string("cublasGemmEx, CUBLAS_GEMM_DEFAULT, ") +
                       (dtype_.empty()     ? "float32 in and out, CUBLAS_COMPUTE_32F (no TF32)"
                        : dtype_ == "tf32" ? "float32 in and out, CUBLAS_COMPUTE_32F_FAST_TF32"
                                           : dtype_ + " in and out, CUBLAS_COMPUTE_32F (float32 accumulation)"));
    return f;
  }

  void finish() override {
    const std::size_t count = static_cast<std::size_t>(m_ * n_);
    std::vector<unsigned char> c(count * types_.bytes);
    c_->download(c.data(), c.size());
    float* out = p_.out[0].data.data();
    if (types_.bytes == 4) {
      std::memcpy(out, c.data(), c.size());
    } else {
      std::vector<std::uint16_t> h(count);
      std::memcpy(h.data(), c.data(), c.size());
      from_16bit(h.data(), count, dtype_ == "bf16", out);
    }
  }

 private:
  OpProblem& p_;
  std::int64_t m_, n_, k_;
  std::string dtype_;
  GemmTypes types_;
  cublasHandle_t handle_ = nullptr;
  std::unique_ptr<DeviceBuffer> a_, b_, c_;
};

// Training with optimizer_impl = "native" on cuda: d500's device optimizer (networks/executor.cpp)
// has every rule through the fused optimizer kernel (cuda_kernels.cu), and SGD's family only in a
// build without nvcc.
std::string native_optimizer_check(const Params& p) {
#ifdef D500_HAVE_CUDA_KERNELS
  (void)p;
  return "";
#else
  const auto impl = p.find("optimizer_impl"), opt = p.find("optimizer");
  if (impl == p.end() || opt == p.end() || impl->second != Value{std::string("native")}) return "";
  const auto* name = std::get_if<std::string>(&opt->second);
  const auto& rules = axpy_optimizer_names();
  if (name && std::ranges::find(rules, *name) != rules.end()) return "";
  const std::string has = join({rules.begin(), rules.end() - 1}, ", ") + " and " + rules.back();
  return "optimizer_impl = \"native\" on cuda is d500's device optimizer, which in this build (CUDA without nvcc: no kernels of "
         "d500's own) has " +
         has + " (optimizer here: " + (name ? *name : std::string("?")) +
         "); optimizer_impl = \"reference\" runs every optimizer on the host's copies";
#endif
}

// math = "bf16" (levels 1-3): the executor's convolutions run in cuDNN's bfloat16 configuration
// (its legacy calls, or its graph API with cudnn_api = "graph") on bfloat16 copies that d500's
// own kernels make, and its matrix products in cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF.
std::string bf16_math_check([[maybe_unused]] const Params& p) {
#ifndef D500_HAVE_CUDA_KERNELS
  if (bf16_math(p))
    return "'math' \"bf16\" on cuda needs d500's own kernels (the bfloat16 copies of a convolution's tensors), which this build "
           "lacks (CUDA without nvcc); math = \"fp32\" or \"tf32\" run here";
#endif
  return "";
}

// memory_format = "channels_last" (levels 1-2): cuDNN's NHWC descriptors and d500's layout copies
// at the borders of the NHWC tensors (cuda_graph.cpp).
std::string channels_last_check([[maybe_unused]] const Params& p) {
#if !defined(D500_HAVE_CUDA_KERNELS) || !defined(D500_HAVE_CUDNN)
  if (str_param_or(p, "memory_format", "") == "channels_last")
    return "'memory_format' \"channels_last\" on cuda needs cuDNN and d500's own kernels (the layout copies), which "
           "this build lacks; memory_format = \"nchw\" runs here";
#endif
  return "";
}

// cuda_graph = "step" (level 2): the training step recorded once as a CUDA Graph and replayed
// (networks/executor.cpp: GraphExecutor::records_steps). A replay repeats what was recorded --
// pointers, and the optimizer's coefficients as kernel arguments -- so the step must be the same
// every time: d500's device optimizer with a constant learning rate and a rule without per-step
// terms. What only the network shows (a node on the host, Dropout's masks) is refused at setup.
std::string cuda_graph_check(const Params& p) {
  if (str_param_or(p, "cuda_graph", "") != "step") return "";
  const std::string pre =
      "'cuda_graph' \"step\" records the whole training step, the optimizer's included, and replays it: ";
  if (str_param_or(p, "workload", "") == "distributed")
    return pre + "level 3's schemes exchange gradients between the passes (it is for workload = \"train\")";
  if (str_param_or(p, "optimizer_impl", "reference") != "native")
    return pre +
           "it needs optimizer_impl = \"native\" (d500's device optimizer; the reference one updates the host's "
           "copies between steps)";
  const std::string opt = str_param_or(p, "optimizer", "momentum");
  if (opt == "adam" || opt == "adamw")
    return pre + "optimizer \"" + opt +
           "\" changes its bias corrections at every step, which a replay would repeat (sgd, momentum, nesterov, "
           "adagrad and rmsprop keep theirs)";
  const std::string schedule = str_param_or(p, "schedule", "constant");
  const auto warm = p.find("warmup_steps");
  const std::string why = schedule != "constant" ? "schedule = \"" + schedule + "\" changes it over the steps"
                          : warm != p.end() && warm->second != Value{std::int64_t{0}}
                              ? "warmup_steps = " + canonical(warm->second) + " raises it over the first steps"
                              : "";
  if (!why.empty())
    return pre + "the learning rate must be constant (" + why + ", and a replay repeats the recorded rate)";
  return "";
}

std::string point_check(const Params& p) {
  for (const auto& check : {bf16_math_check, channels_last_check, native_optimizer_check, cuda_graph_check})
    if (std::string why = check(p); !why.empty()) return why;
  return "";
}

}  // namespace

// The module's side of cuda_declared.hpp's declaration (the core's, which names the functions
// below; the registry checks that both agree when it loads this module).
void provide_backend_cuda(BackendRegistry& r) {
  BackendInfo b = cuda_declared();
  b.version = cuda_version;
  b.make_kernel = [](OpProblem& p, int) -> std::unique_ptr<OpKernel> {
#ifdef D500_HAVE_CUDNN
    if (p.op == "conv2d") return cuda::make_cudnn_conv(p);
    if (p.op != "gemm") return cuda::make_cudnn_op(p);
#endif
    return std::make_unique<CudaGemm>(p);
  };
  b.check_point = point_check;
  b.make_node_kernel = cuda::make_node_kernel;
  b.make_device_memory = cuda::make_executor_memory;
  b.channels_last = cuda::channels_last;
  b.bf16_storage = cuda::bf16_storage;
  b.no_device = cuda::no_device_reason;
  b.rank_device = cuda::rank_device_text;
  b.device_facts = cuda::device_facts;
  b.device_reading = cuda::device_reading;
  b.device_peak = cuda::device_peak_facts;
  r.add(std::move(b));
}

}  // namespace d500
