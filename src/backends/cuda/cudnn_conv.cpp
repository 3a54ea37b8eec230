// The cuda backend's convolutions: one cuDNN call per repetition (forward, backward data or
// backward filter), NCHW float32 tensors and KCRS weights (C per group) as d500's problem holds
// them, strict float32 arithmetic by default (CUDNN_FMA_MATH: no TF32; PyTorch allows TF32 in
// convolutions by default, so a side-by-side comparison sets torch.backends.cudnn.allow_tf32 =
// False), TF32 tensor cores allowed with the point's math = "tf32" (CUDNN_DEFAULT_MATH, then the
// chosen algorithm's own math type, as cuDNN asks); with the point's dtype = "bf16" or "fp16", the
// tensors in that type on the device (rounded on the host at setup, widened in finish(), both
// untimed) and cuDNN's pseudo-bfloat16 / pseudo-half configuration on tensor cores. The
// algorithm is cuDNN's heuristic first choice (cudnnGet*Algorithm_v7) among those that fit
// the workspace limit (with cudnn_algorithms = "deterministic", the first deterministic one; with
// "find", the fastest cudnnFind*AlgorithmEx timed on the point's own tensors), chosen at setup,
// before any warm-up, with its workspace allocated there. The heuristics' choice is the same for a
// device model, so every rank of a job records the same one; a found one is each rank's own (the
// point's cudnn.* attributes are rank 0's). Timing as every cuda kernel (cuda_common.hpp). The shared cuDNN
// pieces (the checked call, tensor descriptors, CudnnKernel) are defined here too.
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cudnn_common.hpp"
#include "backends/cuda/cudnn_graph_conv.hpp"
#include "backends/half.hpp"
#include "backends/kernel.hpp"
#include "common/error.hpp"

