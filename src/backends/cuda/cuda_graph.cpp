// The cuda backend at level 1: the memory d500's graph executor keeps a network in on this rank's
// GPU (ExecutorMemory: one non-blocking stream, a cuBLAS handle and, with cuDNN, a cuDNN handle on
// it), and node kernels that enqueue on that stream. Float32 tensors throughout, strict float32
// arithmetic by default: cuBLAS in CUBLAS_DEFAULT_MATH and cuDNN convolutions in CUDNN_FMA_MATH
// (no TF32), as the yardstick's tolerance for float32 assumes; with the point's math = "tf32", cuBLAS in
// CUBLAS_TF32_TENSOR_OP_MATH and cuDNN's descriptors in CUDNN_DEFAULT_MATH (TF32 tensor cores
// allowed, as PyTorch's allow_tf32 flags do), validated with the wider tolerance that states; with
// math = "bf16" (mixed precision), cuBLAS in CUBLAS_COMPUTE_32F_FAST_16BF (float32 in and out,
// inputs rounded to bfloat16, float32 sums) and cuDNN's convolutions in its bfloat16
// configuration (CUDNN_TENSOR_OP_MATH; with cudnn_api = "graph", graph-API plans on bfloat16
// tensors) on bfloat16 copies of x, w and dy that d500's kernels round at each call into the
// executor's shared scratch (a trained Conv's x into a copy of its own, kept from the forward pass
// for the backward-filter pass), the result widened back to float32 -- except the activations the
// executor stores in bfloat16 itself, as PyTorch's autocast keeps them (bf16_storage: between the
// convolutions, cuDNN's batch normalisations and poolings on bfloat16 descriptors where this GPU's
// cuDNN takes them -- else d500's normalisation kernels, and float32 around the poolings -- and
// d500's bfloat16 kernels for Relu, Add, AddRelu and GlobalAveragePool), which the passes read and
// write where they lie.
//   Gemm, MatMul (2-D weights, or equal batches)  cuBLAS sgemm / sgemm strided batched
//   Add (operands of one shape)                    d500's add kernel, one pass (without nvcc:
//                                                  a device copy and cublasSaxpy)
//   AddRelu (fusion = "add_relu": an Add of one    d500's add-relu kernel, one pass each way
//   shape and the Relu alone reading it)           (without nvcc: copy, saxpy, cuDNN activation)
//   Conv, ConvTranspose (1-D, 2-D; symmetric       cuDNN forward, backward data, backward filter,
//   pads; ConvTranspose: the convolution's         (ConvTranspose: forward by backward data)
//   adjoint)
//                                                  backward bias; the algorithm cuDNN's heuristic
//                                                  first deterministic choice within 1 GiB of
//                                                  workspace (any first choice if none is, or
//                                                  with cudnn_algorithms = "heuristic"; the
//                                                  fastest cuDNN's find timed with "find", once
//                                                  per pass and geometry in a network); with
//                                                  cudnn_api = "graph", execution plans of
//                                                  cuDNN's graph API (cudnn_graph_conv.hpp),
//                                                  one per pass and geometry, shared
//   MaxPool, AveragePool, GlobalAveragePool        cuDNN pooling (max in its deterministic mode
//                                                  unless "heuristic" or "find"; no
//                                                  dilation, symmetric pads, the floor rule); in
//                                                  training the kernel keeps its own
//                                                  copy of what cuDNN's backward reads and the
//                                                  executor does not keep (the output; an average's input)
//   Relu                                           cuDNN activation
//   Softmax, LogSoftmax                            cuDNN softmax (accurate / log)
//   BatchNormalization (without running-statistics  cuDNN spatial batch normalisation, batch
//   outputs)                                       statistics in training; with them, or
//                                                  without cuDNN: d500's kernels below
//   SoftmaxCrossEntropyLoss, broadcast Add, Sub,   d500's own kernels (device_ops.hpp's functions,
//   Mul, Div, Pow, Where; the unary activations    compiled by nvcc into cuda_kernels.cu: one
//   and Clip; ReduceSum, ReduceMean; Transpose;    thread per element or row; the reductions
//   LayerNormalization; Gather; Concat, Split,     serial, in double, long ones in fixed parts;
//   Slice, Pad, Expand; Cast                       no atomics)
// With cuda_graph = "step" (level 2) the memory records the stream's work of one training step
// as a CUDA Graph (stream capture, thread-local mode; cuBLAS given a workspace of its own first)
// and launches it at every later step (ExecutorMemory::begin_capture, replay).
// Every other node, and these outside the cases above, run on the reference through host
// mirrors (the executor's fallback, named per node). The executor's device path is tested on the
// host with a guarded test device (networks/executor_test.cpp), and these kernels against the
// yardstick by the same test and the GPU integration tests where a GPU is visible (they ran on an
// H100: launchers/device-check.sh).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/conv_geom.hpp"
#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/cuda_kernels.hpp"
#include "backends/device.hpp"
#include "backends/graph.hpp"
#include "backends/graph_ops.hpp"
#include "backends/half.hpp"
#include "common/error.hpp"
#ifdef D500_HAVE_CUDNN
#include "backends/cuda/cudnn_common.hpp"
#include "backends/cuda/cudnn_graph_conv.hpp"
#endif

