// The cuda backend's convolutions: one cuDNN call per repetition (forward, backward data or
// backward filter), NCHW float32 tensors and KCRS weights (C per group) as d500's problem holds
// them, strict float32 arithmetic (CUDNN_FMA_MATH: no TF32; PyTorch allows TF32 in convolutions
// by default, so a side-by-side comparison sets torch.backends.cudnn.allow_tf32 = False). The
// algorithm is cuDNN's heuristic first choice (cudnnGet*Algorithm_v7) among those that fit
// the workspace limit (with cudnn_algorithms = "deterministic", the first deterministic one),
// chosen at setup with its workspace allocated there: the same choice for a device model, so
// every rank of a job records the same one (its name and workspace are the point's cudnn.*
// attributes). Timing as every cuda kernel (cuda_common.hpp). The shared cuDNN
// pieces (the checked call, tensor descriptors, CudnnKernel) are defined here too.
#include <limits>
#include <string>
#include <vector>

#include "backends/cuda/cudnn_common.hpp"
#include "common/error.hpp"

namespace d500::cuda {

void cudnn_check(cudnnStatus_t s, const char* call) {
  if (s != CUDNN_STATUS_SUCCESS) throw Error(std::string("cuda: ") + call + " failed: " + cudnnGetErrorString(s));
}

TensorDesc::TensorDesc(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  for (const std::int64_t d : {n, c, h, w})
    if (d > std::numeric_limits<int>::max()) throw Error("cuda: a tensor dimension of " + std::to_string(d) + " is beyond cuDNN's int");
  cudnn_check(cudnnCreateTensorDescriptor(&d_), "cudnnCreateTensorDescriptor");
  cudnn_check(cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n), static_cast<int>(c),
                                         static_cast<int>(h), static_cast<int>(w)),
              "cudnnSetTensor4dDescriptor");
}

TensorDesc::~TensorDesc() {
  if (d_) cudnnDestroyTensorDescriptor(d_);
}

CudnnKernel::CudnnKernel(OpProblem& p) : p_(p) {
  cudnn_check(cudnnCreate(&handle_), "cudnnCreate");
  cudnn_check(cudnnSetStream(handle_, timer_.stream()), "cudnnSetStream");
  for (const auto& t : p.in) {
    in_.push_back(std::make_unique<DeviceBuffer>(t.data.size() * sizeof(float)));
    in_.back()->upload(t.data.data(), t.data.size() * sizeof(float));
  }
  // Outputs start as zeros, never as whatever the allocation held: cuDNN blends some of them
  // into their old values (batch normalisation's running statistics, with a factor of 1: 0 x NaN
  // would still be NaN).
  for (const auto& t : p.out) {
    out_.push_back(std::make_unique<DeviceBuffer>(t.data.size() * sizeof(float)));
    check(cudaMemset(out_.back()->get(), 0, t.data.size() * sizeof(float)), "cudaMemset");
  }
}

CudnnKernel::~CudnnKernel() {
  if (handle_) cudnnDestroy(handle_);
}

void CudnnKernel::finish() {
  for (std::size_t i = 0; i < out_.size(); ++i) out_[i]->download(p_.out[i].data.data(), p_.out[i].data.size() * sizeof(float));
}

void* CudnnKernel::scratch(std::size_t bytes) {
  scratch_.push_back(std::make_unique<DeviceBuffer>(bytes));
  return scratch_.back()->get();
}

namespace {

// The largest workspace an algorithm may ask for: beyond it, the next of cuDNN's choices.
constexpr std::size_t kWorkspaceLimit = std::size_t{1} << 30;

const char* fwd_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "unknown";
  }
}

const char* bwd_data_name(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "unknown";
  }
}

const char* bwd_filter_name(cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "FFT_TILING";
    default: return "unknown";
  }
}

// cuDNN's ranked choices for one pass (`rank(count, &returned, perfs)`, the cudnnGet*_v7 call
// named `call`), and the first of them that succeeded and fits the limit (and, preferring
// determinism, the first deterministic one of those if there is one).
template <class Perf, class Rank, class Name>
ConvAlgorithm first_fitting(int count, Rank&& rank, const char* call, const char* pass, Name&& name, Determinism want) {
  int returned = 0;
  std::vector<Perf> ranked(static_cast<std::size_t>(count));
  cudnn_check(rank(count, &returned, ranked.data()), call);
  ConvAlgorithm any, same_bits;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = ranked[static_cast<std::size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kWorkspaceLimit) continue;
    const bool det = p.determinism == CUDNN_DETERMINISTIC;
    const ConvAlgorithm a{true, static_cast<int>(p.algo), p.memory, det,
                          std::string(pass) + " " + name(p.algo) + (det ? "" : " (non-deterministic)")};
    if (!any.found) any = a;
    if (det && !same_bits.found) same_bits = a;
  }
  return want == Determinism::Prefer && same_bits.found ? same_bits : any;
}