namespace d500::cuda {

void cudnn_check(cudnnStatus_t s, const char* call) {
  if (s != CUDNN_STATUS_SUCCESS) throw Error(std::string("cuda: ") + call + " failed: " + cudnnGetErrorString(s));
}

TensorDesc::TensorDesc(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, cudnnDataType_t type,
                       bool nhwc) {
  for (const std::int64_t d : {n, c, h, w})
    if (d > std::numeric_limits<int>::max())
      throw Error("cuda: a tensor dimension of " + std::to_string(d) + " is beyond cuDNN's int");
  cudnn_check(cudnnCreateTensorDescriptor(&d_), "cudnnCreateTensorDescriptor");
  cudnn_check(cudnnSetTensor4dDescriptor(d_, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, type, static_cast<int>(n),
                                         static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
              "cudnnSetTensor4dDescriptor");
}

TensorDesc::~TensorDesc() {
  if (d_) cudnnDestroyTensorDescriptor(d_);
}

Storage storage_of(const std::string& dtype) {
  return dtype == "bf16" ? Storage::BF16 : dtype == "fp16" ? Storage::F16 : Storage::F32;
}

cudnnDataType_t cudnn_type(Storage s) {
  return s == Storage::BF16 ? CUDNN_DATA_BFLOAT16 : s == Storage::F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

CudnnKernel::CudnnKernel(OpProblem& p, Storage storage) : p_(p), storage_(storage) {
  cudnn_check(cudnnCreate(&handle_), "cudnnCreate");
  cudnn_check(cudnnSetStream(handle_, timer_.stream()), "cudnnSetStream");
  const std::size_t element = storage == Storage::F32 ? sizeof(float) : sizeof(std::uint16_t);
  for (const auto& t : p.in) {
    in_.push_back(std::make_unique<DeviceBuffer>(t.data.size() * element));
    if (storage == Storage::F32) {
      in_.back()->upload(t.data.data(), t.data.size() * sizeof(float));
      continue;
    }
    const std::vector<std::uint16_t> narrow = to_16bit(t.data, storage == Storage::BF16);
    in_.back()->upload(narrow.data(), narrow.size() * sizeof(std::uint16_t));
  }
  // Outputs start as zeros, never as whatever the allocation held: cuDNN blends some of them
  // into their old values (batch normalisation's running statistics, with a factor of 1: 0 x NaN
  // would still be NaN).
  for (const auto& t : p.out) {
    out_.push_back(std::make_unique<DeviceBuffer>(t.data.size() * element));
    check(cudaMemset(out_.back()->get(), 0, t.data.size() * element), "cudaMemset");
  }
  // The zeros have landed before any work on the kernel's own (non-blocking) stream reads them.
  check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize (the zeroed outputs)");
}

CudnnKernel::~CudnnKernel() {
  if (handle_) cudnnDestroy(handle_);
}

void CudnnKernel::finish() {
  for (std::size_t i = 0; i < out_.size(); ++i) {
    std::vector<float>& o = p_.out[i].data;
    if (storage_ == Storage::F32) {
      out_[i]->download(o.data(), o.size() * sizeof(float));
      continue;
    }
    std::vector<std::uint16_t> narrow(o.size());
    out_[i]->download(narrow.data(), narrow.size() * sizeof(std::uint16_t));
    from_16bit(narrow.data(), narrow.size(), storage_ == Storage::BF16, o.data());
  }
}

void* CudnnKernel::scratch(std::size_t bytes) {
  scratch_.push_back(std::make_unique<DeviceBuffer>(bytes));
  return scratch_.back()->get();
}

cudnnMathType_t conv_math_of(const Params* p) { return p && tf32_math(*p) ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH; }

const char* math_type_name(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH ? "CUDNN_TENSOR_OP_MATH"
         : m == CUDNN_FMA_MATH     ? "CUDNN_FMA_MATH"
         : m == CUDNN_DEFAULT_MATH ? "CUDNN_DEFAULT_MATH"
                                   : "another math type";
}

std::string conv_math_words(cudnnMathType_t descriptor_math, cudnnMathType_t chosen) {
  if (descriptor_math == CUDNN_FMA_MATH) return "CUDNN_FMA_MATH (float32, no TF32)";
  return std::string(
             "CUDNN_DEFAULT_MATH (math = tf32: TF32 tensor cores allowed for float32, PyTorch's allow_tf32); the algorithm "
             "runs in ") +
         math_type_name(chosen);
}

namespace {

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

// One of cuDNN's perf results as the choice it would be: "backward data ALGO_1
// (non-deterministic)", its workspace, and (from a find) cuDNN's time for it.
template <class Perf, class Name>
ConvAlgorithm algorithm_of(const Perf& p, const char* pass, Name&& name, double found_ms = -1) {
  const bool det = p.determinism == CUDNN_DETERMINISTIC;
  return ConvAlgorithm{true,
                       static_cast<int>(p.algo),
                       p.memory,
                       det,
                       std::string(pass) + " " + name(p.algo) + (det ? "" : " (non-deterministic)"),
                       found_ms,
                       p.mathType};
}

// cuDNN's ranked choices for one pass (`rank(count, &returned, perfs)`, the cudnnGet*_v7 call
// named `call`), and the first of them that succeeded and fits the limit (and, preferring
// determinism, the first deterministic one of those if there is one).
template <class Perf, class Rank, class Name>
ConvAlgorithm first_fitting(int count, Rank&& rank, const char* call, const char* pass, Name&& name, Choice want) {
  int returned = 0;
  std::vector<Perf> ranked(static_cast<std::size_t>(count));
  cudnn_check(rank(count, &returned, ranked.data()), call);
  ConvAlgorithm any, same_bits;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = ranked[static_cast<std::size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > static_cast<std::size_t>(kCudnnWorkspaceLimit)) continue;
    const ConvAlgorithm a = algorithm_of(p, pass, name);
    if (!any.found) any = a;
    if (a.deterministic && !same_bits.found) same_bits = a;
  }
  return want == Choice::Deterministic && same_bits.found ? same_bits : any;
}

// The fastest of one pass's algorithms as cuDNN times them (`find(count, &returned, perfs,
// workspace, bytes)`, the cudnnFind*AlgorithmEx call named `find_call`, which runs each algorithm
// on the buffers it was given and returns them sorted by time). Its workspace is the largest that
// any algorithm of the heuristics' ranking (`rank`, named `rank_call`) asks within the limit, held
// only while it searches; the chosen one is the fastest that succeeded within it.
template <class Perf, class Rank, class Find, class Name>
ConvAlgorithm fastest_found(int count, Rank&& rank, const char* rank_call, Find&& find, const char* find_call,
                            const char* pass, Name&& name) {
  int returned = 0;
  std::vector<Perf> perfs(static_cast<std::size_t>(count));
  cudnn_check(rank(count, &returned, perfs.data()), rank_call);
  std::size_t limit = 0;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perfs[static_cast<std::size_t>(i)];
    if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= static_cast<std::size_t>(kCudnnWorkspaceLimit))
      limit = std::max(limit, p.memory);
  }
  std::unique_ptr<DeviceBuffer> workspace;
  if (limit > 0) workspace = std::make_unique<DeviceBuffer>(limit);
  returned = 0;
  perfs.assign(static_cast<std::size_t>(count), Perf{});
  cudnn_check(find(count, &returned, perfs.data(), workspace ? workspace->get() : nullptr, limit), find_call);
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perfs[static_cast<std::size_t>(i)];
    if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= limit)
      return algorithm_of(p, pass, name, static_cast<double>(p.time));
  }
  return {};
}

