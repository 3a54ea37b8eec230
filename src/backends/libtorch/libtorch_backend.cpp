// The `libtorch` backend: LibTorch's ATen operators on CPU (Debian libtorch-dev 1.13). Tensors wrap
// d500's buffers without copies (at::from_blob), and the timed call is the ATen operator writing
// into them through its native out= variant (at::mm_out, at::threshold_out, at::_softmax_out,
// at::max_pool2d_with_indices_out, at::avg_pool2d_out and their backward functions). Convolutions
// and batch normalisation have no native CPU out= variant in 1.13: their calls allocate the
// result, as in a model (see keep_freed_memory), and it is copied out after the run, untimed.
// ATen is included here and in the level-1 files beside this one (libtorch_graph.cpp,
// libtorch_native.cpp).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <c10/core/GradMode.h>
#include <malloc.h>
#include <torch/csrc/api/include/torch/version.h>

#include "backends/blas/blas_backend.hpp"
#include "backends/kernel.hpp"
#include "backends/libtorch/libtorch_backend.hpp"
#include "backends/libtorch/libtorch_declared.hpp"
#include "backends/registry.hpp"
#include "common/error.hpp"

namespace d500 {

namespace {

std::string libtorch_version() {
  // get_parallel_info() is several lines; the one naming the threading backend is enough.
  std::string info = at::get_parallel_info(), backend = "ATen CPU";
  auto at_line = info.find("ATen parallel backend: ");
  if (at_line != std::string::npos) backend = info.substr(at_line + 23, info.find('\n', at_line) - at_line - 23);
  return "LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH) + (at::hasCUDA() ? " (CUDA and CPU, " : " (CPU, ") + backend + ")";
}

// ATen's intra-op threads, and those of the BLAS it calls for matrix products: Debian's LibTorch
// uses OpenBLAS (libblas.so.3 -> openblas-pthread), the same library instance as the blas backend,
// whose own thread count at::set_num_threads does not reach.
void set_threads(int threads) {
  at::set_num_threads(threads);
  openblas_threads(threads);
}

at::Tensor wrap(const Tensor& t) {
  return at::from_blob(const_cast<float*>(t.data.data()), at::IntArrayRef(t.dims), at::kFloat);
}

// For the operators whose ATen call allocates its result (conv2d, batchnorm backward): glibc
// returns large blocks to the kernel on free and maps fresh zero pages on the next malloc, and on
// this class of virtual machine the page faults cost as much as a small convolution, in bursts
// that follow glibc's adaptive thresholds. Keeping freed memory in the heap makes the next
// result reuse it: the call still allocates, as in a model, but at the cost of a caching
// allocator (or of jemalloc/tcmalloc, which PyTorch recommends on CPU), not of page faults.
// Process-wide; no other backend allocates inside a timed region.
void keep_freed_memory() {
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX);
  // larger results are still mapped afresh on every call.
  if (mallopt(M_MMAP_THRESHOLD, 32 << 20) != 1 || mallopt(M_TRIM_THRESHOLD, -1) != 1)
    throw Error("libtorch: glibc refused mallopt(M_MMAP_THRESHOLD / M_TRIM_THRESHOLD)");
}

void copy_into(const at::Tensor& from, Tensor& to) {
  at::Tensor c = from.contiguous();
  if (c.numel() != to.numel())
    throw Error("libtorch: result has " + std::to_string(c.numel()) + " elements, expected " +
                std::to_string(to.numel()));
  std::copy(c.data_ptr<float>(), c.data_ptr<float>() + c.numel(), to.data.begin());
}

class TorchKernel final : public OpKernel {
 public:
  TorchKernel(OpProblem& p, int threads) : p_(p) {
    set_threads(threads);
    for (const auto& t : p.in) in_.push_back(wrap(t));
    for (const auto& t : p.out) out_.push_back(wrap(t));
    setup();
  }

  void run() override {
    c10::NoGradGuard no_grad;
    call_();
  }