class CudnnConv final : public CudnnKernel {
 public:
  explicit CudnnConv(OpProblem& p) : CudnnKernel(p), cs_(conv_shape(p)) {
    auto dims = [](std::int64_t v) { return static_cast<int>(v); };
    cudnn_check(cudnnCreateTensorDescriptor(&x_), "cudnnCreateTensorDescriptor");
    cudnn_check(cudnnCreateTensorDescriptor(&y_), "cudnnCreateTensorDescriptor");
    cudnn_check(cudnnCreateFilterDescriptor(&w_), "cudnnCreateFilterDescriptor");
    cudnn_check(cudnnCreateConvolutionDescriptor(&conv_), "cudnnCreateConvolutionDescriptor");
    cudnn_check(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, dims(cs_.n), dims(cs_.c), dims(cs_.h), dims(cs_.w)),
                "cudnnSetTensor4dDescriptor (x)");
    cudnn_check(cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, dims(cs_.n), dims(cs_.k), dims(cs_.p()), dims(cs_.q())),
                "cudnnSetTensor4dDescriptor (y)");
    cudnn_check(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, dims(cs_.k), dims(cs_.cg()), dims(cs_.r), dims(cs_.s)),
                "cudnnSetFilter4dDescriptor");
    cudnn_check(cudnnSetConvolution2dDescriptor(conv_, dims(cs_.pad), dims(cs_.pad), dims(cs_.stride), dims(cs_.stride), dims(cs_.dilation),
                                                dims(cs_.dilation), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                "cudnnSetConvolution2dDescriptor");
    cudnn_check(cudnnSetConvolutionGroupCount(conv_, dims(cs_.groups)), "cudnnSetConvolutionGroupCount");
    cudnn_check(cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
    want_ = determinism_of(&p_.params, Determinism::Any);
    const ConvAlgorithm a = p_.pass == "forward"         ? choose_forward(handle_, x_, w_, conv_, y_, want_)
                            : p_.pass == "backward_data" ? choose_backward_data(handle_, x_, w_, conv_, y_, want_)
                                                         : choose_backward_filter(handle_, x_, w_, conv_, y_, want_);
    if (!a.found) throw Error("cuda: cuDNN offers no " + p_.pass + " algorithm for this convolution within a 1 GiB workspace");
    algo_ = a.algo, workspace_bytes_ = a.workspace, algorithm_ = a.name;
    if (workspace_bytes_ > 0) workspace_ = scratch(workspace_bytes_);
  }
  ~CudnnConv() override {
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (x_) cudnnDestroyTensorDescriptor(x_);
  }

  void run() override {
    const float alpha = 1.0f, beta = 0.0f;
    void* ws = workspace_;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    timer_.timed([&] {
      if (p_.pass == "forward")  // in: x, w; out: y
        s = cudnnConvolutionForward(handle_, &alpha, x_, in(0), w_, in(1), conv_, static_cast<cudnnConvolutionFwdAlgo_t>(algo_), ws,
                                    workspace_bytes_, &beta, y_, out(0));
      else if (p_.pass == "backward_data")  // in: dy, w; out: dx
        s = cudnnConvolutionBackwardData(handle_, &alpha, w_, in(1), y_, in(0), conv_, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_), ws,
                                         workspace_bytes_, &beta, x_, out(0));
      else  // backward_filter; in: x, dy; out: dw
        s = cudnnConvolutionBackwardFilter(handle_, &alpha, x_, in(0), y_, in(1), conv_, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo_),
                                           ws, workspace_bytes_, &beta, w_, out(0));
    });
    cudnn_check(s, "the cuDNN convolution");
  }

  std::vector<std::pair<std::string, Value>> facts() const override {
    return {{"cudnn.algorithm", algorithm_},
            {"cudnn.workspace_bytes", static_cast<std::int64_t>(workspace_bytes_)},
            {"cudnn.choice", std::string(want_ == Determinism::Any
                                             ? "cuDNN's heuristic first choice (cudnnGet*Algorithm_v7) within a 1 GiB workspace, deterministic "
                                               "or not (PyTorch's default; the algorithm's name says when it adds with atomics)"
                                             : "the first deterministic algorithm of cuDNN's heuristic ranking (cudnnGet*Algorithm_v7) within "
                                               "a 1 GiB workspace (cudnn_algorithms = deterministic; the heuristic first choice when none is)") +
                                 "; CUDNN_FMA_MATH (float32, no TF32); NCHW float32, weights KCRS"}};
  }

 private:
  ConvShape cs_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  Determinism want_ = Determinism::Any;
  int algo_ = 0;  // the pass's cuDNN algorithm enum
  std::size_t workspace_bytes_ = 0;
  std::string algorithm_;
  void* workspace_ = nullptr;
};

}  // namespace

ConvAlgorithm choose_forward(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                             cudnnTensorDescriptor_t y, Determinism d) {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  return first_fitting<Perf>(
      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, [&](int n, int* got, Perf* r) { return cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv, y, n, got, r); },
      "cudnnGetConvolutionForwardAlgorithm_v7", "forward", fwd_name, d);
}

ConvAlgorithm choose_backward_data(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                   cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, Determinism d) {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  return first_fitting<Perf>(
      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
      [&](int n, int* got, Perf* r) { return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, y, conv, x, n, got, r); },
      "cudnnGetConvolutionBackwardDataAlgorithm_v7", "backward data", bwd_data_name, d);
}

ConvAlgorithm choose_backward_filter(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                     cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, Determinism d) {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  return first_fitting<Perf>(
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
      [&](int n, int* got, Perf* r) { return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, conv, w, n, got, r); },
      "cudnnGetConvolutionBackwardFilterAlgorithm_v7", "backward filter", bwd_filter_name, d);
}

std::unique_ptr<OpKernel> make_cudnn_conv(OpProblem& p) { return std::make_unique<CudnnConv>(p); }

std::string cudnn_version() {
  const std::size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch since cuDNN 9
  return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

}  // namespace d500::cuda