const ConvBuffers& buffers_for_find(const ConvBuffers* on) {
  if (!on || !on->x || !on->w || !on->y)
    throw Error("cuda: cuDNN's find needs the convolution's buffers (an internal error)");
  return *on;
}

// One pass's algorithm by the choice `c`: from cuDNN's heuristic ranking (`rank`, the call named
// `rank_call`), or, with Choice::Find, the fastest `find` (named `find_call`) times.
template <class Perf, class Rank, class Find, class Name>
ConvAlgorithm choose(int count, Choice c, const char* pass, Name&& name, Rank&& rank, const char* rank_call,
                     Find&& find, const char* find_call) {
  if (c != Choice::Find) return first_fitting<Perf>(count, rank, rank_call, pass, name, c);
  return fastest_found<Perf>(count, rank, rank_call, find, find_call, pass, name);
}

class CudnnConv final : public CudnnKernel {
 public:
  // dtype = "bf16" or "fp16": cuDNN's pseudo-bfloat16 or pseudo-half configuration (x, w, y in
  // that type, the convolution's compute type float32), on tensor cores (CUDNN_TENSOR_OP_MATH).
  explicit CudnnConv(OpProblem& p)
      : CudnnKernel(p, storage_of(p.params.count("dtype") ? p.s("dtype") : std::string())), cs_(conv_shape(p)) {
    auto dims = [](std::int64_t v) { return static_cast<int>(v); };
    const cudnnDataType_t type = cudnn_type(storage_);
    cudnn_check(cudnnCreateTensorDescriptor(&x_), "cudnnCreateTensorDescriptor");
    cudnn_check(cudnnCreateTensorDescriptor(&y_), "cudnnCreateTensorDescriptor");
    cudnn_check(cudnnCreateFilterDescriptor(&w_), "cudnnCreateFilterDescriptor");
    cudnn_check(cudnnCreateConvolutionDescriptor(&conv_), "cudnnCreateConvolutionDescriptor");
    cudnn_check(
        cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, type, dims(cs_.n), dims(cs_.c), dims(cs_.h), dims(cs_.w)),
        "cudnnSetTensor4dDescriptor (x)");
    cudnn_check(
        cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, type, dims(cs_.n), dims(cs_.k), dims(cs_.p()), dims(cs_.q())),
        "cudnnSetTensor4dDescriptor (y)");
    cudnn_check(
        cudnnSetFilter4dDescriptor(w_, type, CUDNN_TENSOR_NCHW, dims(cs_.k), dims(cs_.cg()), dims(cs_.r), dims(cs_.s)),
        "cudnnSetFilter4dDescriptor");
    cudnn_check(cudnnSetConvolution2dDescriptor(conv_, dims(cs_.pad), dims(cs_.pad), dims(cs_.stride), dims(cs_.stride),
                                                dims(cs_.dilation), dims(cs_.dilation), CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT),
                "cudnnSetConvolution2dDescriptor");
    cudnn_check(cudnnSetConvolutionGroupCount(conv_, dims(cs_.groups)), "cudnnSetConvolutionGroupCount");
    math_ = storage_ == Storage::F32 ? conv_math_of(&p_.params) : CUDNN_TENSOR_OP_MATH;
    cudnn_check(cudnnSetConvolutionMathType(conv_, math_), "cudnnSetConvolutionMathType");
    want_ = choice_of(&p_.params, Choice::Heuristic);
    // What a find runs on: this point's own tensors, inputs as uploaded, the output overwritten
    // (each run writes it whole). forward: in x, w, out y; backward data: in dy, w, out dx;
    // backward filter: in x, dy, out dw.
    const ConvBuffers on = p_.pass == "forward"         ? ConvBuffers{input_buffer(0), input_buffer(1), out(0)}
                           : p_.pass == "backward_data" ? ConvBuffers{out(0), input_buffer(1), input_buffer(0)}
                                                        : ConvBuffers{input_buffer(0), out(0), input_buffer(1)};
    if (graph_api_of(&p_.params)) {
      const ConvPass pass = p_.pass == "forward"         ? ConvPass::Forward
                            : p_.pass == "backward_data" ? ConvPass::BackwardData
                                                         : ConvPass::BackwardFilter;
      graph_ = std::make_unique<GraphConv>(
          handle_, graph_geom(cs_), pass, want_, storage_ == Storage::F32 && math_ != CUDNN_FMA_MATH, on,
          [this](std::size_t bytes) { return scratch(bytes); }, type);
      const ConvAlgorithm& a = graph_->chosen();
      workspace_bytes_ = a.workspace, algorithm_ = a.name, found_ms_ = a.found_ms;
      return;
    }
    const ConvAlgorithm a = p_.pass == "forward" ? choose_forward(handle_, x_, w_, conv_, y_, want_, &on)
                            : p_.pass == "backward_data"
                                ? choose_backward_data(handle_, x_, w_, conv_, y_, want_, &on)
                                : choose_backward_filter(handle_, x_, w_, conv_, y_, want_, &on);
    if (!a.found)
      throw Error("cuda: cuDNN offers no " + p_.pass + " algorithm for this convolution within a 1 GiB workspace");
    algo_ = a.algo, workspace_bytes_ = a.workspace, algorithm_ = a.name, found_ms_ = a.found_ms;
    // Strict float32 stays CUDNN_FMA_MATH whatever a perf result says (PyTorch asserts it is);
    // with TF32 allowed the call runs in the chosen algorithm's own math type, as cuDNN asks.
    if (math_ != CUDNN_FMA_MATH) {
      chosen_math_ = a.math;
      cudnn_check(cudnnSetConvolutionMathType(conv_, chosen_math_),
                  "cudnnSetConvolutionMathType (the chosen algorithm's)");
    }
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
      if (graph_)  // the plan and its buffers, made at setup
        s = graph_->run();
      else if (p_.pass == "forward")  // in: x, w; out: y
        s = cudnnConvolutionForward(handle_, &alpha, x_, in(0), w_, in(1), conv_,
                                    static_cast<cudnnConvolutionFwdAlgo_t>(algo_), ws, workspace_bytes_, &beta, y_,
                                    out(0));
      else if (p_.pass == "backward_data")  // in: dy, w; out: dx
        s = cudnnConvolutionBackwardData(handle_, &alpha, w_, in(1), y_, in(0), conv_,
                                         static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_), ws, workspace_bytes_, &beta,
                                         x_, out(0));
      else  // backward_filter; in: x, dy; out: dw
        s = cudnnConvolutionBackwardFilter(handle_, &alpha, x_, in(0), y_, in(1), conv_,
                                           static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo_), ws, workspace_bytes_,
                                           &beta, w_, out(0));
    });
    cudnn_check(s, "the cuDNN convolution");
  }

  std::vector<std::pair<std::string, Value>> facts() const override {
    std::string how;
    switch (want_) {
      case Choice::Heuristic:
        how =
            "cuDNN's heuristic first choice (cudnnGet*Algorithm_v7) within a 1 GiB workspace, deterministic or not (PyTorch's "
            "default; the algorithm's name says when it adds with atomics)";
        break;
      case Choice::Deterministic:
        how =
            "the first deterministic algorithm of cuDNN's heuristic ranking (cudnnGet*Algorithm_v7) within a 1 GiB workspace "
            "(cudnn_algorithms = deterministic; the heuristic first choice when none is)";
        break;
      case Choice::Find:
        how =
            "the fastest of every algorithm cuDNN ran once on this point's tensors at setup, before the warm-ups "
            "(cudnnFind*AlgorithmEx; cudnn_algorithms = find, PyTorch's cudnn.benchmark), within the largest workspace any "
            "asks up to 1 GiB; each rank finds its own, these attributes are rank 0's";
        break;
    }
    if (graph_) how = graph_->how();
    std::vector<std::pair<std::string, Value>> f{
        {"cudnn.algorithm", algorithm_},
        {"cudnn.workspace_bytes", static_cast<std::int64_t>(workspace_bytes_)},
        {"cudnn.choice",
         how + "; " + (graph_ ? graph_->math() : math_words()) + "; NCHW " + type_words() + ", weights KCRS"}};
    if (found_ms_ >= 0) f.emplace_back("cudnn.found_ms", found_ms_);
    // The bound is the arithmetic the point allows: with math = tf32, TF32 tensor cores, whether
    // the chosen algorithm uses them or not (cudnn.choice says); with a dtype, that type's.
    const char* arithmetic = storage_ == Storage::BF16  ? "bf16"
                             : storage_ == Storage::F16 ? "fp16"
                             : math_ == CUDNN_FMA_MATH  ? "fp32"
                                                        : "tf32";
    for (auto& kv : device_peak_facts(arithmetic)) f.push_back(std::move(kv));
    return f;
  }

 private:
  const char* type_words() const {
    return storage_ == Storage::BF16 ? "bfloat16" : storage_ == Storage::F16 ? "half" : "float32";
  }
  std::string math_words() const {
    if (storage_ == Storage::F32) return conv_math_words(math_, chosen_math_);
    return std::string("CUDNN_TENSOR_OP_MATH (dtype = ") + (storage_ == Storage::BF16 ? "bf16" : "fp16") + ": " +
           type_words() + " tensors, float32 compute type, PyTorch's conv2d on such tensors); the algorithm runs in " +
           math_type_name(chosen_math_);
  }

  ConvShape cs_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  Choice want_ = Choice::Heuristic;
  cudnnMathType_t math_ = CUDNN_FMA_MATH, chosen_math_ = CUDNN_FMA_MATH;  // the descriptor's; the chosen algorithm's
  double found_ms_ = -1;  // with Choice::Find, cuDNN's time for the chosen algorithm
  int algo_ = 0;          // the pass's cuDNN algorithm enum
  std::size_t workspace_bytes_ = 0;
  std::string algorithm_;
  void* workspace_ = nullptr;
  std::unique_ptr<GraphConv> graph_;  // cudnn_api = "graph": cuDNN's graph API instead of the calls above
};

}  // namespace