  // Results that ATen allocated (no native out= variant) are copied into the problem's buffers;
  // batch normalisation's inverse standard deviation becomes the variance the problem asks for.
  void finish() override {
    for (std::size_t i = 0; i < results_.size(); ++i) copy_into(results_[i], p_.out[i]);
    if (invstd_.defined() && p_.s("mode") == "training" && p_.pass == "forward") {
      const double eps = std::get<double>(p_.params.at("eps"));
      copy_into(1.0 / (invstd_ * invstd_) - eps, p_.output("var"));
    }
  }

 private:
  void setup() {
    if (p_.op == "conv2d") {
      // ATen 1.13 has no native out= convolution (convolution_out allocates and copies), so the
      // result is allocated inside the call, as in a model; see keep_freed_memory().
      keep_freed_memory();
      const ConvShape cs = conv_shape(p_);
      const std::vector<std::int64_t> st{cs.stride, cs.stride}, pad{cs.pad, cs.pad}, dil{cs.dilation, cs.dilation};
      const std::int64_t g = cs.groups;
      results_.resize(1);
      if (p_.pass == "forward") {
        call_ = [this, st, pad, dil, g] {
          results_[0] = at::convolution(in_[0], in_[1], c10::nullopt, st, pad, dil, false, {0, 0}, g);
        };
      } else if (p_.pass == "backward_data") {
        // convolution_backward takes the input and weight tensors for their shapes.
        shape_ = at::zeros({cs.n, cs.c, cs.h, cs.w});
        call_ = [this, st, pad, dil, g] {
          results_[0] = std::get<0>(at::convolution_backward(in_[0], shape_, in_[1], c10::nullopt, st, pad, dil, false,
                                                             {0, 0}, g, {true, false, false}));
        };
      } else {
        shape_ = at::zeros({cs.k, cs.cg(), cs.r, cs.s});
        call_ = [this, st, pad, dil, g] {
          results_[0] = std::get<1>(at::convolution_backward(in_[1], in_[0], shape_, c10::nullopt, st, pad, dil, false,
                                                             {0, 0}, g, {false, true, false}));
        };
      }
    } else if (p_.op == "pool2d") {
      const PoolShape ps = pool_shape(p_);
      const std::vector<std::int64_t> k{ps.kernel, ps.kernel}, st{ps.stride, ps.stride}, pad{ps.pad, ps.pad};
      if (ps.max) {
        // The forward pass as training runs it (with the positions of the maxima); the backward
        // pass takes them from one untimed forward pass.
        indices_ = at::empty({ps.n, ps.c, ps.p(), ps.q()}, at::kLong);
        if (p_.pass == "forward") {
          call_ = [this, k, st, pad] { at::max_pool2d_with_indices_out(out_[0], indices_, in_[0], k, st, pad); };
        } else {
          at::Tensor y = at::empty({ps.n, ps.c, ps.p(), ps.q()});
          at::max_pool2d_with_indices_out(y, indices_, in_[0], k, st, pad);
          call_ = [this, k, st, pad] {
            at::max_pool2d_with_indices_backward_out(out_[0], in_[1], in_[0], k, st, pad, {1, 1}, false, indices_);
          };
        }
      } else if (p_.pass == "forward") {
        call_ = [this, k, st, pad] { at::avg_pool2d_out(out_[0], in_[0], k, st, pad, false, false); };
      } else {
        call_ = [this, k, st, pad] {
          at::avg_pool2d_backward_out(out_[0], in_[1], in_[0], k, st, pad, false, false, c10::nullopt);
        };
      }
    } else if (p_.op == "batchnorm") {
      const double eps = std::get<double>(p_.params.at("eps"));
      if (p_.pass == "backward") {
        // x, dy, gamma, mean, var. ATen's backward takes the saved inverse standard deviation,
        // and has no native out= variant in 1.13: its three results are allocated in the call.
        keep_freed_memory();
        invstd_ = 1.0 / at::sqrt(in_[4] + eps);
        results_.resize(3);
        call_ = [this, eps] {
          std::tie(results_[0], results_[1], results_[2]) = at::native_batch_norm_backward(
              in_[1], in_[0], in_[2], c10::nullopt, c10::nullopt, in_[3], invstd_, true, eps, {true, true, true});
        };
      } else {
        // Debian's LibTorch 1.13 registers no CPU kernel for native_batch_norm.out: the
        // functional call allocates y (and the saved statistics), as in a model.
        keep_freed_memory();
        const bool training = p_.s("mode") == "training";
        results_.resize(training ? 2 : 1);
        call_ = [this, eps, training] {
          if (training) {
            // y, the batch mean, and the inverse standard deviation (finish() makes it var).
            std::tie(results_[0], results_[1], invstd_) =
                at::native_batch_norm(in_[0], in_[1], in_[2], c10::nullopt, c10::nullopt, true, 0.0, eps);
          } else {
            results_[0] = std::get<0>(at::native_batch_norm(in_[0], in_[1], in_[2], in_[3], in_[4], false, 0.0, eps));
          }
        };
      }
    } else if (p_.op == "relu") {
      if (p_.pass == "forward")
        call_ = [this] { at::threshold_out(out_[0], in_[0], 0, 0); };  // relu: x <= 0 -> 0
      else
        call_ = [this] { at::threshold_backward_out(out_[0], in_[1], in_[0], 0); };
    } else if (p_.op == "softmax") {
      if (p_.pass == "forward")
        call_ = [this] { at::_softmax_out(out_[0], in_[0], 1, false); };
      else
        call_ = [this] { at::_softmax_backward_data_out(out_[0], in_[1], in_[0], 1, at::kFloat); };
    } else {
      throw Error("the libtorch backend has no " + p_.op);
    }
  }