namespace d500::cuda {
namespace {

using I = std::int64_t;

void blas_check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(std::string("cuda: ") + call + " failed: " + cublasGetStatusString(s));
}

bool fits_int(I v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }
int to_int(I v) { return static_cast<int>(v); }

class ExecutorMemory final : public DeviceMemory {
 public:
  ExecutorMemory() {
    use_rank_device();
    use_ = std::make_unique<DeviceMemoryUse>();  // the baseline: the context made, nothing of ours yet
    check(cudaGetDevice(&device_), "cudaGetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
    blas_check(cublasCreate(&blas_), "cublasCreate");
    blas_check(cublasSetStream(blas_, stream_), "cublasSetStream");
    blas_check(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
#ifdef D500_HAVE_CUDNN
    cudnn_check(cudnnCreate(&dnn_), "cudnnCreate");
    cudnn_check(cudnnSetStream(dnn_, stream_), "cudnnSetStream");
#endif
    cudaDeviceProp prop{};
    name_ = "cuda:" + std::to_string(device_);
    if (cudaGetDeviceProperties(&prop, device_) == cudaSuccess) name_ += std::string(", ") + prop.name;
  }
  ~ExecutorMemory() override {
    if (capturing_) {  // a recording a failed call ended: the stream back to normal, the graph dropped
      cudaGraph_t g = nullptr;
      if (cudaStreamEndCapture(stream_, &g) == cudaSuccess && g) cudaGraphDestroy(g);
      cudaGetLastError();
    }
    if (exec_) cudaGraphExecDestroy(exec_);
    if (stream_) cudaStreamSynchronize(stream_);
    if (beside_) cudaStreamSynchronize(beside_);
    for (const void* h : pinned_) cudaHostUnregister(const_cast<void*>(h));
    if (scratch_) cudaFree(scratch_);
#ifdef D500_HAVE_CUDNN
    graph_plans_.clear();
    if (dnn_) cudnnDestroy(dnn_);
#endif
    if (blas_) cublasDestroy(blas_);
    if (blas_workspace_) cudaFree(blas_workspace_);  // the handle's until it ends
    for (cudaEvent_t e : marks_) cudaEventDestroy(e);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (beside_done_) cudaEventDestroy(beside_done_);
    if (beside_read_) cudaEventDestroy(beside_read_);
    if (beside_) cudaStreamDestroy(beside_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  ExecutorMemory(const ExecutorMemory&) = delete;
  ExecutorMemory& operator=(const ExecutorMemory&) = delete;

  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)), "cudaMalloc (the executor's memory)");
    // Zeroed on the executor's stream, so that everything enqueued there after sees the zeros (a
    // plain cudaMemset runs on the legacy stream, which this non-blocking one does not wait for);
    // waited for, so that another stream's work (a collective's) sees them too.
    cudaError_t e = cudaMemsetAsync(p, 0, std::max<std::size_t>(bytes, 1), stream_);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) {
      cudaFree(p);
      check(e, "cudaMemsetAsync");
    }
    return p;
  }
  void release(void* p) noexcept override { cudaFree(p); }
  void upload(void* device, const void* host, std::size_t bytes) override {
    check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (to the device)");
    synchronize();
  }
  void download(void* host, const void* device, std::size_t bytes) override {
    check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (to the host)");
    synchronize();
  }
  // cudaHostRegister: a copy from pageable memory is staged through the driver's own pinned
  // buffers, one from page-locked memory goes straight across (ResNet-50's batch of 128 is 77 MB);
  // a range the driver refuses (already registered, no memory to lock) is copied as before.
  // Unregistered when this memory ends.
  void pin(const void* host, std::size_t bytes) noexcept override {
    if (cudaHostRegister(const_cast<void*>(host), bytes, cudaHostRegisterDefault) == cudaSuccess)
      pinned_.push_back(host);
    else
      cudaGetLastError();  // not sticky: clear it, so that the next check does not report it
  }
  bool upload_beside(void* staged, const void* host, std::size_t bytes) override {
    if (!beside_) {
      check(cudaStreamCreateWithFlags(&beside_, cudaStreamNonBlocking), "cudaStreamCreate (the copies beside)");
      check(cudaEventCreateWithFlags(&beside_done_, cudaEventDisableTiming), "cudaEventCreate (the copies beside)");
      check(cudaEventCreateWithFlags(&beside_read_, cudaEventDisableTiming), "cudaEventCreate (the copies beside)");
    }
    // Not before the stream has taken what the last copies put there.
    if (beside_read_recorded_) check(cudaStreamWaitEvent(beside_, beside_read_, 0), "cudaStreamWaitEvent (beside)");
    check(cudaMemcpyAsync(staged, host, bytes, cudaMemcpyHostToDevice, beside_), "cudaMemcpyAsync (beside)");
    check(cudaEventRecord(beside_done_, beside_), "cudaEventRecord (the copies beside)");
    return true;
  }
  void take_beside(void* dst, const void* staged, std::size_t bytes) override {
    if (beside_done_) check(cudaEventSynchronize(beside_done_), "cudaEventSynchronize (the copies beside)");
    copy(dst, staged, bytes);
    if (beside_read_) {
      check(cudaEventRecord(beside_read_, stream_), "cudaEventRecord (the copies beside, taken)");
      beside_read_recorded_ = true;
    }
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync (on the device)");
  }
  void zero(void* p, std::size_t bytes) override { check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync"); }
  void axpy(float alpha, const float* x, float* y, std::int64_t n) override {
    blas_check(cublasSaxpy_64(blas_, n, &alpha, x, 1, y, 1), "cublasSaxpy_64");
  }
  void scale(float alpha, float* x, std::int64_t n) override {
    blas_check(cublasSscal_64(blas_, n, &alpha, x, 1), "cublasSscal_64");
  }
#ifdef D500_HAVE_CUDA_KERNELS
  bool has_optimizer_step() const override { return true; }
  void optimizer_step(const StepRule& r, float* p, const float* g, float* a, float* b, std::int64_t n) override {
    check(launch_optimizer_step(r, p, g, a, b, n, stream_), "the optimizer kernel's launch");
  }
  void add_bf16(const void* x, void* y, std::int64_t n) override {
    check(launch_add_bf16(y, x, y, n, stream_), "the bfloat16 add kernel's launch");
  }
#endif
  void synchronize() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  std::string describe() const override { return name_; }
  void start_timing() override { check(cudaEventRecord(start_, stream_), "cudaEventRecord"); }
  std::int64_t stop_timing() override {
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return static_cast<std::int64_t>(std::llround(static_cast<double>(ms) * 1e6));
  }
  std::int64_t peak_bytes() const override { return use_->peak(); }
  bool reserve_marks(std::size_t n) override {
    while (marks_.size() < n) {
      cudaEvent_t e = nullptr;
      check(cudaEventCreate(&e), "cudaEventCreate");
      marks_.push_back(e);
    }
    return true;
  }
  void mark(std::size_t i) override { check(cudaEventRecord(marks_.at(i), stream_), "cudaEventRecord"); }
  std::int64_t mark_ns(std::size_t i, std::size_t j) override {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, marks_.at(i), marks_.at(j)), "cudaEventElapsedTime");
    return static_cast<std::int64_t>(std::llround(static_cast<double>(ms) * 1e6));
  }

  void* native_stream() const override { return stream_; }

  // A CUDA Graph of the stream's work: captured in this thread's mode (the thread beside, making
  // the next batch on the host, is not recorded), instantiated once, launched on the stream. cuBLAS
  // gets a workspace of its own first, as its documentation asks of graphs (a recorded product
  // then allocates nothing). A call that cannot be recorded (a copy to the host, a wait) fails
  // with CUDA's error, and end_capture() with "operation not permitted when stream is capturing".
  bool can_capture() const override { return true; }
  void begin_capture() override {
    if (!blas_workspace_) {
      blas_workspace_ = allocate(kBlasWorkspaceBytes);
      blas_check(cublasSetWorkspace(blas_, blas_workspace_, kBlasWorkspaceBytes), "cublasSetWorkspace");
    }
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    capturing_ = true;
  }
  void end_capture() override {
    capturing_ = false;
    cudaGraph_t g = nullptr;
    check(cudaStreamEndCapture(stream_, &g), "cudaStreamEndCapture (the step held a call a graph cannot)");
    if (exec_) cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec_, g, 0);
    cudaGraphDestroy(g);
    check(e, "cudaGraphInstantiate");
  }
  void replay() override { check(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch"); }

  cudaStream_t stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  // Device memory the node kernels share for what lives only within one of their calls (the
  // bfloat16 copies of a convolution's tensors with math = "bf16"): every node runs in order on
  // the one stream, so no two calls use it at once. Grown at setup (untimed) to the most any
  // kernel reserves; scratch() is read at each call, as a later reservation may move it.
  void reserve_scratch(std::size_t bytes) {
    if (bytes <= scratch_bytes_) return;
    if (scratch_) {
      synchronize();
      release(scratch_);
      scratch_ = nullptr, scratch_bytes_ = 0;
    }
    scratch_ = allocate(bytes);
    scratch_bytes_ = bytes;
  }
  void* scratch() const { return scratch_; }
#ifdef D500_HAVE_CUDNN
  cudnnHandle_t dnn() const { return dnn_; }
  // One convolution pass's algorithm (`key`: the pass and its geometry): chosen by `choose` the
  // first time, the same choice for every later convolution of that pass and geometry in this
  // network (found ones, as PyTorch's cudnn.benchmark caches them; the heuristics' are the same anyway).
  template <class Choose>
  ConvAlgorithm conv_algorithm(const std::string& key, Choice c, Choose&& choose) {
    const std::string k = std::to_string(static_cast<int>(c)) + " " + key;
    if (const auto it = algorithms_.find(k); it != algorithms_.end()) return it->second;
    return algorithms_[k] = choose();
  }
  // One convolution pass's plan of cuDNN's graph API (`key`: the pass, its geometry and math),
  // searched by `make` the first time; a later convolution of that key runs the same plan on its
  // own buffers (GraphConv::SamePlan), as PyTorch's cache of plans does.
  template <class Make>
  std::shared_ptr<GraphConv> graph_plan(const std::string& key, Choice c, Make&& make) {
    const std::string k = std::to_string(static_cast<int>(c)) + " " + key;
    if (const auto it = graph_plans_.find(k); it != graph_plans_.end())
      return std::make_shared<GraphConv>(GraphConv::SamePlan{}, *it->second);
    std::shared_ptr<GraphConv> made = make();  // a refusal (GraphConvUnserved) leaves no entry
    return graph_plans_[k] = std::move(made);
  }
#endif

 private:
  int device_ = 0;
  std::unique_ptr<DeviceMemoryUse> use_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t beside_ = nullptr;      // upload_beside's copies, made at the first
  cudaEvent_t beside_done_ = nullptr;  // the last of them
  cudaEvent_t beside_read_ = nullptr;  // on stream_: what take_beside() copied out of them, taken
  bool beside_read_recorded_ = false;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::vector<cudaEvent_t> marks_;
  std::vector<const void*> pinned_;  // host ranges pin() page-locked
  cublasHandle_t blas_ = nullptr;
  // begin_capture(): cuBLAS's own workspace (32 MiB, cuBLAS's advice for Hopper), the graph.
  static constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20;
  void* blas_workspace_ = nullptr;
  bool capturing_ = false;
  cudaGraphExec_t exec_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
#ifdef D500_HAVE_CUDNN
  cudnnHandle_t dnn_ = nullptr;
  std::map<std::string, ConvAlgorithm> algorithms_;
  std::map<std::string, std::shared_ptr<GraphConv>>
      graph_plans_;  // the first of each key's; destroyed before the handle
#endif
  std::string name_;
};

#ifdef D500_HAVE_CUDNN
// A view's cuDNN data type: float32, or bfloat16 where the executor stores it so (math = "bf16").
cudnnDataType_t data_type(const TensorView& v) { return v.bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }
#endif

// What every node kernel here holds: the problem and the executor's memory, and device buffers of
// its own (released before the memory goes: the executor destroys its kernels first).
class CudaNode : public NodeKernel {
 public:
  // The handle is the executor's, and every node of one executor has the point's parameters: each
  // sets the handle's math to the point's (math = "tf32": TF32 tensor cores in GEMMs), at setup.
  // With math = "bf16", the matrix products run in CUBLAS_COMPUTE_32F_FAST_16BF instead (float32
  // in and out, the inputs rounded to bfloat16 by tensor cores, float32 sums).
  CudaNode(const NodeProblem& p, ExecutorMemory& m) : p_(p), m_(m), bf16_(p.params && bf16_math(*p.params)) {
    blas_check(cublasSetMathMode(m.blas(),
                                 p.params && tf32_math(*p.params) ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
               "cublasSetMathMode");
  }
  ~CudaNode() override {
    for (void* b : own_) m_.release(b);
  }
  CudaNode(const CudaNode&) = delete;
  CudaNode& operator=(const CudaNode&) = delete;

 protected:
  void* own(std::size_t bytes) {
    own_.push_back(m_.allocate(bytes));
    return own_.back();
  }
  float* ones(I n) {
    const std::vector<float> v(static_cast<std::size_t>(n), 1.0f);
    auto* d = static_cast<float*>(own(v.size() * sizeof(float)));
    m_.upload(d, v.data(), v.size() * sizeof(float));
    return d;
  }
  float* in(std::size_t i) const { return p_.in[i].as<float>(); }
  float* out(std::size_t j) const { return p_.out[j].as<float>(); }
  float* din(std::size_t i) const { return i < p_.din.size() ? p_.din[i].as<float>() : nullptr; }
  const float* dout(std::size_t j) const { return p_.dout[j].as<const float>(); }

  // Row-major C [m, n] = alpha op(A) op(B) + beta C (lda, ldb: the stored rows' lengths), as
  // cuBLAS's column-major C^T = op(B)^T op(A)^T; `count` products `sa`, `sb`, `sc` apart; in the
  // point's math (exact: strict float32 whatever it is, for a copy through a product of ones).
  void sgemm(bool ta, bool tb, I m, I n, I k, float alpha, const float* a, I lda, const float* b, I ldb, float beta,
             float* c, I ldc, I count = 1, I sa = 0, I sb = 0, I sc = 0, bool exact = false) const {
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (bf16_ && !exact) {
      if (count == 1)
        blas_check(cublasGemmEx(m_.blas(), opb, opa, to_int(n), to_int(m), to_int(k), &alpha, b, CUDA_R_32F,
                                to_int(ldb), a, CUDA_R_32F, to_int(lda), &beta, c, CUDA_R_32F, to_int(ldc),
                                CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx (CUBLAS_COMPUTE_32F_FAST_16BF)");
      else
        blas_check(cublasGemmStridedBatchedEx(m_.blas(), opb, opa, to_int(n), to_int(m), to_int(k), &alpha, b,
                                              CUDA_R_32F, to_int(ldb), sb, a, CUDA_R_32F, to_int(lda), sa, &beta, c,
                                              CUDA_R_32F, to_int(ldc), sc, to_int(count), CUBLAS_COMPUTE_32F_FAST_16BF,
                                              CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx (CUBLAS_COMPUTE_32F_FAST_16BF)");
      return;
    }
    if (count == 1)
      blas_check(cublasSgemm(m_.blas(), opb, opa, to_int(n), to_int(m), to_int(k), &alpha, b, to_int(ldb), a,
                             to_int(lda), &beta, c, to_int(ldc)),
                 "cublasSgemm");
    else
      blas_check(cublasSgemmStridedBatched(m_.blas(), opb, opa, to_int(n), to_int(m), to_int(k), &alpha, b, to_int(ldb),
                                           sb, a, to_int(lda), sa, &beta, c, to_int(ldc), sc, to_int(count)),
                 "cublasSgemmStridedBatched");
  }

  // "cuda cublas sgemm", or its bfloat16 arithmetic's name with math = "bf16".
  std::string gemm_words() const { return bf16_ ? "cuda cublas gemm 32F_FAST_16BF" : "cuda cublas sgemm"; }

  NodeProblem p_;
  ExecutorMemory& m_;
  const bool bf16_;  // math = "bf16"

 private:
  std::vector<void*> own_;
};

// Gemm: Y = alpha op(A) op(B) + beta C, C of shape [n] (or [1, n]) or [m, n].
class Gemm final : public CudaNode {
 public:
  Gemm(const NodeProblem& p, ExecutorMemory& m) : CudaNode(p, m) {
    const Shape& a = *p.in[0].shape;
    const Shape& b = *p.in[1].shape;
    ta_ = p.node->attr_i("transA", 0) != 0, tb_ = p.node->attr_i("transB", 0) != 0;
    m_rows_ = ta_ ? a[1] : a[0], k_ = ta_ ? a[0] : a[1], n_ = tb_ ? b[0] : b[1];
    alpha_ = static_cast<float>(p.node->attr_f("alpha", 1.0));
    beta_ = p.in.size() > 2 && p.in[2].present() ? static_cast<float>(p.node->attr_f("beta", 1.0)) : 0.0f;
    full_c_ = beta_ != 0.0f && p.in[2].numel() == m_rows_ * n_;
    if (beta_ != 0.0f && !full_c_) ones_ = ones(m_rows_);
  }
  void forward() override {
    float* y = out(0);
    if (beta_ != 0.0f) {
      if (full_c_)
        m_.copy(y, in(2), static_cast<std::size_t>(m_rows_ * n_) * sizeof(float));
      else
        sgemm(false, false, m_rows_, n_, 1, 1.0f, ones_, 1, in(2), n_, 0.0f, y, n_, 1, 0, 0, 0,
              true);  // each row gets C
    }
    sgemm(ta_, tb_, m_rows_, n_, k_, alpha_, in(0), ta_ ? m_rows_ : k_, in(1), tb_ ? k_ : n_, beta_, y, n_);
  }
  void backward() override {
    const float* dy = dout(0);
    if (float* da = din(0)) {
      if (!ta_)
        sgemm(false, !tb_, m_rows_, k_, n_, alpha_, dy, n_, in(1), tb_ ? k_ : n_, 0.0f, da, k_);
      else
        sgemm(tb_, true, k_, m_rows_, n_, alpha_, in(1), tb_ ? k_ : n_, dy, n_, 0.0f, da, m_rows_);
    }
    if (float* db = din(1)) {
      if (!tb_)
        sgemm(!ta_, false, k_, n_, m_rows_, alpha_, in(0), ta_ ? m_rows_ : k_, dy, n_, 0.0f, db, n_);
      else
        sgemm(true, ta_, n_, k_, m_rows_, alpha_, dy, n_, in(0), ta_ ? m_rows_ : k_, 0.0f, db, k_);
    }
    if (float* dc = din(2)) {
      const float zero = 0.0f;
      if (full_c_) {  // dC = beta dY
        m_.copy(dc, dy, static_cast<std::size_t>(m_rows_ * n_) * sizeof(float));
        blas_check(cublasSscal_64(m_.blas(), m_rows_ * n_, &beta_, dc, 1), "cublasSscal_64");
      } else {  // dC [n] = beta dY^T ones: column-major dY^T is n x m
        blas_check(cublasSgemv(m_.blas(), CUBLAS_OP_N, to_int(n_), to_int(m_rows_), &beta_, dy, to_int(n_), ones_, 1,
                               &zero, dc, 1),
                   "cublasSgemv");
      }
    }
  }
  std::string impl() const override { return gemm_words(); }

 private:
  bool ta_ = false, tb_ = false, full_c_ = false;
  I m_rows_ = 0, k_ = 0, n_ = 0;
  float alpha_ = 1, beta_ = 0;
  float* ones_ = nullptr;
};

// MatMul with a 2-D right operand (a projection: A's rows flattened), or with equal batches.
class MatMul final : public CudaNode {
 public:
  MatMul(const NodeProblem& p, ExecutorMemory& m, bool batched) : CudaNode(p, m), batched_(batched) {
    const Shape& a = *p.in[0].shape;
    const Shape& b = *p.in[1].shape;
    k_ = a.back(), n_ = b.back();
    if (batched) {
      rows_ = a[a.size() - 2];
      count_ = numel(a) / (rows_ * k_);
    } else {
      rows_ = numel(a) / k_;
    }
  }
  void forward() override {
    sgemm(false, false, rows_, n_, k_, 1.0f, in(0), k_, in(1), n_, 0.0f, out(0), n_, count_, rows_ * k_,
          batched_ ? k_ * n_ : 0, rows_ * n_);
  }
  void backward() override {
    const float* dy = dout(0);
    if (float* da = din(0))  // dA = dY B^T
      sgemm(false, true, rows_, k_, n_, 1.0f, dy, n_, in(1), n_, 0.0f, da, k_, count_, rows_ * n_,
            batched_ ? k_ * n_ : 0, rows_ * k_);
    if (float* db = din(1))  // dB = A^T dY (a 2-D weight: every row of A at once)
      sgemm(true, false, k_, n_, rows_, 1.0f, in(0), k_, dy, n_, 0.0f, db, n_, count_, rows_ * k_, rows_ * n_, k_ * n_);
  }
  std::string impl() const override { return batched_ ? gemm_words() + " (strided batched)" : gemm_words(); }

 private:
  bool batched_;
  I rows_ = 0, k_ = 0, n_ = 0, count_ = 1;
};

// Add of two operands of one shape (a residual connection): one pass of d500's kernel, reading
// a and b and writing y (a copy then cublasSaxpy, the way without nvcc, reads and writes y twice
// more: 5 passes over the tensor's bytes against 3, and the same sums: fma(1, b, a) is a + b);
// backward, dy read once into both gradients.
//   With math = "bf16" its tensors may be stored in bfloat16 (all three, BackendInfo::bf16_storage):
// d500's bfloat16 kernels then, the sum rounded once.
class Add final : public CudaNode {
 public:
  using CudaNode::CudaNode;
  void forward() override {
    const I n = p_.out[0].numel();
#ifdef D500_HAVE_CUDA_KERNELS
    if (p_.out[0].bf16)
      return check(launch_add_bf16(p_.in[0].data, p_.in[1].data, p_.out[0].data, n, m_.stream()),
                   "the bfloat16 add kernel's launch");
    check(launch_add(in(0), in(1), out(0), n, m_.stream()), "the add kernel's launch");
#else
    m_.copy(out(0), in(0), static_cast<std::size_t>(n) * sizeof(float));
    m_.axpy(1.0f, in(1), out(0), n);
#endif
  }
  void backward() override {
    const I n = p_.out[0].numel();
    float* d0 = din(0);
    float* d1 = din(1);
#ifdef D500_HAVE_CUDA_KERNELS
    if (d0 && d1 && p_.out[0].bf16)
      return check(launch_copy_twice_bf16(dout(0), d0, d1, n, m_.stream()),
                   "the bfloat16 add gradient kernel's launch");
    if (d0 && d1) return check(launch_copy_twice(dout(0), d0, d1, n, m_.stream()), "the add gradient kernel's launch");
#endif
    for (float* d : {d0, d1})
      if (d) m_.copy(d, dout(0), static_cast<std::size_t>(n) * (p_.out[0].bf16 ? 2 : sizeof(float)));
  }
#ifdef D500_HAVE_CUDA_KERNELS
  std::string impl() const override {
    return p_.out[0].bf16 ? "cuda d500 kernel (add in one pass, bfloat16)" : "cuda d500 kernel (add in one pass)";
  }
#else
  std::string impl() const override { return "cuda copy and cublas saxpy"; }
#endif
};

#ifdef D500_HAVE_CUDA_KERNELS
// AddRelu (networks/fuse.hpp): an Add of one shape and the Relu that alone reads its result, as
// one node in one pass each way: y = max(a + b, 0), the sum never written and read back; backward,
// dy where y > 0 into both gradients in one read of y and dy, where Relu's gradient was written,
// then read back and copied twice.
class AddRelu final : public CudaNode {
 public:
  using CudaNode::CudaNode;
  void forward() override {
    if (half_)
      return check(launch_add_relu_bf16(p_.in[0].data, p_.in[1].data, p_.out[0].data, p_.out[0].numel(), m_.stream()),
                   "the bfloat16 add-relu kernel's launch");
    check(launch_add_relu(in(0), in(1), out(0), p_.out[0].numel(), m_.stream()), "the add-relu kernel's launch");
  }
  void backward() override {
    const I n = p_.out[0].numel();
    float* d0 = din(0);
    float* d1 = din(1);
    if (!d0 && !d1) return;
    if (const float* dy = dout(0)) {
      if (half_)
        return check(launch_relu_grad_bf16(out(0), dy, d0, d1, n, m_.stream()),
                     "the bfloat16 add-relu gradient kernel's launch");
      return check(launch_relu_grad_twice(out(0), dy, d0, d1, n, m_.stream()), "the add-relu gradient kernel's launch");
    }
    for (float* d : {d0, d1})  // no gradient reaches the output: zero
      if (d) m_.zero(d, static_cast<std::size_t>(n) * (half_ ? 2 : sizeof(float)));
  }
  std::string impl() const override {
    return half_ ? "cuda d500 kernel (add and relu in one pass, bfloat16)"
                 : "cuda d500 kernel (add and relu in one pass)";
  }

 private:
  const bool half_ = p_.out[0].bf16;  // its tensors stored in bfloat16 (math = "bf16")
};

// SoftmaxCrossEntropyLoss (dev::Sce: any N C d... layout, class weights, ignore_index, mean, sum
// or none, log_prob read or not), the training loss d500 appends to a classifier (networks/prepare.cpp): on the host
// every training step would stop twice (the scores down, the loss up; then the gradient). One
// thread per row for its log-sum-exp, one per score for the gradient; the rows' sums in parts.
class SoftmaxCrossEntropy final : public CudaNode {
 public:
  SoftmaxCrossEntropy(const NodeProblem& p, ExecutorMemory& m, const dev::Sce& k)
      : CudaNode(p, m), k_(k), ps_(dev::parts_of(2, k.rows)) {
    const auto rows = static_cast<std::size_t>(k.rows) * sizeof(float);
    lse_ = static_cast<float*>(own(rows));
    row_loss_ = static_cast<float*>(own(rows));
    row_weight_ = static_cast<float*>(own(rows));
    dlp_sum_ = static_cast<float*>(own(rows));
    divisor_ = static_cast<float*>(own(sizeof(float)));
    part_ = static_cast<double*>(own(static_cast<std::size_t>(ps_.chunks * ps_.outputs) * sizeof(double)));
  }
  void forward() override {
    float* log_prob = p_.out.size() > 1 && p_.out[1].present() ? out(1) : nullptr;
    check(launch_sce_forward(k_, ps_, in(0), p_.in[1].data, out(0), log_prob, lse_, row_loss_, row_weight_, divisor_,
                             part_, m_.stream()),
          "the softmax cross-entropy kernels' launch");
  }
  void backward() override {
    float* ds = din(0);
    if (!ds) return;
    const float* dl = p_.dout[0].present() ? dout(0) : nullptr;
    const float* dlp = p_.dout.size() > 1 && p_.dout[1].present() ? dout(1) : nullptr;  // log_prob read
    check(
        launch_sce_backward(k_, in(0), p_.in[1].data, lse_, row_weight_, divisor_, dl, dlp, dlp_sum_, ds, m_.stream()),
        "the softmax cross-entropy kernels' launch");
  }
  std::string impl() const override { return "cuda d500 kernels (SoftmaxCrossEntropyLoss)"; }

 private:
  dev::Sce k_;
  dev::Parts ps_;
  float* lse_;
  float* row_loss_;
  float* row_weight_;
  float* dlp_sum_;
  float* divisor_;
  double* part_;
};

// What d500's own element kernels (device_ops.hpp, one thread per element or row; the reductions
// in a fixed order, no atomics) share: a checked launch, and zeros for an input gradient when the
// output has none.
class ElementNode : public CudaNode {
 public:
  using CudaNode::CudaNode;

 protected:
  void launched(cudaError_t e) const { check(e, (p_.node->op + "'s kernel launch").c_str()); }
  // Whether dout(0) is there; if not, every input gradient is zero.
  bool has_dout() {
    if (p_.dout[0].present()) return true;
    for (std::size_t i = 0; i < p_.din.size(); ++i)
      if (float* d = din(i))
        m_.zero(d, static_cast<std::size_t>(p_.in[i].numel()) * (p_.din[i].bf16 ? 2 : sizeof(float)));
    return false;
  }
  // Scratch of the node's own for gradients summed in parts (dev::Parts), one after another on the
  // stream: as many doubles as the largest needs; nullptr outside training or where none splits.
  double* own_parts(std::initializer_list<dev::Parts> all) {
    std::size_t doubles = 0;
    for (const dev::Parts& ps : all)
      if (ps.chunks > 1) doubles = std::max(doubles, static_cast<std::size_t>(ps.chunks * ps.outputs));
    return p_.training && doubles > 0 ? static_cast<double*>(own(doubles * sizeof(double))) : nullptr;
  }
};

// A node of one input whose forward pass maps x to y and whose backward pass maps dy to dx, each
// by one launch over its descriptor (ReduceSum/ReduceMean; Slice and Pad).
template <class K, cudaError_t (*Forward)(const K&, const float*, float*, cudaStream_t),
          cudaError_t (*Backward)(const K&, const float*, float*, cudaStream_t)>
class MapNode final : public ElementNode {
 public:
  MapNode(const NodeProblem& p, ExecutorMemory& m, const K& k) : ElementNode(p, m), k_(k) {}
  void forward() override { launched(Forward(k_, in(0), out(0), m_.stream())); }
  void backward() override {
    if (!has_dout() || !din(0)) return;
    launched(Backward(k_, dout(0), din(0), m_.stream()));
  }
  std::string impl() const override { return "cuda d500 kernels (" + p_.node->op + ")"; }

 private:
  K k_;
};

// Add, Sub, Mul, Div, Pow (a float32 or integer exponent), Where with broadcasting (Add of equal shapes stays on
// cuBLAS). A broadcast
// operand's gradient sums in parts (dev::Parts) into scratch of the node's own, shared by the two
// operands (one after the other on the stream).
class Binary final : public ElementNode {
 public:
  Binary(const NodeProblem& p, ExecutorMemory& m, const dev::Binary& k)
      : ElementNode(p, m), k_(k), first_(static_cast<std::size_t>(dev::binary_first(k))) {
    for (int w = 0; w < 2; ++w)
      parts_[w] = dev::parts_of(p.in[first_ + static_cast<std::size_t>(w)].numel(), dev::binary_grad_count(k, w));
    part_ = own_parts({parts_[0], parts_[1]});
    if (k.b_elem != dev::Elem::F32)
      exponent_ = static_cast<float*>(own(static_cast<std::size_t>(p.in[1].numel()) * sizeof(float)));
  }
  void forward() override { launched(launch_binary_forward(k_, in(first_), operand_b(), out(0), m_.stream())); }
  void backward() override {
    if (!has_dout()) return;
    const float* b = din(first_) ? operand_b() : in(first_ + 1);  // an integer exponent has no gradient
    for (int w = 0; w < 2; ++w)
      if (float* d = din(first_ + static_cast<std::size_t>(w)))
        launched(launch_binary_grad(k_, w, parts_[w], in(first_), b, dout(0), d, part_, m_.stream()));
  }
  std::string impl() const override { return "cuda d500 kernels (broadcast " + p_.node->op + ")"; }

 private:
  // Operand b as float32: Pow's integer exponent cast into exponent_ first, on the stream.
  const float* operand_b() {
    if (!exponent_) return in(first_ + 1);
    launched(
        launch_cast(dev::Cast{k_.b_elem, dev::Elem::F32, p_.in[1].numel()}, p_.in[1].data, exponent_, m_.stream()));
    return exponent_;
  }

  dev::Binary k_;
  std::size_t first_;  // the node's input that is operand a (Where: 1, after its condition)
  dev::Parts parts_[2];
  double* part_ = nullptr;
  float* exponent_ = nullptr;  // Pow's integer exponent as float32
};

// LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Sqrt, Erf, Exp, Log, Neg, Abs, Reciprocal, Clip
// (its bounds read on the device where they are inputs); the
// backward pass reads the tensor the reference keeps (the output for Sigmoid, Tanh, Sqrt, Exp,
// Reciprocal; else the input).
class Unary final : public ElementNode {
 public:
  Unary(const NodeProblem& p, ExecutorMemory& m, const dev::Unary& k) : ElementNode(p, m), k_(k) {}
  void forward() override { launched(launch_unary_forward(k_, in(0), out(0), m_.stream())); }
  void backward() override {
    if (!has_dout() || !din(0)) return;
    launched(launch_unary_backward(k_, dev::unary_uses_y(k_.op) ? out(0) : in(0), dout(0), din(0), m_.stream()));
  }
  std::string impl() const override { return "cuda d500 kernels (" + p_.node->op + ")"; }

 private:
  dev::Unary k_;
};

// BatchNormalization on d500's kernels (dev::BatchNorm) where cuDNN's does not serve: a node with
// running-statistics outputs (cuDNN's running variance is unbiased, ONNX's and the reference's
// biased), a build without cuDNN, an epsilon below cuDNN's least, a layout cuDNN's spatial mode
// does not take. In training the statistics come from the batch (two passes of parts per
// channel) in the forward pass, and its backward pass reads them again where it left them (as
// cuDNN's reads the mean and inverse deviation it saved: the executor runs each micro-batch's
// backward pass right after its forward one), the same values the reference recomputes. BatchNormRelu
// (fusion = "bn_relu") where cuDNN's joined call does not serve: the ReLU applied as y is written,
// the gradient masked by y as dy is read, so that neither pass has a Relu node's own pass.
class BatchNormKernels final : public ElementNode {
 public:
  BatchNormKernels(const NodeProblem& p, ExecutorMemory& m, const dev::BatchNorm& k)
      : ElementNode(p, m), k_(k), ps_(dev::parts_of(k.c, k.n * k.plane)) {
    const auto c = static_cast<std::size_t>(k.c) * sizeof(float);
    for (float** f : {&mean_, &var_, &sdy_, &sdyx_}) *f = static_cast<float*>(own(c));
    part_ = static_cast<double*>(own(2 * static_cast<std::size_t>(ps_.chunks * ps_.outputs) * sizeof(double)));
  }
  void forward() override {
    statistics();
    float* outs[4] = {};
    for (std::size_t j = 1; j < p_.out.size() && j < 5; ++j) outs[j - 1] = p_.out[j].present() ? out(j) : nullptr;
    launched(launch_bn_forward(k_, in(0), in(1), in(2), in(3), in(4), mean(), var(), out(0), outs, m_.stream()));
  }
  void backward() override {
    if (!has_dout()) return;
    float *dx = din(0), *dscale = din(1), *dbias = din(2);
    if (!dx && !dscale && !dbias) return;
    launched(launch_bn_backward(k_, ps_, in(0), p_.out[0].data, in(1), dout(0), mean(), var(), part_, sdy_, sdyx_, dx,
                                dscale, dbias, m_.stream()));
  }
  std::string impl() const override {
    return "cuda d500 kernels (" + p_.node->op + (k_.nhwc ? ", NHWC" : "") + (k_.bf16 ? ", bfloat16)" : ")");
  }

 private:
  // The batch's mean and variance into mean_, var_ (training); inference reads the running inputs.
  void statistics() {
    if (!k_.training) return;
    launched(launch_bn_stat(k_, ps_, in(0), nullptr, part_, mean_, m_.stream()));
    launched(launch_bn_stat(k_, ps_, in(0), mean_, part_, var_, m_.stream()));
  }
  const float* mean() const { return k_.training ? mean_ : in(3); }
  const float* var() const { return k_.training ? var_ : in(4); }

  dev::BatchNorm k_;
  dev::Parts ps_;
  float *mean_ = nullptr, *var_ = nullptr, *sdy_ = nullptr, *sdyx_ = nullptr;
  double* part_ = nullptr;
};

// ReduceSum, ReduceMean: one thread per output, its elements summed in order (in double).
using Reduce = MapNode<dev::Reduce, launch_reduce_forward, launch_reduce_backward>;

class Transpose final : public ElementNode {
 public:
  Transpose(const NodeProblem& p, ExecutorMemory& m, const dev::Strides& fwd, const dev::Strides& bwd)
      : ElementNode(p, m), fwd_(fwd), bwd_(bwd) {}
  void forward() override { launched(launch_strided_copy(fwd_, in(0), out(0), m_.stream())); }
  void backward() override {
    if (!has_dout() || !din(0)) return;
    launched(launch_strided_copy(bwd_, dout(0), din(0), m_.stream()));
  }
  std::string impl() const override { return "cuda d500 kernels (transpose)"; }

 private:
  dev::Strides fwd_, bwd_;
};

// Normalised over its last axes, one thread per row (its sums serial, in double); the scale's and
// bias's gradients over the rows in parts (dev::Parts), each column's parts summed in order.
class LayerNorm final : public ElementNode {
 public:
  LayerNorm(const NodeProblem& p, ExecutorMemory& m, const dev::LayerNorm& k)
      : ElementNode(p, m), k_(k), parts_(dev::parts_of(k.inner, k.rows)) {
    const auto bytes = static_cast<std::size_t>(k.rows) * sizeof(float);
    mean_ = static_cast<float*>(own(bytes));
    inv_ = static_cast<float*>(own(bytes));
    if (p.training)
      part_ = static_cast<double*>(own(2 * static_cast<std::size_t>(parts_.chunks * parts_.outputs) * sizeof(double)));
  }
  void forward() override {
    const float* bias = p_.in.size() > 2 && p_.in[2].present() ? in(2) : nullptr;
    float* mean = p_.out.size() > 1 && p_.out[1].present() ? out(1) : nullptr;
    float* inv = p_.out.size() > 2 && p_.out[2].present() ? out(2) : nullptr;
    launched(launch_layer_norm_forward(k_, in(0), in(1), bias, out(0), mean, inv, m_.stream()));
  }
  void backward() override {
    // The Mean and InvStdDev outputs' gradients, where a graph reads them.
    const float* dmean = p_.dout.size() > 1 && p_.dout[1].present() ? dout(1) : nullptr;
    const float* dinv = p_.dout.size() > 2 && p_.dout[2].present() ? dout(2) : nullptr;
    if (!has_dout() && !dmean && !dinv) return;  // no gradient at all: zeros
    const float* dy = p_.dout[0].present() ? dout(0) : nullptr;
    float *dscale = din(1), *dbias = din(2);
    if (!dy) dscale = dbias = nullptr;  // zeroed by has_dout
    launched(launch_layer_norm_backward(k_, parts_, in(0), in(1), dy, dmean, dinv, din(0), mean_, inv_, dscale, dbias,
                                        part_, m_.stream()));
  }
  std::string impl() const override { return "cuda d500 kernels (layer normalisation)"; }

 private:
  dev::LayerNorm k_;
  dev::Parts parts_;
  float* mean_ = nullptr;
  float* inv_ = nullptr;
  double* part_ = nullptr;
};

// Concat and Split: one block copy per part (the parts into the whole, or the whole into the
// parts), and the other way back.
class BlockCopies final : public ElementNode {
 public:
  BlockCopies(const NodeProblem& p, ExecutorMemory& m, std::vector<dev::Blocks> k)
      : ElementNode(p, m), k_(std::move(k)), concat_(p.node->op == "Concat") {}
  void forward() override {
    for (std::size_t i = 0; i < k_.size(); ++i)
      if (concat_)
        launched(launch_block_copy(k_[i], in(i), out(0), m_.stream()));
      else if (p_.out[i].present())
        launched(launch_block_copy(k_[i], in(0), out(i), m_.stream()));
  }
  void backward() override {
    if (concat_) {
      if (!has_dout()) return;
      for (std::size_t i = 0; i < k_.size(); ++i)
        if (float* d = din(i)) launched(launch_block_copy(dev::swap_blocks(k_[i]), dout(0), d, m_.stream()));
      return;
    }
    float* dx = din(0);
    if (!dx) return;
    bool all = true;  // every part has a gradient: each block of dx is written
    for (std::size_t i = 0; i < k_.size(); ++i) all = all && p_.dout[i].present();
    if (!all) m_.zero(dx, static_cast<std::size_t>(p_.in[0].numel()) * sizeof(float));
    for (std::size_t i = 0; i < k_.size(); ++i)
      if (p_.dout[i].present()) launched(launch_block_copy(dev::swap_blocks(k_[i]), dout(i), dx, m_.stream()));
  }
  std::string impl() const override { return "cuda d500 kernels (" + p_.node->op + ")"; }

 private:
  std::vector<dev::Blocks> k_;
  bool concat_;
};

// Slice and Pad (constant): the output through a window of the input; the input's gradient the one
// output element's that read it (0 where none did).
using WindowNode = MapNode<dev::Window, launch_window_forward, launch_window_backward>;

// Expand: a broadcast copy; its gradient the sum over the broadcast, in parts as a broadcast
// operand's.
class Expand final : public ElementNode {
 public:
  Expand(const NodeProblem& p, ExecutorMemory& m, const dev::Binary& k)
      : ElementNode(p, m),
        k_(k),
        parts_(dev::parts_of(p.in[0].numel(), dev::binary_grad_count(k, 0))),
        part_(own_parts({parts_})) {}
  void forward() override { launched(launch_strided_copy(k_.s, in(0), out(0), m_.stream())); }
  void backward() override {
    if (!has_dout() || !din(0)) return;
    launched(launch_binary_grad(k_, 0, parts_, nullptr, nullptr, dout(0), din(0), part_, m_.stream()));
  }
  std::string impl() const override { return "cuda d500 kernels (Expand)"; }

 private:
  dev::Binary k_;
  dev::Parts parts_;
  double* part_;
};

// Cast: a conversion per element; its gradient dy where both types are float32, else zeros.
class CastNode final : public ElementNode {
 public:
  CastNode(const NodeProblem& p, ExecutorMemory& m, const dev::Cast& k) : ElementNode(p, m), k_(k) {}
  void forward() override { launched(launch_cast(k_, p_.in[0].data, p_.out[0].data, m_.stream())); }
  void backward() override {
    if (!has_dout() || !din(0)) return;
    const auto bytes = static_cast<std::size_t>(k_.n) * sizeof(float);
    if (k_.to == dev::Elem::F32)
      m_.copy(din(0), dout(0), bytes);
    else
      m_.zero(din(0), bytes);
  }
  std::string impl() const override { return "cuda d500 kernels (Cast)"; }

 private:
  dev::Cast k_;
};

// The data's gradient: the indices sorted by row (CUB's stable radix sort), then each element the
// sum of dy over its row's run, in index order (no atomics).
class GatherNode final : public ElementNode {
 public:
  GatherNode(const NodeProblem& p, ExecutorMemory& m, const dev::Gather& k) : ElementNode(p, m), k_(k) {
    if (p.training) scratch_ = own(gather_grad_scratch_bytes(k));
  }
  void forward() override { launched(launch_gather_forward(k_, in(0), p_.in[1].data, out(0), m_.stream())); }
  void backward() override {
    if (!has_dout() || !din(0)) return;
    launched(launch_gather_grad(k_, p_.in[1].data, dout(0), din(0), scratch_, m_.stream()));
  }
  std::string impl() const override { return "cuda d500 kernels (gather)"; }

 private:
  dev::Gather k_;
  void* scratch_ = nullptr;
};
#endif

#ifdef D500_HAVE_CUDNN

const float kOne = 1.0f, kZero = 0.0f;

// The buffers cuDNN's find runs a convolution's algorithms on in d500's executor: an input, a
// weight and an output of the convolution's sizes, zeros, of its own (the executor's own buffers
// may share memory with tensors that live at setup), held only while the convolution's kernel is
// made, and allocated only when a search asks for them (not when the network's choice for the
// geometry is known already). None for an empty geometry (a choice that is not find).
class FindBuffers {
 public:
  FindBuffers(ExecutorMemory& m, const ConvGeom& g) : m_(m), g_(g) {}
  ~FindBuffers() {
    for (void* b : {b_.x, b_.w, b_.y})
      if (b) m_.release(b);
  }
  FindBuffers(const FindBuffers&) = delete;
  FindBuffers& operator=(const FindBuffers&) = delete;
  const ConvBuffers* get() {
    if (g_.n == 0) return nullptr;
    auto bytes = [](I elements) { return static_cast<std::size_t>(elements) * sizeof(float); };
    if (!b_.x) b_.x = m_.allocate(bytes(g_.n * g_.c * g_.h * g_.w));
    if (!b_.w) b_.w = m_.allocate(bytes(g_.k * g_.cg() * g_.kh * g_.kw));
    if (!b_.y) b_.y = m_.allocate(bytes(g_.n * g_.k * g_.p * g_.q));
    return &b_;
  }

 private:
  ExecutorMemory& m_;
  ConvGeom g_;
  ConvBuffers b_;
};

// Conv, and ConvTranspose as the convolution whose backward-data pass it is (transpose_geom:
// from the node's output to its input). In cuDNN's terms x_ is the convolution's input and y_ its
// output: Conv reads x_ and writes y_ forward; ConvTranspose reads y_ (its input) and writes x_
// (its output) by the backward-data pass, and its backward pass runs the convolution forward
// (the input's gradient) and backward-filter with the roles of x and dy swapped.
class Conv final : public CudaNode {
 public:
  // nullptr when cuDNN's geometry differs from the node's (the reference runs it then).
  static std::unique_ptr<NodeKernel> make(const NodeProblem& p, ExecutorMemory& m) {
    const bool transposed = p.node->op == "ConvTranspose";
    const ConvGeom g = transposed ? transpose_geom(*p.node, *p.in[0].shape, *p.out[0].shape)
                                  : conv_geom(*p.node, *p.in[0].shape, (*p.in[1].shape)[0]);
    if (g.pt != g.pb || g.pl != g.pr) return nullptr;
    for (const I v : {g.n, g.c, g.h, g.w, g.k, g.p, g.q})
      if (!fits_int(v)) return nullptr;
    auto k = std::unique_ptr<Conv>(new Conv(p, m, g, transposed));
    return k->ok_ ? std::move(k) : nullptr;
  }
  ~Conv() override {
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
  }
  void forward() override {
    forget_halves();
    if (transposed_) {
      backward_data(in(0), out(0));
    } else {
      // Channels-last: the weights turned into KRSC, an NCHW input into NHWC (kept for the
      // backward pass), an NCHW output computed NHWC and turned back.
      if (w_conv_) relayout(in(1), w_conv_, g_.k, g_.cg(), g_.kh, g_.kw, true);
      if (x_conv_) relayout(in(0), x_conv_, g_.n, g_.c, g_.h, g_.w, true);
      convolve(x_conv_ ? x_conv_ : in(0), y_conv_ ? y_conv_ : out(0));
    }
    float* y = y_conv_ ? y_conv_ : out(0);
    if (has_bias_ && y_half_)
      add_bias_half(y);
    else if (has_bias_)
      cudnn_check(cudnnAddTensor(m_.dnn(), &kOne, b_.get(), in(2), &kOne, out_desc(), y), "cudnnAddTensor (bias)");
    if (y_conv_) relayout(y_conv_, out(0), g_.n, g_.k, g_.p, g_.q, false);
  }
  void backward() override {
    forget_halves();  // then a tensor both passes read is rounded once (dy, or ConvTranspose's dy)
    const float* dy = dout(0);
    if (y_conv_) relayout(dy, y_conv_, g_.n, g_.k, g_.p, g_.q, true), dy = y_conv_;
    // The filter's gradient first (the convolution's input and its output's gradient): a
    // channels-last input's converted copy then takes the input's gradient.
    if (float* dw = din(1)) {
      const float* conv_x = transposed_ ? dy : x_conv_ ? x_conv_ : in(0);
      const float* conv_dy = transposed_ ? in(0) : dy;
      backward_filter(conv_x, conv_dy, dw_conv_ ? dw_conv_ : dw);
      if (dw_conv_) relayout(dw_conv_, dw, g_.k, g_.cg(), g_.kh, g_.kw, false);
    }
    if (float* dx = din(0)) {
      if (transposed_) {
        convolve(dy, dx);
      } else {
        backward_data(dy, x_conv_ ? x_conv_ : dx);
        if (x_conv_) relayout(x_conv_, dx, g_.n, g_.c, g_.h, g_.w, false);
      }
    }
    if (float* db = din(2)) {
      if (y_half_)
        bias_grad_half(dy, db);
      else
        cudnn_check(cudnnConvolutionBackwardBias(m_.dnn(), &kOne, out_desc(), dy, &kZero, b_.get(), db),
                    "cudnnConvolutionBackwardBias");
    }
  }
  // The layout first (a step's impl is kept to 64 bytes): "cuda cudnn nhwc conv from nchw (...)"
  // for a channels-last convolution that turns its NCHW input.
  std::string impl() const override {
    // "bf16" where the executor stores x or y in bfloat16 (math = "bf16"), early: the rest may be cut.
    const char* half = x_half_ || y_half_ ? " bf16" : "";
    if (nhwc_)
      return std::string("cuda cudnn nhwc") + half + " conv" + (x_conv_ ? " from nchw" : "") +
             (y_conv_ ? " to nchw" : "") + " (" + algorithms_ + ")";
    if (*half) return std::string("cuda cudnn bf16 convolution (") + algorithms_ + ")";
    return std::string("cuda cudnn ") + (transposed_ ? "transposed " : "") + "convolution (" + algorithms_ + ")";
  }

 private:
  // Channels-last (memory_format = "channels_last"): the convolution computes in NHWC when its
  // input or its output is stored so (the executor's TensorView::channels_last; ConvTranspose never).
  static bool nhwc_of(const NodeProblem& p) { return p.in[0].channels_last || p.out[0].channels_last; }
  Conv(const NodeProblem& p, ExecutorMemory& m, const ConvGeom& g, bool transposed)
      : CudaNode(p, m),
        transposed_(transposed),
        nhwc_(nhwc_of(p)),
        g_(g),
        x_(g.n, g.c, g.h, g.w, CUDNN_DATA_FLOAT, nhwc_of(p)),
        y_(g.n, g.k, g.p, g.q, CUDNN_DATA_FLOAT, nhwc_of(p)),
        b_(1, transposed ? g.c : g.k, 1, 1, CUDNN_DATA_FLOAT, nhwc_of(p)) {
    has_bias_ = p.in.size() > 2 && p.in[2].present();
    // Stored in bfloat16 (math = "bf16", bf16_storage: on a channels-last point only tensors
    // stored channels-last, so no layout copy meets one): the passes read and write them where
    // they lie, and a bias is added to y there by d500's kernel (its gradient summed from dy there).
    if ((x_half_ && nhwc_ && !p.in[0].channels_last) || (y_half_ && nhwc_ && !p.out[0].channels_last))
      throw Error("cuda: " + p.node->label() + " got bfloat16 tensors its convolution does not take (a layout copy)");
    if (has_bias_ && y_half_) bias_on_half(p, g);
    if (nhwc_) {
      // Buffers of the node's own: the weights in KRSC (and their gradient), and the input or
      // output the executor keeps NCHW, in NHWC.
      auto floats = [](I n) { return static_cast<std::size_t>(n) * sizeof(float); };
      w_conv_ = static_cast<float*>(own(floats(g.k * g.cg() * g.kh * g.kw)));
      if (p.training && p.din.size() > 1 && p.din[1].present())
        dw_conv_ = static_cast<float*>(own(floats(g.k * g.cg() * g.kh * g.kw)));
      if (!p.in[0].channels_last) x_conv_ = static_cast<float*>(own(floats(g.n * g.c * g.h * g.w)));
      if (!p.out[0].channels_last) y_conv_ = static_cast<float*>(own(floats(g.n * g.k * g.p * g.q)));
    }
    // math = "bf16": cuDNN's bfloat16 configuration (x, w and y in bfloat16, the sums in float32)
    // on copies in the executor's scratch that d500's kernels round at each call, the result
    // rounded back to float32.
    if (bf16_) {
      xh_ = std::make_unique<TensorDesc>(g.n, g.c, g.h, g.w, CUDNN_DATA_BFLOAT16, nhwc_);
      yh_ = std::make_unique<TensorDesc>(g.n, g.k, g.p, g.q, CUDNN_DATA_BFLOAT16, nhwc_);
      x_elems_ = g.n * g.c * g.h * g.w, w_elems_ = g.k * g.cg() * g.kh * g.kw, y_elems_ = g.n * g.k * g.p * g.q;
      m.reserve_scratch(half_offset(x_elems_) + half_offset(w_elems_) + half_offset(y_elems_));
      // Training a Conv's filter: the forward pass's bfloat16 copy of x is kept for the
      // backward-filter pass (as autocast saves its bfloat16 inputs for backward), not rounded again.
      if (p.training && !transposed && !x_half_ && p.din.size() > 1 && p.din[1].present())
        saved_x_ = own(half_offset(x_elems_));
    }
    cudnn_check(cudnnCreateFilterDescriptor(&w_), "cudnnCreateFilterDescriptor");
    cudnn_check(cudnnSetFilter4dDescriptor(w_, bf16_ ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT,
                                           nhwc_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, to_int(g.k), to_int(g.cg()),
                                           to_int(g.kh), to_int(g.kw)),
                "cudnnSetFilter4dDescriptor");
    cudnn_check(cudnnCreateConvolutionDescriptor(&conv_), "cudnnCreateConvolutionDescriptor");
    cudnn_check(cudnnSetConvolution2dDescriptor(conv_, to_int(g.pt), to_int(g.pl), to_int(g.sh), to_int(g.sw),
                                                to_int(g.dh), to_int(g.dw), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                "cudnnSetConvolution2dDescriptor");
    cudnn_check(cudnnSetConvolutionGroupCount(conv_, to_int(g.groups)), "cudnnSetConvolutionGroupCount");
    // bfloat16 data on tensor cores, as PyTorch asks for its reduced-precision convolutions.
    const cudnnMathType_t math = bf16_ ? CUDNN_TENSOR_OP_MATH : conv_math_of(p.params);
    cudnn_check(cudnnSetConvolutionMathType(conv_, math), "cudnnSetConvolutionMathType");
    current_math_ = math;
    int n = 0, c = 0, h = 0, w = 0;
    cudnn_check(cudnnGetConvolution2dForwardOutputDim(conv_, cx(), w_, &n, &c, &h, &w),
                "cudnnGetConvolution2dForwardOutputDim");
    if (n != g.n || c != g.k || h != g.p || w != g.q) return;  // ok_ stays false
    // Deterministic algorithms where cuDNN has one that fits (unless the point's cudnn_algorithms
    // says "heuristic" or "find"): a seeded training run then repeats bit for bit on the same GPU,
    // as on the CPU.
    const Choice want = choice_of(p.params, Choice::Deterministic);
    const std::string shape = "x " + std::to_string(g.n) + "x" + std::to_string(g.c) + "x" + std::to_string(g.h) + "x" +
                              std::to_string(g.w) + " w " + std::to_string(g.k) + "x" + std::to_string(g.cg()) + "x" +
                              std::to_string(g.kh) + "x" + std::to_string(g.kw) + " pad " + std::to_string(g.pt) + "," +
                              std::to_string(g.pl) + " stride " + std::to_string(g.sh) + "," + std::to_string(g.sw) +
                              " dilation " + std::to_string(g.dh) + "," + std::to_string(g.dw) + " groups " +
                              std::to_string(g.groups) +
                              (bf16_                    ? " bf16"
                               : math == CUDNN_FMA_MATH ? ""
                                                        : " tf32") +
                              (nhwc_ ? " nhwc" : "");
    FindBuffers on(m, want == Choice::Find ? g : ConvGeom{});
    // The passes the node runs: Conv's forward pass is the convolution's, ConvTranspose's its
    // backward-data pass; training adds the other two.
    const bool need_f = !transposed || p.training, need_d = transposed || p.training, need_w = p.training;
    const bool graph = graph_api_of(p.params);
    if (graph && graph_served(m, g, shape, want, math != CUDNN_FMA_MATH, on, need_f, need_d, need_w)) return;
    bool same_bits = true;
    // Strict float32 runs every pass in CUDNN_FMA_MATH whatever a perf result says; with TF32
    // allowed each pass in its chosen algorithm's math type, as cuDNN asks.
    const bool strict = math == CUDNN_FMA_MATH;
    // The impl text (64 bytes in the results file): cuDNN's algorithm enums, forward, backward
    // data, backward filter (those the node runs), "found" when cuDNN's find chose them, and
    // whether all are deterministic ("algos f1 d1 w1, deterministic").
    std::vector<std::string> names;
    auto take = [&](const ConvAlgorithm& a, const char* letter) {
      ws_bytes_ = std::max(ws_bytes_, a.workspace);
      same_bits = same_bits && a.deterministic;
      names.push_back(letter + std::to_string(a.algo));
      return a.found;
    };
    if (need_f) {
      const ConvAlgorithm f = m.conv_algorithm(
          "forward " + shape, want, [&] { return choose_forward(m.dnn(), cx(), w_, conv_, cy(), want, on.get()); });
      if (!take(f, "f")) return;
      fwd_ = static_cast<cudnnConvolutionFwdAlgo_t>(f.algo), math_f_ = strict ? CUDNN_FMA_MATH : f.math;
    }
    if (need_d) {
      const ConvAlgorithm d = m.conv_algorithm("backward data " + shape, want, [&] {
        return choose_backward_data(m.dnn(), cx(), w_, conv_, cy(), want, on.get());
      });
      if (!take(d, "d")) return;
      bwd_data_ = static_cast<cudnnConvolutionBwdDataAlgo_t>(d.algo), math_d_ = strict ? CUDNN_FMA_MATH : d.math;
    }
    if (need_w) {
      const ConvAlgorithm w8 = m.conv_algorithm("backward filter " + shape, want, [&] {
        return choose_backward_filter(m.dnn(), cx(), w_, conv_, cy(), want, on.get());
      });
      if (!take(w8, "w")) return;
      bwd_filter_ = static_cast<cudnnConvolutionBwdFilterAlgo_t>(w8.algo), math_w_ = strict ? CUDNN_FMA_MATH : w8.math;
    }
    algorithms_ = graph ? "legacy algos" : "algos";  // graph: the graph API served a pass with no engine
    for (const std::string& n8 : names) algorithms_ += " " + n8;
    if (want == Choice::Find) algorithms_ += ", found";
    algorithms_ += same_bits ? ", deterministic" : ", atomics";
    if (ws_bytes_ > 0) ws_ = own(ws_bytes_);
    ok_ = true;
  }
  // cudnn_api = "graph" (the default): make_graph_passes, or false with nothing kept where the graph
  // API offers no engine for a pass (within 1 GiB of workspace, deterministic where asked): the
  // node then runs through the legacy calls instead of failing the point (docs/level1-networks.md).
  bool graph_served(ExecutorMemory& m, const ConvGeom& g, const std::string& shape, Choice want, bool tf32,
                    FindBuffers& on, bool need_f, bool need_d, bool need_w) {
    try {
      make_graph_passes(m, g, shape, want, tf32, on, need_f, need_d, need_w);
      return true;
    } catch (const GraphConvUnserved&) {
      graph_f_.reset(), graph_d_.reset(), graph_w_.reset();
      ws_bytes_ = 0;
      return false;
    }
  }
  // cudnn_api = "graph": each pass the node runs as an execution plan of cuDNN's graph API
  // (GraphConv, as level 0's), chosen at setup once per pass and geometry in the network (`shape`
  // says it), one workspace for the node's passes, the buffers given with each run.
  void make_graph_passes(ExecutorMemory& m, const ConvGeom& g, const std::string& shape, Choice want, bool tf32,
                         FindBuffers& on, bool need_f, bool need_d, bool need_w) {
    auto later = [](std::size_t) -> void* { return nullptr; };  // the node's one workspace is given below
    std::vector<std::string> names;
    bool same_bits = true;
    auto make = [&](std::shared_ptr<GraphConv>& into, ConvPass pass, const char* letter) {
      into = m.graph_plan(std::string(letter) + " " + shape, want, [&] {
        // A find runs the candidates on buffers of the geometry's sizes (made only for it).
        const ConvBuffers search = want == Choice::Find ? *on.get() : ConvBuffers{};
        return std::make_shared<GraphConv>(m.dnn(), g, pass, want, tf32, search, later,
                                           bf16_ ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT, nhwc_);
      });
      ws_bytes_ = std::max(ws_bytes_, into->chosen().workspace);
      same_bits = same_bits && into->chosen().deterministic;
      names.push_back(letter + std::to_string(into->chosen().algo));
    };
    if (need_f) make(graph_f_, ConvPass::Forward, "f");
    if (need_d) make(graph_d_, ConvPass::BackwardData, "d");
    if (need_w) make(graph_w_, ConvPass::BackwardFilter, "w");
    if (ws_bytes_ > 0) ws_ = own(ws_bytes_);
    for (auto* k : {graph_f_.get(), graph_d_.get(), graph_w_.get()})
      if (k) k->use_workspace(ws_);
    algorithms_ = "graph engines";
    for (const std::string& n8 : names) algorithms_ += " " + n8;
    if (want == Choice::Find) algorithms_ += ", found";
    algorithms_ += same_bits ? ", deterministic" : ", atomics";
    ok_ = true;
  }
  // The math type the pass's algorithm was chosen with, on the descriptor the passes share (cuDNN
  // asks for the perf result's own before the call; host-side, no device work).
  void use_math(cudnnMathType_t m) {
    if (m == current_math_) return;
    cudnn_check(cudnnSetConvolutionMathType(conv_, m), "cudnnSetConvolutionMathType (the pass's algorithm's)");
    current_math_ = m;
  }
  // The convolution forward (x_ to y_) and its backward-data pass (y_ to x_). With math = "bf16"
  // each pass runs on bfloat16 copies (operand, result: the forward input into the node's saved
  // copy where it keeps one) on the bfloat16 descriptors (cx, cy, w_) and widens its result into
  // the float32 tensor; in float32 on the tensors themselves.
  void convolve(const float* x, float* y) {
    void* hx = saved_x_;
    if (hx)
      to_half(x, hx, x_elems_);
    else
      hx = operand(kX, x);
    void *hw = operand(kW, weight()), *hy = result(kY, y);
    if (graph_f_) {
      cudnn_check(graph_f_->run_on({hx, hw, hy}), "cudnnBackendExecute (the convolution's forward plan)");
    } else {
      use_math(math_f_);
      cudnn_check(
          cudnnConvolutionForward(m_.dnn(), &kOne, cx(), hx, w_, hw, conv_, fwd_, ws_, ws_bytes_, &kZero, cy(), hy),
          bf16_ ? "cudnnConvolutionForward (bfloat16)" : "cudnnConvolutionForward");
    }
    widen(kY, hy, y);
  }
  void backward_data(const float* dy, float* dx) {
    void *hdy = operand(kY, dy), *hw = operand(kW, weight()), *hdx = result(kX, dx);
    if (graph_d_) {
      cudnn_check(graph_d_->run_on({hdx, hw, hdy}), "cudnnBackendExecute (the convolution's backward data plan)");
    } else {
      use_math(math_d_);
      cudnn_check(cudnnConvolutionBackwardData(m_.dnn(), &kOne, w_, hw, cy(), hdy, conv_, bwd_data_, ws_, ws_bytes_,
                                               &kZero, cx(), hdx),
                  bf16_ ? "cudnnConvolutionBackwardData (bfloat16)" : "cudnnConvolutionBackwardData");
    }
    widen(kX, hdx, dx);
  }
  // The filter's gradient from the convolution's input x and its output's gradient dy (with
  // math = "bf16", x's copy the forward pass saved where the node keeps one: the same rounding).
  void backward_filter(const float* x, const float* dy, float* dw) {
    void* hx = saved_x_ ? saved_x_ : operand(kX, x);
    void *hdy = operand(kY, dy), *hdw = result(kW, dw);
    if (graph_w_) {
      cudnn_check(graph_w_->run_on({hx, hdw, hdy}), "cudnnBackendExecute (the convolution's backward filter plan)");
    } else {
      use_math(math_w_);
      cudnn_check(cudnnConvolutionBackwardFilter(m_.dnn(), &kOne, cx(), hx, cy(), hdy, conv_, bwd_filter_, ws_,
                                                 ws_bytes_, &kZero, w_, hdw),
                  bf16_ ? "cudnnConvolutionBackwardFilter (bfloat16)" : "cudnnConvolutionBackwardFilter");
    }
    widen(kW, hdw, dw);
  }
  // A bias with y stored in bfloat16: y's shape for d500's channel kernels, and in training the
  // scratch its gradient's parts take.
  void bias_on_half(const NodeProblem& p, const ConvGeom& g) {
    bias_k_.n = g.n, bias_k_.c = g.k, bias_k_.plane = g.p * g.q, bias_k_.nhwc = nhwc_, bias_k_.bf16 = true;
    bias_parts_ = dev::parts_of(g.k, g.n * g.p * g.q);
    if (p.training && p.din.size() > 2 && p.din[2].present())
      bias_part_ = static_cast<double*>(
          own(static_cast<std::size_t>(bias_parts_.chunks * bias_parts_.outputs) * sizeof(double)));
  }
  // The weights as the passes read them: KCRS, or channels-last their KRSC copy.
  const float* weight() const { return w_conv_ ? w_conv_ : in(1); }
  // A copy of an N C H W tensor between its layouts on the stream (channels-last's borders).
  void relayout(const float* src, float* dst, I n, I c, I h, I w, bool to_nhwc) const {
#ifdef D500_HAVE_CUDA_KERNELS
    check(launch_strided_copy(dev::layout_copy(n, c, h, w, to_nhwc), src, dst, m_.stream()),
          "the layout copy kernel's launch");
#else  // channels-last needs d500's kernels: the backend says Never without them
    (void)src, (void)dst, (void)n, (void)c, (void)h, (void)w, (void)to_nhwc;
    throw Error("cuda: memory_format = \"channels_last\" needs d500's own kernels, which this build lacks");
#endif
  }
  // The node's output's descriptor.
  cudnnTensorDescriptor_t out_desc() const { return transposed_ ? x_.get() : y_.get(); }
  // The descriptors the convolution's passes run on: float32, or bfloat16 with math = "bf16".
  cudnnTensorDescriptor_t cx() const { return xh_ ? xh_->get() : x_.get(); }
  cudnnTensorDescriptor_t cy() const { return yh_ ? yh_->get() : y_.get(); }
  // math = "bf16": the executor's scratch holds, during one call, bfloat16 copies of a tensor of
  // x's shape, one of w's and one of y's (each 256-byte aligned), and this node remembers which
  // float32 tensor each region is a copy of, so that one call rounds each tensor once. Forgotten
  // at each call's start (other nodes use the scratch in between) and where a pass writes.
  enum Region { kX, kW, kY };
  static std::size_t half_offset(I elements) { return (static_cast<std::size_t>(elements) * 2 + 255) / 256 * 256; }
  void* region(Region r) const {
    auto* base = static_cast<char*>(m_.scratch());
    return r == kX   ? base
           : r == kW ? base + half_offset(x_elems_)
                     : base + half_offset(x_elems_) + half_offset(w_elems_);
  }
  I elements(Region r) const { return r == kX ? x_elems_ : r == kW ? w_elems_ : y_elems_; }
  void* half_of(Region r, const float* src) {
    if (held_[r] != src) to_half(src, region(r), elements(r)), held_[r] = src;
    return region(r);
  }
  void* written(Region r) {
    held_[r] = nullptr;
    return region(r);
  }
  // A tensor of the node's that the executor stores in bfloat16 (x and its gradient, or y and
  // its gradient: TensorView::bf16).
  bool stored_half(const void* t) const {
    auto is = [&](const std::vector<TensorView>& side) { return !side.empty() && side[0].data == t; };
    return t && ((x_half_ && (is(p_.in) || is(p_.din))) || (y_half_ && (is(p_.out) || is(p_.dout))));
  }
  // A pass's operand: the tensor itself (float32, or stored in bfloat16), or with math = "bf16"
  // its bfloat16 copy in region r.
  void* operand(Region r, const float* t) { return bf16_ && !stored_half(t) ? half_of(r, t) : const_cast<float*>(t); }
  // Where a pass writes: the tensor itself, or with math = "bf16" region r, which widen() then
  // copies into the float32 tensor.
  void* result(Region r, float* t) { return bf16_ && !stored_half(t) ? written(r) : t; }
  void widen(Region r, const void* h, float* t) const {
    if (bf16_ && !stored_half(t)) from_half(h, t, elements(r));
  }
  void forget_halves() { held_[kX] = held_[kW] = held_[kY] = nullptr; }
#ifdef D500_HAVE_CUDA_KERNELS
  void to_half(const float* src, void* dst, I n) const {
    check(launch_to_bf16(src, dst, n, m_.stream()), "the bfloat16 rounding kernel's launch");
  }
  void from_half(const void* src, float* dst, I n) const {
    check(launch_from_bf16(src, dst, n, m_.stream()), "the bfloat16 widening kernel's launch");
  }
  // The bias added to y stored in bfloat16, and its gradient summed from dy stored so.
  void add_bias_half(void* y) const {
    check(launch_bias_add_bf16(bias_k_, y, in(2), m_.stream()), "the bfloat16 bias kernel's launch");
  }
  void bias_grad_half(const void* dy, float* db) const {
    check(launch_channel_sum(bias_k_, bias_parts_, dy, bias_part_, db, m_.stream()),
          "the bfloat16 bias gradient kernel's launch");
  }
#else  // the plan refuses math = "bf16" in such a build (the backend's check_point)
  [[noreturn]] static void no_kernels() {
    throw Error("cuda: math = \"bf16\" needs d500's own kernels, which this build lacks (CUDA without nvcc)");
  }
  void to_half(const float*, void*, I) const { no_kernels(); }
  void from_half(const void*, float*, I) const { no_kernels(); }
  void add_bias_half(void*) const { no_kernels(); }
  void bias_grad_half(const void*, float*) const { no_kernels(); }
#endif

  bool transposed_;
  bool nhwc_;  // the passes compute channels-last
  // x and its gradient, y and its gradient, stored in bfloat16 (math = "bf16", bf16_storage).
  bool x_half_ = p_.in[0].bf16, y_half_ = p_.out[0].bf16;
  ConvGeom g_;
  // Channels-last: the weights and their gradient in KRSC; the input and the output where the
  // executor keeps them NCHW, in NHWC (the input's also takes its gradient).
  float* w_conv_ = nullptr;
  float* dw_conv_ = nullptr;
  float* x_conv_ = nullptr;
  float* y_conv_ = nullptr;
  TensorDesc x_, y_, b_;
  std::unique_ptr<TensorDesc> xh_, yh_;  // math = "bf16": the passes' bfloat16 descriptors
  void* saved_x_ = nullptr;  // math = "bf16", training a Conv's filter: x's bfloat16 copy from the forward pass
  I x_elems_ = 0, w_elems_ = 0, y_elems_ = 0;
  const float* held_[3] = {};
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_{};
  cudnnMathType_t math_f_ = CUDNN_FMA_MATH, math_d_ = CUDNN_FMA_MATH, math_w_ = CUDNN_FMA_MATH,
                  current_math_ = CUDNN_FMA_MATH;
  std::shared_ptr<GraphConv> graph_f_, graph_d_, graph_w_;  // cudnn_api = "graph": the passes' plans instead
  std::size_t ws_bytes_ = 0;
  void* ws_ = nullptr;
  bool has_bias_ = false, ok_ = false;
  std::string algorithms_;
  // A bias with y stored in bfloat16: y's shape as d500's channel kernels address it, and the
  // parts its gradient's sums take (scratch of the node's own in training).
  dev::BatchNorm bias_k_;
  dev::Parts bias_parts_;
  double* bias_part_ = nullptr;
};

// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool (a max pool whose window is the whole
// map). cuDNN's backward pass reads the forward's input and
// output; the executor keeps MaxPool's input alive, so in training the kernel copies the output
// (and an average's input) into buffers of its own.
class Pool final : public CudaNode {
 public:
  static std::unique_ptr<NodeKernel> make(const NodeProblem& p, ExecutorMemory& m) {
    const Shape& xs = *p.in[0].shape;
    if (xs.size() != 4 && xs.size() != 3) return nullptr;
    const bool global = p.node->op == "GlobalAveragePool" || p.node->op == "GlobalMaxPool";
    ConvGeom g;
    if (global) {
      g.n = xs[0], g.c = g.k = xs[1], g.h = xs.size() == 4 ? xs[2] : 1, g.w = xs.back();
      g.kh = g.h, g.kw = g.w, g.sh = g.h, g.sw = g.w, g.p = g.q = 1;
    } else {
      g = conv_geom(*p.node, xs, xs[1]);
      if (g.pt != g.pb || g.pl != g.pr || g.dh != 1 || g.dw != 1) return nullptr;
    }
    for (const I v : {g.n, g.c, g.h, g.w, g.kh, g.kw})
      if (!fits_int(v)) return nullptr;
    // Max pooling's deterministic mode: plain CUDNN_POOLING_MAX adds overlapping windows'
    // gradients with atomics (cuDNN's "Reproducibility" notes); it is the point's with "heuristic"
    // or "find".
    cudnnPoolingMode_t mode = choice_of(p.params, Choice::Deterministic) == Choice::Deterministic
                                  ? CUDNN_POOLING_MAX_DETERMINISTIC
                                  : CUDNN_POOLING_MAX;
    if (p.node->op == "AveragePool" || p.node->op == "GlobalAveragePool")
      mode = global || p.node->attr_i("count_include_pad", 0) ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                              : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    auto k = std::unique_ptr<Pool>(new Pool(p, m, g, mode));
    return k->ok_ ? std::move(k) : nullptr;
  }
  ~Pool() override {
    if (pool_) cudnnDestroyPoolingDescriptor(pool_);
  }
  void forward() override {
    cudnn_check(cudnnPoolingForward(m_.dnn(), pool_, &kOne, x_.get(), in(0), &kZero, y_.get(), out(0)),
                "cudnnPoolingForward");
    if (y_keep_) m_.copy(y_keep_, out(0), y_bytes_);
    if (x_keep_) m_.copy(x_keep_, in(0), x_bytes_);
  }
  void backward() override {
    float* dx = din(0);
    if (!dx) return;
    const void* x = x_keep_ ? x_keep_ : in(0);
    cudnn_check(cudnnPoolingBackward(m_.dnn(), pool_, &kOne, y_.get(), y_keep_, y_.get(), dout(0), x_.get(), x, &kZero,
                                     x_.get(), dx),
                "cudnnPoolingBackward");
  }
  std::string impl() const override {
    std::string s = "cuda cudnn pooling";
    if (mode_ == CUDNN_POOLING_MAX) s += ", atomics";
    if (nhwc_) s += ", NHWC";
    if (p_.in[0].bf16) return s + ", bfloat16" + (p_.training ? " (output kept)" : "");  // within 63 bytes
    return p_.training ? s + " (output kept for backward)" : s;
  }

 private:
  // Channels-last: both descriptors NHWC when the input is stored so (an output of one value per
  // channel is the same bytes in both layouts).
  Pool(const NodeProblem& p, ExecutorMemory& m, const ConvGeom& g, cudnnPoolingMode_t mode)
      : CudaNode(p, m),
        x_(g.n, g.c, g.h, g.w, data_type(p.in[0]), p.in[0].channels_last),
        y_(g.n, g.c, g.p, g.q, data_type(p.in[0]), p.in[0].channels_last),
        mode_(mode),
        nhwc_(p.in[0].channels_last) {
    cudnn_check(cudnnCreatePoolingDescriptor(&pool_), "cudnnCreatePoolingDescriptor");
    cudnn_check(cudnnSetPooling2dDescriptor(pool_, mode, CUDNN_NOT_PROPAGATE_NAN, to_int(g.kh), to_int(g.kw),
                                            to_int(g.pt), to_int(g.pl), to_int(g.sh), to_int(g.sw)),
                "cudnnSetPooling2dDescriptor");
    int n = 0, c = 0, h = 0, w = 0;
    cudnn_check(cudnnGetPooling2dForwardOutputDim(pool_, x_.get(), &n, &c, &h, &w),
                "cudnnGetPooling2dForwardOutputDim");
    if (n != g.n || c != g.c || h != g.p || w != g.q) return;  // ceil mode: the reference runs it
    if (p.in[0].bf16 != p.out[0].bf16) return;                 // bf16_storage stores both or neither
    const std::size_t element = p.in[0].bf16 ? 2 : sizeof(float);
    if (p.training) {
      y_bytes_ = static_cast<std::size_t>(g.n * g.c * g.p * g.q) * element;
      y_keep_ = own(y_bytes_);
      if (mode != CUDNN_POOLING_MAX_DETERMINISTIC && mode != CUDNN_POOLING_MAX) {  // an average reads its input
        x_bytes_ = static_cast<std::size_t>(g.n * g.c * g.h * g.w) * element;
        x_keep_ = own(x_bytes_);
      }
    }
    ok_ = true;
  }

  TensorDesc x_, y_;
  cudnnPoolingMode_t mode_;
  bool nhwc_;
  cudnnPoolingDescriptor_t pool_ = nullptr;
  void* y_keep_ = nullptr;
  void* x_keep_ = nullptr;
  std::size_t y_bytes_ = 0, x_bytes_ = 0;
  bool ok_ = false;
};

// cuDNN's ReLU activation descriptor, owned.
class ReluDesc {
 public:
  ReluDesc() {
    cudnn_check(cudnnCreateActivationDescriptor(&act_), "cudnnCreateActivationDescriptor");
    cudnn_check(cudnnSetActivationDescriptor(act_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
                "cudnnSetActivationDescriptor");
  }
  ~ReluDesc() {
    if (act_) cudnnDestroyActivationDescriptor(act_);
  }
  ReluDesc(const ReluDesc&) = delete;
  ReluDesc& operator=(const ReluDesc&) = delete;
  cudnnActivationDescriptor_t get() const { return act_; }

 private:
  cudnnActivationDescriptor_t act_ = nullptr;
};

// Relu, as a 1 x 1 x 1 x n tensor. The executor keeps the input alive for the backward pass; the
// input stands for the output there (both are positive at the same places).
class Relu final : public CudaNode {
 public:
  Relu(const NodeProblem& p, ExecutorMemory& m) : CudaNode(p, m), t_(1, 1, 1, p.in[0].numel()) {}
  void forward() override {
    cudnn_check(cudnnActivationForward(m_.dnn(), act_.get(), &kOne, t_.get(), in(0), &kZero, t_.get(), out(0)),
                "cudnnActivationForward");
  }
  void backward() override {
    if (float* dx = din(0))
      cudnn_check(cudnnActivationBackward(m_.dnn(), act_.get(), &kOne, t_.get(), in(0), t_.get(), dout(0), t_.get(),
                                          in(0), &kZero, t_.get(), dx),
                  "cudnnActivationBackward");
  }
  std::string impl() const override { return "cuda cudnn activation"; }

 private:
  TensorDesc t_;
  ReluDesc act_;
};

#ifndef D500_HAVE_CUDA_KERNELS
// AddRelu (networks/fuse.hpp) in a build without d500's kernels: Add's copy and saxpy, cuDNN's
// activation in place; backward, cuDNN's activation gradient (y standing for the sum, positive at
// the same places) into one gradient, copied into the other.
class AddReluComposed final : public CudaNode {
 public:
  AddReluComposed(const NodeProblem& p, ExecutorMemory& m) : CudaNode(p, m), t_(1, 1, 1, p.out[0].numel()) {}
  void forward() override {
    const I n = p_.out[0].numel();
    m_.copy(out(0), in(0), bytes());
    m_.axpy(1.0f, in(1), out(0), n);
    cudnn_check(cudnnActivationForward(m_.dnn(), act_.get(), &kOne, t_.get(), out(0), &kZero, t_.get(), out(0)),
                "cudnnActivationForward");
  }
  void backward() override {
    float* first = din(0) ? din(0) : din(1);
    float* second = din(0) ? din(1) : nullptr;
    if (!first) return;
    if (const float* dy = dout(0))
      cudnn_check(cudnnActivationBackward(m_.dnn(), act_.get(), &kOne, t_.get(), out(0), t_.get(), dy, t_.get(), out(0),
                                          &kZero, t_.get(), first),
                  "cudnnActivationBackward");
    else
      m_.zero(first, bytes());
    if (second) m_.copy(second, first, bytes());
  }
  std::string impl() const override { return "cuda copy, cublas saxpy and cudnn activation"; }

 private:
  std::size_t bytes() const { return static_cast<std::size_t>(p_.out[0].numel()) * sizeof(float); }
  TensorDesc t_;
  ReluDesc act_;
};
#endif

// Softmax and LogSoftmax along ONNX's axis: opset 13 on, one axis (outer x C x inner as N C H 1);
// before, everything from the axis on as one (outer x C x 1 x 1).
class Softmax final : public CudaNode {
 public:
  Softmax(const NodeProblem& p, ExecutorMemory& m, I outer, I c, I inner)
      : CudaNode(p, m),
        t_(outer, c, inner, 1),
        algo_(p.node->op == "LogSoftmax" ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE) {}
  void forward() override {
    cudnn_check(cudnnSoftmaxForward(m_.dnn(), algo_, CUDNN_SOFTMAX_MODE_CHANNEL, &kOne, t_.get(), in(0), &kZero,
                                    t_.get(), out(0)),
                "cudnnSoftmaxForward");
  }
  void backward() override {
    if (float* dx = din(0))
      cudnn_check(cudnnSoftmaxBackward(m_.dnn(), algo_, CUDNN_SOFTMAX_MODE_CHANNEL, &kOne, t_.get(), out(0), t_.get(),
                                       dout(0), &kZero, t_.get(), dx),
                  "cudnnSoftmaxBackward");
  }
  std::string impl() const override {
    return algo_ == CUDNN_SOFTMAX_LOG ? "cuda cudnn softmax (log)" : "cuda cudnn softmax";
  }

 private:
  TensorDesc t_;
  cudnnSoftmaxAlgorithm_t algo_;
};

// BatchNormalization in inference: the running statistics (inputs 3 and 4) normalise.
class BatchNormInference final : public CudaNode {
 public:
  BatchNormInference(const NodeProblem& p, ExecutorMemory& m, I n, I c, I h, I w, double eps)
      : CudaNode(p, m), x_(n, c, h, w, data_type(p.in[0]), p.in[0].channels_last), s_(1, c, 1, 1), eps_(eps) {}
  void forward() override {
    cudnn_check(
        cudnnBatchNormalizationForwardInference(m_.dnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_.get(), in(0),
                                                x_.get(), out(0), s_.get(), in(1), in(2), in(3), in(4), eps_),
        "cudnnBatchNormalizationForwardInference");
  }
  void backward() override { throw Error("cuda: batch normalisation in inference has no backward pass"); }
  std::string impl() const override {
    if (p_.in[0].bf16)
      return p_.in[0].channels_last ? "cuda cudnn batchnorm (inference, NHWC, bfloat16)"
                                    : "cuda cudnn batchnorm (inference, bfloat16)";
    return p_.in[0].channels_last ? "cuda cudnn batch normalisation (inference, NHWC)"
                                  : "cuda cudnn batch normalisation (inference)";
  }

 private:
  TensorDesc x_, s_;
  double eps_;
};

// BatchNormalization in training: the batch's statistics normalise (biased variance, as the
// reference); the mean and inverse deviation cuDNN saves in the forward pass serve the backward
// one. Channels-last in cuDNN's persistent spatial mode, as PyTorch trains channels_last (its
// getCudnnBatchNormMode; the mode's restrictions on the data's range are NCHW's only). The running statistics (outputs
// 1 and 2, which the executor points at the statistics it keeps) are updated from those by d500's kernel (ONNX's biased
// variance; cuDNN's own update would take the unbiased one); a node with the batch's statistics as outputs runs on
// d500's kernels.
class BatchNormTraining final : public CudaNode {
 public:
  BatchNormTraining(const NodeProblem& p, ExecutorMemory& m, I n, I c, I h, I w, double eps)
      : CudaNode(p, m),
        x_(n, c, h, w, data_type(p.in[0]), p.in[0].channels_last),
        s_(1, c, 1, 1),
        mode_(p.in[0].channels_last ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL),
        eps_(eps),
        c_bytes_(static_cast<std::size_t>(c) * sizeof(float)),
        x_bytes_(static_cast<std::size_t>(n * c * h * w) * (p.in[0].bf16 ? 2 : sizeof(float))) {
    mean_ = own(c_bytes_);
    inv_ = own(c_bytes_);
    if (p.node->op == "BatchNormRelu") joined_scratch();
#ifdef D500_HAVE_CUDA_KERNELS
    k_.n = n;
    k_.c = c;
    k_.plane = h * w;
    k_.eps = static_cast<float>(eps);
    k_.momentum = static_cast<float>(p.node->attr_f("momentum", 0.9));
#endif
    // cuDNN writes all three gradients: those nobody wants go to scratch of the kernel's own,
    // made here, untimed.
    if (p.training) {
      dx_ = din(0) ? din(0) : own(x_bytes_);
      dscale_ = din(1) ? din(1) : own(c_bytes_);
      dbias_ = din(2) ? din(2) : own(c_bytes_);
    }
  }
  void forward() override {
    if (act_)
      cudnn_check(cudnnBatchNormalizationForwardTrainingEx(m_.dnn(), mode_, kJoined, &kOne, &kZero, x_.get(), in(0),
                                                           nullptr, nullptr, x_.get(), out(0), s_.get(), in(1), in(2),
                                                           0.0, nullptr, nullptr, eps_, mean_, inv_, act_->get(), work_,
                                                           work_bytes_, reserve_, reserve_bytes_),
                  "cudnnBatchNormalizationForwardTrainingEx (with its relu)");
    else
      cudnn_check(
          cudnnBatchNormalizationForwardTraining(m_.dnn(), mode_, &kOne, &kZero, x_.get(), in(0), x_.get(), out(0),
                                                 s_.get(), in(1), in(2), 0.0, nullptr, nullptr, eps_, mean_, inv_),
          "cudnnBatchNormalizationForwardTraining");
#ifdef D500_HAVE_CUDA_KERNELS
    float* rm = p_.out.size() > 1 && p_.out[1].present() ? out(1) : nullptr;
    float* rv = p_.out.size() > 2 && p_.out[2].present() ? out(2) : nullptr;
    if (rm || rv)
      check(launch_bn_running_from_inv(k_, in(3), in(4), static_cast<const float*>(mean_),
                                       static_cast<const float*>(inv_), rm, rv, m_.stream()),
            "BatchNormalization's running statistics kernel launch");
#endif
  }
  void backward() override {
    if (!p_.dout[0].present()) {  // no gradient reaches the output: all three are zero
      m_.zero(dx_, x_bytes_);
      m_.zero(dscale_, c_bytes_);
      m_.zero(dbias_, c_bytes_);
      return;
    }
    if (act_)  // y (the ReLU's output) masks the gradient
      cudnn_check(cudnnBatchNormalizationBackwardEx(m_.dnn(), mode_, kJoined, &kOne, &kZero, &kOne, &kZero, x_.get(),
                                                    in(0), x_.get(), out(0), x_.get(), dout(0), nullptr, nullptr,
                                                    x_.get(), dx_, s_.get(), in(1), in(2), dscale_, dbias_, eps_, mean_,
                                                    inv_, act_->get(), work_, work_bytes_, reserve_, reserve_bytes_),
                  "cudnnBatchNormalizationBackwardEx (with its relu)");
    else
      cudnn_check(
          cudnnBatchNormalizationBackward(m_.dnn(), mode_, &kOne, &kZero, &kOne, &kZero, x_.get(), in(0), x_.get(),
                                          dout(0), x_.get(), dx_, s_.get(), in(1), dscale_, dbias_, eps_, mean_, inv_),
          "cudnnBatchNormalizationBackward");
  }
  std::string impl() const override {
    if (act_)
      return p_.in[0].bf16 ? "cuda cudnn bn+relu (training, NHWC, persistent, bfloat16)"
                           : "cuda cudnn bn+relu (training, NHWC, persistent)";
    if (p_.in[0].bf16)  // within the step's 63 bytes
      return p_.in[0].channels_last ? "cuda cudnn batchnorm (training, NHWC, persistent, bfloat16)"
                                    : "cuda cudnn batchnorm (training, bfloat16)";
    return p_.in[0].channels_last ? "cuda cudnn batch normalisation (training, NHWC, persistent)"
                                  : "cuda cudnn batch normalisation (training)";
  }

 private:
  static constexpr cudnnBatchNormOps_t kJoined = CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  // BatchNormRelu (cudnn_bn_relu): the joined calls' ReLU, their workspace (the larger pass's) and
  // the reserve space the forward pass leaves for the backward one, made here, untimed.
  void joined_scratch() {
    act_ = std::make_unique<ReluDesc>();
    std::size_t fwd = 0, bwd = 0;
    cudnn_check(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(m_.dnn(), mode_, kJoined, x_.get(), nullptr,
                                                                         x_.get(), s_.get(), act_->get(), &fwd),
                "cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize");
    cudnn_check(
        cudnnGetBatchNormalizationBackwardExWorkspaceSize(m_.dnn(), mode_, kJoined, x_.get(), x_.get(), x_.get(),
                                                          nullptr, x_.get(), s_.get(), act_->get(), &bwd),
        "cudnnGetBatchNormalizationBackwardExWorkspaceSize");
    cudnn_check(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(m_.dnn(), mode_, kJoined, act_->get(), x_.get(),
                                                                     &reserve_bytes_),
                "cudnnGetBatchNormalizationTrainingExReserveSpaceSize");
    work_bytes_ = std::max(fwd, bwd);
    if (work_bytes_ > 0) work_ = own(work_bytes_);
    if (reserve_bytes_ > 0) reserve_ = own(reserve_bytes_);
  }

  TensorDesc x_, s_;
  std::unique_ptr<ReluDesc> act_;  // BatchNormRelu on cuDNN's joined calls
  void* work_ = nullptr;
  void* reserve_ = nullptr;
  std::size_t work_bytes_ = 0, reserve_bytes_ = 0;
  cudnnBatchNormMode_t mode_;
  double eps_;
  std::size_t c_bytes_, x_bytes_;
#ifdef D500_HAVE_CUDA_KERNELS
  dev::BatchNorm k_;  // the running statistics' kernel's shape, epsilon and momentum
#endif
  void* mean_ = nullptr;
  void* inv_ = nullptr;
  void* dx_ = nullptr;
  void* dscale_ = nullptr;
  void* dbias_ = nullptr;
};

// A probe's cuDNN handle and zeroed device buffer of `slots` slots of 16 KiB, its own and freed
// after; `failed` says why where either could not be had.
class ProbeScratch {
 public:
  static constexpr std::size_t kSlot = 16 * 1024;
  explicit ProbeScratch(std::size_t slots) {
    if (cudnnCreate(&dnn_) != CUDNN_STATUS_SUCCESS || cudaMalloc(&base_, slots * kSlot) != cudaSuccess ||
        cudaMemset(base_, 0, slots * kSlot) != cudaSuccess)
      failed = "the probe could not start (cudnnCreate, or " + std::to_string(slots * kSlot / 1024) +
               " KiB of device memory)";
  }
  ~ProbeScratch() {
    if (base_) cudaFree(base_);
    if (dnn_) cudnnDestroy(dnn_);
  }
  ProbeScratch(const ProbeScratch&) = delete;
  ProbeScratch& operator=(const ProbeScratch&) = delete;
  cudnnHandle_t dnn() const { return dnn_; }
  void* at(std::size_t k) const { return static_cast<char*>(base_) + k * kSlot; }
  float* f(std::size_t k) const { return static_cast<float*>(at(k)); }
  std::string failed;

 private:
  cudnnHandle_t dnn_ = nullptr;
  void* base_ = nullptr;
};

// The first refusal a probe met, into `into`: what was called and cuDNN's words.
void first_refusal(std::string& into, cudnnStatus_t st, const char* what) {
  if (into.empty() && st != CUDNN_STATUS_SUCCESS) into = std::string(what) + ": " + cudnnGetErrorString(st);
}

// Device memory a probe asks cuDNN's size of; nullptr for none.
struct ProbeBuffer {
  void* p = nullptr;
  explicit ProbeBuffer(std::size_t bytes) {
    if (bytes > 0 && cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
  }
  ~ProbeBuffer() {
    if (p) cudaFree(p);
  }
  ProbeBuffer(const ProbeBuffer&) = delete;
  ProbeBuffer& operator=(const ProbeBuffer&) = delete;
};

// The joined calls' values on the probe's input (probe_bn_relu): each y 1 or 0 as x is +1 or -1,
// each channel's bias gradient the count of its positive outputs; "" if so, else what differs.
std::string joined_values_wrong(const ProbeScratch& ps, bool bf16, int elements, int c, int positive) {
  std::vector<float> y(static_cast<std::size_t>(elements)), db(static_cast<std::size_t>(c));
  std::vector<std::uint16_t> words(bf16 ? y.size() : 0);
  if (cudaMemcpy(bf16 ? static_cast<void*>(words.data()) : y.data(), ps.at(1), y.size() * (bf16 ? 2 : 4),
                 cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(db.data(), ps.f(7), db.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
    return "the probe's results could not be read back";
  for (std::size_t i = 0; i < y.size(); ++i) {
    const float v = bf16 ? from_bf16(words[i]) : y[i], want = (i / static_cast<std::size_t>(c)) % 2 == 0 ? 1.0f : 0.0f;
    if (!(std::abs(v - want) <= 1e-2f)) return "y[" + std::to_string(i) + "] = " + std::to_string(v);
  }
  for (std::size_t ch = 0; ch < db.size(); ++ch)
    if (!(std::abs(db[ch] - static_cast<float>(positive)) <= 1e-3f * static_cast<float>(positive)))
      return "the bias's gradient " + std::to_string(db[ch]) + " where " + std::to_string(positive) + " is right";
  return "";
}

// Whether this process's GPU's cuDNN joins a batch normalisation with its ReLU in training over
// NHWC activations stored in float32 (bf16 false) or bfloat16 -- BatchNormRelu, fusion = "bn_relu":
// "" where it does, else why not. On tensors of its own (2 x 64 x 4 x 4, x = +1 and -1 in turn along
// the batch, dy = 1): the joined forward and backward calls in persistent mode, and their values.
std::string probe_bn_relu(bool bf16) {
  constexpr int n = 2, c = 64, h = 4, elements = n * c * h * h, positive = n * h * h / 2;
  static_assert(elements * sizeof(float) <= ProbeScratch::kSlot, "the probe's tensors fit their slots");
  const ProbeScratch ps(10);
  if (!ps.failed.empty()) return ps.failed;
  const cudnnDataType_t type = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  const TensorDesc xd(n, c, h, h, type, true), sd(1, c, 1, 1);
  const ReluDesc act;
  constexpr cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  constexpr cudnnBatchNormOps_t ops = CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  // x (slot 0): +1 and -1 along the batch (mean 0, variance 1 a channel); dy (2) and the scale (4) ones.
  std::vector<float> x(elements), ones(elements, 1.0f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i / std::size_t{c}) % 2 == 0 ? 1.0f : -1.0f;
  std::vector<std::uint16_t> xw(elements), onew(elements, to_bf16(1.0f));
  for (std::size_t i = 0; i < x.size(); ++i) xw[i] = to_bf16(x[i]);
  const std::size_t bytes = static_cast<std::size_t>(elements) * (bf16 ? 2 : 4);
  if (cudaMemcpy(ps.at(0), bf16 ? static_cast<const void*>(xw.data()) : x.data(), bytes, cudaMemcpyHostToDevice) !=
          cudaSuccess ||
      cudaMemcpy(ps.at(2), bf16 ? static_cast<const void*>(onew.data()) : ones.data(), bytes, cudaMemcpyHostToDevice) !=
          cudaSuccess ||
      cudaMemcpy(ps.at(4), ones.data(), c * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess)
    return "the probe's inputs could not be written";
  std::string why;
  std::size_t fwd = 0, bwd = 0, reserve = 0;
  first_refusal(why,
                cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(ps.dnn(), mode, ops, xd.get(), nullptr,
                                                                         xd.get(), sd.get(), act.get(), &fwd),
                "cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize");
  first_refusal(why,
                cudnnGetBatchNormalizationBackwardExWorkspaceSize(ps.dnn(), mode, ops, xd.get(), xd.get(), xd.get(),
                                                                  nullptr, xd.get(), sd.get(), act.get(), &bwd),
                "cudnnGetBatchNormalizationBackwardExWorkspaceSize");
  first_refusal(
      why, cudnnGetBatchNormalizationTrainingExReserveSpaceSize(ps.dnn(), mode, ops, act.get(), xd.get(), &reserve),
      "cudnnGetBatchNormalizationTrainingExReserveSpaceSize");
  if (!why.empty()) return why;
  const ProbeBuffer work(std::max(fwd, bwd)), kept(reserve);
  if ((std::max(fwd, bwd) > 0 && !work.p) || (reserve > 0 && !kept.p)) return "the probe's workspace could not be had";
  first_refusal(why,
                cudnnBatchNormalizationForwardTrainingEx(ps.dnn(), mode, ops, &kOne, &kZero, xd.get(), ps.at(0),
                                                         nullptr, nullptr, xd.get(), ps.at(1), sd.get(), ps.f(4),
                                                         ps.f(5), 0.0, nullptr, nullptr, 1e-5, ps.f(8), ps.f(9),
                                                         act.get(), work.p, std::max(fwd, bwd), kept.p, reserve),
                "cudnnBatchNormalizationForwardTrainingEx");
  first_refusal(why,
                cudnnBatchNormalizationBackwardEx(ps.dnn(), mode, ops, &kOne, &kZero, &kOne, &kZero, xd.get(), ps.at(0),
                                                  xd.get(), ps.at(1), xd.get(), ps.at(2), nullptr, nullptr, xd.get(),
                                                  ps.at(3), sd.get(), ps.f(4), ps.f(5), ps.f(6), ps.f(7), 1e-5, ps.f(8),
                                                  ps.f(9), act.get(), work.p, std::max(fwd, bwd), kept.p, reserve),
                "cudnnBatchNormalizationBackwardEx");
  if (!why.empty()) return why;
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    return std::string("the probe's kernels failed: ") + cudaGetErrorString(e);
  if (std::string wrong = joined_values_wrong(ps, bf16, elements, c, positive); !wrong.empty())
    return "its values were wrong: " + wrong;
  return "";
}

// probe_bn_relu's answer for float32 or bfloat16, once per process and type; said once on stderr
// where cuDNN refuses (d500's kernels then run the joined nodes).
const std::string& cudnn_bn_relu(bool bf16) {
  auto said = [](bool half) {
    std::string why;
    try {
      why = probe_bn_relu(half);
    } catch (const Error& e) {
      why = e.what();
    }
    if (!why.empty())
      std::fprintf(stderr,
                   "d500: cuda: fusion = \"bn_relu\": cuDNN does not join a %s batch normalisation with its ReLU on "
                   "this GPU (%s): d500's kernels run each BatchNormRelu node\n",
                   half ? "bfloat16" : "float32", why.c_str());
    return why;
  };
  static const std::string f32 = said(false);
  if (!bf16) return f32;
  static const std::string b16 = said(true);
  return b16;
}

// N C H W of a tensor with 2 to 4 axes (N C, N C L, N C H W); false beyond int or other ranks.
bool nchw(const Shape& s, I& n, I& c, I& h, I& w) {
  if (s.size() < 2 || s.size() > 4) return false;
  n = s[0], c = s[1], h = s.size() == 4 ? s[2] : 1, w = s.size() >= 3 ? s.back() : 1;
  return fits_int(n) && fits_int(c) && fits_int(h) && fits_int(w);
}

// BatchNormalization on cuDNN, or nullptr (d500's kernels then): without optional outputs, or in
// training (with d500's kernels) with the running statistics only; NCHW layouts, cuDNN's epsilon.
// BatchNormRelu likewise, in training over NHWC activations where this GPU's cuDNN joins the two.
std::unique_ptr<NodeKernel> cudnn_batch_norm(const NodeProblem& p, ExecutorMemory& m, const Shape& a) {
  auto outputs_from = [&](std::size_t from) {
    return std::any_of(p.out.begin() + static_cast<long>(std::min(from, p.out.size())), p.out.end(),
                       [](const TensorView& o) { return o.present(); });
  };
  // Batch statistics in a training step, or where the node asks for them (training_mode).
  const bool training = p.training || p.node->attr_i("training_mode", 0) != 0;
#ifdef D500_HAVE_CUDA_KERNELS
  if (outputs_from(3) || (outputs_from(1) && !training)) return nullptr;
#else
  if (outputs_from(1)) return nullptr;
#endif
  I n = 0, c = 0, h = 0, w = 0;
  const double eps = p.node->attr_f("epsilon", 1e-5);
  if (!nchw(a, n, c, h, w) || eps < CUDNN_BN_MIN_EPSILON) return nullptr;
  // BatchNormRelu: cuDNN's joined calls, in training over NHWC activations, where they serve.
  if (p.node->op == "BatchNormRelu" && (!training || !p.in[0].channels_last || !cudnn_bn_relu(p.in[0].bf16).empty()))
    return nullptr;
  if (training) return std::make_unique<BatchNormTraining>(p, m, n, c, h, w, eps);
  return std::make_unique<BatchNormInference>(p, m, n, c, h, w, eps);
}

#ifdef D500_HAVE_CUDA_KERNELS
// Relu over a tensor stored in bfloat16 (math = "bf16"): d500's kernel, one pass each way (the
// input stands for the output in the gradient's mask, as cuDNN's Relu above has it).
class ReluBf16 final : public CudaNode {
 public:
  using CudaNode::CudaNode;
  void forward() override {
    check(launch_relu_bf16(p_.in[0].data, p_.out[0].data, p_.in[0].numel(), m_.stream()),
          "the bfloat16 relu kernel's launch");
  }
  void backward() override {
    if (!p_.din[0].present()) return;
    if (!p_.dout[0].present()) return m_.zero(p_.din[0].data, static_cast<std::size_t>(p_.in[0].numel()) * 2);
    check(launch_relu_grad_bf16(p_.in[0].data, p_.dout[0].data, p_.din[0].data, nullptr, p_.in[0].numel(), m_.stream()),
          "the bfloat16 relu gradient kernel's launch");
  }
  std::string impl() const override { return "cuda d500 kernel (relu, bfloat16)"; }
};

// GlobalAveragePool of an input stored in bfloat16 into its float32 output (dev::GlobalPool).
class GlobalPoolBf16 final : public CudaNode {
 public:
  GlobalPoolBf16(const NodeProblem& p, ExecutorMemory& m, const dev::GlobalPool& k) : CudaNode(p, m), k_(k) {}
  void forward() override {
    check(launch_global_pool_bf16(k_, p_.in[0].data, out(0), m_.stream()), "the bfloat16 global pool kernel's launch");
  }
  void backward() override {
    if (!p_.din[0].present()) return;
    if (!p_.dout[0].present()) return m_.zero(p_.din[0].data, static_cast<std::size_t>(p_.in[0].numel()) * 2);
    check(launch_global_pool_grad_bf16(k_, dout(0), p_.din[0].data, m_.stream()),
          "the bfloat16 global pool gradient kernel's launch");
  }
  std::string impl() const override {
    return k_.nhwc ? "cuda d500 kernel (global average pool, NHWC, bfloat16)"
                   : "cuda d500 kernel (global average pool, bfloat16)";
  }

 private:
  dev::GlobalPool k_;
};

// Whether this process's GPU's cuDNN normalises and pools bfloat16 tensors as the executor would
// ask it to: "" where it does, else why not, for each. Normalisations: NCHW in spatial mode, NHWC
// in persistent mode; training, its gradient and inference. Poolings: max and average, forward and
// backward, both layouts. Probed once, on tensors of the GPU's own, before the first plan that
// would store bfloat16 (untimed), and said once on stderr where cuDNN refuses.
struct CudnnBf16 {
  std::string norm, pool;
};
CudnnBf16 probe_cudnn_bf16() {
  // A residual network's smallest shapes' kind: 64 channels, NHWC's persistent mode included.
  constexpr int n = 2, c = 64, h = 8;
  constexpr std::size_t words = n * c * h * h;
  static_assert(words * 2 <= ProbeScratch::kSlot && c * sizeof(float) <= ProbeScratch::kSlot,
                "the probe's tensors fit their slots");
  CudnnBf16 why;
  const ProbeScratch ps(10);
  if (!ps.failed.empty()) {
    why.norm = why.pool = ps.failed;
    return why;
  }
  const cudnnHandle_t dnn = ps.dnn();
  void *x = ps.at(0), *y = ps.at(1), *dy = ps.at(2), *dx = ps.at(3);
  float *scale = ps.f(4), *bias = ps.f(5), *ds = ps.f(6), *db = ps.f(7), *mean = ps.f(8), *inv = ps.f(9);
  const auto call = first_refusal;
  try {
    for (const bool nhwc : {false, true}) {
      const TensorDesc xd(n, c, h, h, CUDNN_DATA_BFLOAT16, nhwc), yd(n, c, h / 2, h / 2, CUDNN_DATA_BFLOAT16, nhwc),
          sd(1, c, 1, 1);
      const cudnnBatchNormMode_t mode = nhwc ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL;
      call(why.norm,
           cudnnBatchNormalizationForwardTraining(dnn, mode, &kOne, &kZero, xd.get(), x, xd.get(), y, sd.get(), scale,
                                                  bias, 0.0, nullptr, nullptr, 1e-5, mean, inv),
           "cudnnBatchNormalizationForwardTraining (bfloat16)");
      call(why.norm,
           cudnnBatchNormalizationBackward(dnn, mode, &kOne, &kZero, &kOne, &kZero, xd.get(), x, xd.get(), dy, xd.get(),
                                           dx, sd.get(), scale, ds, db, 1e-5, mean, inv),
           "cudnnBatchNormalizationBackward (bfloat16)");
      call(why.norm,
           cudnnBatchNormalizationForwardInference(dnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd.get(), x, xd.get(),
                                                   y, sd.get(), scale, bias, mean, inv, 1e-5),
           "cudnnBatchNormalizationForwardInference (bfloat16)");
      for (const cudnnPoolingMode_t pm :
           {CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING}) {
        cudnnPoolingDescriptor_t pool = nullptr;
        call(why.pool, cudnnCreatePoolingDescriptor(&pool), "cudnnCreatePoolingDescriptor");
        if (!pool) break;
        call(why.pool, cudnnSetPooling2dDescriptor(pool, pm, CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2),
             "cudnnSetPooling2dDescriptor");
        call(why.pool, cudnnPoolingForward(dnn, pool, &kOne, xd.get(), x, &kZero, yd.get(), y),
             "cudnnPoolingForward (bfloat16)");
        call(why.pool,
             cudnnPoolingBackward(dnn, pool, &kOne, yd.get(), y, yd.get(), dy, xd.get(), x, &kZero, xd.get(), dx),
             "cudnnPoolingBackward (bfloat16)");
        cudnnDestroyPoolingDescriptor(pool);
      }
    }
    if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
      why.norm = why.pool = std::string("the probe's kernels failed: ") + cudaGetErrorString(e);
  } catch (const Error& e) {
    why.norm = why.pool = e.what();
  }
  return why;
}

// probe_cudnn_bf16's answers, once per process.
const CudnnBf16& cudnn_bf16() {
  static const CudnnBf16 why = [] {
    CudnnBf16 w = probe_cudnn_bf16();
    if (!w.norm.empty())
      std::fprintf(stderr,
                   "d500: cuda: math = \"bf16\": cuDNN's batch normalisation takes no bfloat16 on this GPU (%s): "
                   "d500's kernels normalise the bfloat16 activations\n",
                   w.norm.c_str());
    if (!w.pool.empty())
      std::fprintf(stderr,
                   "d500: cuda: math = \"bf16\": cuDNN's pooling takes no bfloat16 on this GPU (%s): "
                   "the tensors around each pooling stay float32\n",
                   w.pool.c_str());
    return w;
  }();
  return why;
}

// A node the executor gives tensors stored in bfloat16 (math = "bf16", bf16_storage): the kernels
// that take them, or nullptr (the executor then refuses the point, naming the node). A batch
// normalisation runs on cuDNN where it takes bfloat16 (cudnn_bf16), else on d500's kernels.
std::unique_ptr<NodeKernel> make_bf16_node_kernel(const NodeProblem& p, ExecutorMemory& m) {
  const std::string& op = p.node->op;
  if (op == "Conv") return Conv::make(p, m);
  if (is_batch_norm(op)) {
    if (cudnn_bf16().norm.empty())
      if (auto k = cudnn_batch_norm(p, m, *p.in[0].shape)) return k;
    const auto k = dev::batch_norm_of(p);
    return k ? std::make_unique<BatchNormKernels>(p, m, *k) : nullptr;
  }
  if (op == "MaxPool" || op == "AveragePool") return Pool::make(p, m);
  if (op == "GlobalAveragePool") {
    const auto k = dev::global_pool_of(p);
    return k ? std::make_unique<GlobalPoolBf16>(p, m, *k) : nullptr;
  }
  if (op == "Relu") return std::make_unique<ReluBf16>(p, m);
  if (op == "Add" && p.in.size() == 2 && *p.in[0].shape == *p.in[1].shape) return std::make_unique<Add>(p, m);
  if (op == "AddRelu") return std::make_unique<AddRelu>(p, m);
  return nullptr;
}
#endif  // D500_HAVE_CUDA_KERNELS

#endif  // D500_HAVE_CUDNN

}  // namespace

std::unique_ptr<DeviceMemory> make_executor_memory() { return std::make_unique<ExecutorMemory>(); }

#if defined(D500_HAVE_CUDNN) && defined(D500_HAVE_CUDA_KERNELS)
namespace {
// `how`, or Never where a tensor of the node is beyond cuDNN's int.
Takes within_int(const NodeProblem& p, Takes how) {
  for (const auto* side : {&p.in, &p.out})
    for (const TensorView& t : *side)
      if (t.shape && !fits_int(numel(*t.shape))) return Takes::Never;
  return how;
}
}  // namespace
#endif

Takes bf16_storage(const NodeProblem& p) {
#if defined(D500_HAVE_CUDNN) && defined(D500_HAVE_CUDA_KERNELS)
  // The nodes dev::bf16_storage_of names (a batch normalisation on cuDNN's kernels or d500's), a
  // pooling where this GPU's cuDNN pools bfloat16 (cudnn_bf16), with sizes within cuDNN's int.
  const Takes how = dev::bf16_storage_of(p);
  if (how == Takes::Never) return how;
  if ((p.node->op == "MaxPool" || p.node->op == "AveragePool") && !cudnn_bf16().pool.empty()) return Takes::Never;
  return within_int(p, how);
#else
  (void)p;
  return Takes::Never;  // d500's bfloat16 kernels and cuDNN's bfloat16 descriptors need both
#endif
}

Takes channels_last(const NodeProblem& p) {
#if defined(D500_HAVE_CUDNN) && defined(D500_HAVE_CUDA_KERNELS)
  // The nodes dev::channels_last_of names, where make_node_kernel gives them cuDNN's kernels (or
  // d500's: Relu and Add flat, a batch normalisation cuDNN's does not serve on dev::BatchNorm's
  // channels-last addressing), with sizes within cuDNN's int.
  const Takes how = dev::channels_last_of(p);
  return how == Takes::Never ? how : within_int(p, how);
#else
  (void)p;
  return Takes::Never;   // the layout copies and cuDNN's NHWC descriptors need both
#endif
}

std::unique_ptr<NodeKernel> make_node_kernel(const NodeProblem& p, int) {
  auto* m = dynamic_cast<ExecutorMemory*>(p.device);
  if (!m) return nullptr;  // host memory: nothing here runs on it
  for (const auto* side : {&p.in, &p.out})
    for (const TensorView& t : *side)
      if (t.bf16) {
#if defined(D500_HAVE_CUDNN) && defined(D500_HAVE_CUDA_KERNELS)
        return make_bf16_node_kernel(p, *m);
#else
        return nullptr;  // bf16_storage says Never in such a build
#endif
      }
#ifdef D500_HAVE_CUDA_KERNELS
  if (p.node->op == "SoftmaxCrossEntropyLoss") {  // its labels are integers
    const auto k = dev::sce_of(p);
    return k ? std::make_unique<SoftmaxCrossEntropy>(p, *m, *k) : nullptr;
  }
  if (p.node->op == "Gather") {  // its indices are integers
    const auto k = dev::gather_of(p);
    return k ? std::make_unique<GatherNode>(p, *m, *k) : nullptr;
  }
  // Shapes, starts, pads and split sizes come as int64 inputs: the data's type is checked here.
  if (p.node->op == "Concat" || p.node->op == "Split") {
    auto k = dev::blocks_of(p);
    return k ? std::make_unique<BlockCopies>(p, *m, std::move(*k)) : nullptr;
  }
  if (p.node->op == "Slice" || p.node->op == "Pad") {
    const auto k = dev::window_of(p);
    return k ? std::make_unique<WindowNode>(p, *m, *k) : nullptr;
  }
  if (p.node->op == "Expand") {
    const auto k = dev::expand_of(p);
    return k ? std::make_unique<Expand>(p, *m, *k) : nullptr;
  }
  if (p.node->op == "Cast") {
    const auto k = dev::cast_of(p);
    return k ? std::make_unique<CastNode>(p, *m, *k) : nullptr;
  }
  if (p.node->op == "Where" || p.node->op == "Pow") {  // Where's condition is bool; Pow's exponent may be an integer
    const auto k = dev::binary_of(p);
    return k ? std::make_unique<Binary>(p, *m, *k) : nullptr;
  }
  if (p.node->op == "ReduceSum" || p.node->op == "ReduceMean") {  // ReduceSum's axes may be an int64 input
    const auto k = dev::reduce_of(p);
    return k ? std::make_unique<Reduce>(p, *m, *k) : nullptr;
  }
#endif
  for (const auto& t : p.in)
    if (t.present() && t.dtype != DType::F32) return nullptr;
  const std::string& op = p.node->op;
  const Shape& a = *p.in[0].shape;
  if (op == "Gemm") {
    const Shape& b = *p.in[1].shape;
    const I rows = p.node->attr_i("transA", 0) ? a[1] : a[0], n = p.node->attr_i("transB", 0) ? b[0] : b[1];
    const bool has_c = p.in.size() > 2 && p.in[2].present();
    if (has_c && p.in[2].numel() != n && p.in[2].numel() != rows * n) return nullptr;
    if (has_c && p.in[2].numel() == n && p.in[2].shape->size() == 2 && (*p.in[2].shape)[0] != 1) return nullptr;
    for (const I v : {a[0], a[1], b[0], b[1]})
      if (!fits_int(v)) return nullptr;
    return std::make_unique<Gemm>(p, *m);
  }
  if (op == "MatMul") {
    const Shape& b = *p.in[1].shape;
    if (a.size() < 2 || b.size() < 2 || !fits_int(numel(a)) || !fits_int(numel(b))) return nullptr;
    if (b.size() == 2) return std::make_unique<MatMul>(p, *m, false);
    if (a.size() == b.size() && std::equal(a.begin(), a.end() - 2, b.begin()))
      return std::make_unique<MatMul>(p, *m, true);
    return nullptr;
  }
  if (op == "Add" && p.in.size() == 2 && *p.in[0].shape == *p.in[1].shape) return std::make_unique<Add>(p, *m);
  if (op == "AddRelu") {  // two float32 operands of one shape (its shape inference)
#ifdef D500_HAVE_CUDA_KERNELS
    return std::make_unique<AddRelu>(p, *m);
#elif defined(D500_HAVE_CUDNN)
    if (fits_int(p.out[0].numel())) return std::make_unique<AddReluComposed>(p, *m);
#endif
    return nullptr;
  }
#ifdef D500_HAVE_CUDA_KERNELS
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    const auto k = dev::binary_of(p);
    return k ? std::make_unique<Binary>(p, *m, *k) : nullptr;
  }
  if (const auto k = dev::unary_of(p)) return std::make_unique<Unary>(p, *m, *k);
  if (op == "Transpose") {
    const auto f = dev::transpose_of(p, false), b = dev::transpose_of(p, true);
    return f && b ? std::make_unique<Transpose>(p, *m, *f, *b) : nullptr;
  }
  if (op == "LayerNormalization") {
    const auto k = dev::layer_norm_of(p);
    return k ? std::make_unique<LayerNorm>(p, *m, *k) : nullptr;
  }
#endif
#ifdef D500_HAVE_CUDNN
  if ((op == "Conv" || op == "ConvTranspose") && (a.size() == 3 || a.size() == 4)) return Conv::make(p, *m);
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "GlobalMaxPool")
    return Pool::make(p, *m);
  if (op == "Relu" && fits_int(p.in[0].numel())) return std::make_unique<Relu>(p, *m);
  if (op == "Softmax" || op == "LogSoftmax") {
    const auto r = static_cast<I>(a.size());
    I axis = p.node->attr_i("axis", p.opset >= 13 ? -1 : 1);
    if (axis < 0) axis += r;
    I outer = 1, c = 1, inner = 1;
    for (I i = 0; i < r; ++i)
      (i < axis ? outer : i == axis || p.opset < 13 ? c : inner) *= a[static_cast<std::size_t>(i)];
    if (!fits_int(outer) || !fits_int(c) || !fits_int(inner)) return nullptr;
    return std::make_unique<Softmax>(p, *m, outer, c, inner);
  }
  if (is_batch_norm(op))
    if (auto k = cudnn_batch_norm(p, *m, a)) return k;
#endif
#ifdef D500_HAVE_CUDA_KERNELS
  if (is_batch_norm(op)) {
    const auto k = dev::batch_norm_of(p);
    return k ? std::make_unique<BatchNormKernels>(p, *m, *k) : nullptr;
  }
#endif
  return nullptr;
}

}  // namespace d500::cuda