ConvAlgorithm choose_forward(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                             cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, Choice c,
                             const ConvBuffers* on) {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  return choose<Perf>(
      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, c, "forward", fwd_name,
      [&](int n, int* got, Perf* r) { return cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv, y, n, got, r); },
      "cudnnGetConvolutionForwardAlgorithm_v7",
      [&](int n, int* got, Perf* r, void* ws, std::size_t bytes) {
        const ConvBuffers& b = buffers_for_find(on);
        return cudnnFindConvolutionForwardAlgorithmEx(h, x, b.x, w, b.w, conv, y, b.y, n, got, r, ws, bytes);
      },
      "cudnnFindConvolutionForwardAlgorithmEx");
}

ConvAlgorithm choose_backward_data(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                   cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, Choice c,
                                   const ConvBuffers* on) {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  return choose<Perf>(
      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, c, "backward data", bwd_data_name,
      [&](int n, int* got, Perf* r) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, y, conv, x, n, got, r);
      },
      "cudnnGetConvolutionBackwardDataAlgorithm_v7",
      [&](int n, int* got, Perf* r, void* ws, std::size_t bytes) {
        const ConvBuffers& b = buffers_for_find(on);
        return cudnnFindConvolutionBackwardDataAlgorithmEx(h, w, b.w, y, b.y, conv, x, b.x, n, got, r, ws, bytes);
      },
      "cudnnFindConvolutionBackwardDataAlgorithmEx");
}

ConvAlgorithm choose_backward_filter(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                     cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, Choice c,
                                     const ConvBuffers* on) {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  return choose<Perf>(
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, c, "backward filter", bwd_filter_name,
      [&](int n, int* got, Perf* r) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, conv, w, n, got, r);
      },
      "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
      [&](int n, int* got, Perf* r, void* ws, std::size_t bytes) {
        const ConvBuffers& b = buffers_for_find(on);
        return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, x, b.x, y, b.y, conv, w, b.w, n, got, r, ws, bytes);
      },
      "cudnnFindConvolutionBackwardFilterAlgorithmEx");
}

std::unique_ptr<OpKernel> make_cudnn_conv(OpProblem& p) { return std::make_unique<CudnnConv>(p); }

std::string cudnn_version() {
  const std::size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch since cuDNN 9
  return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

}  // namespace d500::cuda