  OpProblem& p_;
  std::vector<at::Tensor> in_, out_, results_;
  at::Tensor shape_, indices_, invstd_;
  std::function<void()> call_;
};

// C = A * B through at::mm_out into d500's buffer, as torch.mm(a, b, out=c).
class TorchGemm final : public OpKernel {
 public:
  TorchGemm(OpProblem& p, int threads) {
    set_threads(threads);
    a_ = wrap(p.in[0]);
    b_ = wrap(p.in[1]);
    c_ = wrap(p.out[0]);
  }
  void run() override { at::mm_out(c_, a_, b_); }

 private:
  at::Tensor a_, b_, c_;
};

std::unique_ptr<OpKernel> make_libtorch_kernel(OpProblem& p, int threads) {
  try {
    if (p.op == "gemm") return std::make_unique<TorchGemm>(p, threads);
    return std::make_unique<TorchKernel>(p, threads);
  } catch (const c10::Error& e) {
    throw Error("LibTorch " + p.op + " " + p.pass + ": " + e.what_without_backtrace());
  }
}

}  // namespace

// The module's side of the declarations in libtorch_declared.hpp (the core's, which name the
// functions below; the registry checks that both agree when it loads this module).
void provide_backend_libtorch(BackendRegistry& r) {
  BackendInfo b = libtorch_declared();
  b.version = libtorch_version;
  b.make_kernel = make_libtorch_kernel;
  b.make_node_kernel = make_libtorch_node_kernel;
  r.add(std::move(b));
}

namespace {
// LibTorch executing whole graphs itself, on the CPU or the GPU: the same version and check.
BackendInfo native_runner(BackendInfo b, std::unique_ptr<GraphRunner> (*make)(const RunnerSpec&)) {
  b.version = libtorch_version;
  b.make_graph_runner = make;
  b.check_graph = libtorch_native_check;
  return b;
}
}  // namespace

void provide_backend_libtorch_native(BackendRegistry& r) {
  r.add(native_runner(libtorch_native_declared(), make_libtorch_native_runner));
}

void provide_backend_libtorch_cuda(BackendRegistry& r) {
  BackendInfo b = native_runner(libtorch_cuda_declared(), make_libtorch_cuda_runner);
  b.no_device = libtorch_cuda_no_device;
  b.rank_device = libtorch_cuda_rank_device;
  b.device_facts = [] { return std::vector<std::pair<std::string, std::string>>{}; };
  r.add(std::move(b));
}

}  // namespace d500
