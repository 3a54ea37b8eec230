// The `libtorch` backend: LibTorch's ATen operators on CPU (Debian libtorch-dev). The timed call is
// the functional ATen operator a PyTorch model calls (at::convolution, at::native_batch_norm, ...):
// it allocates its result inside the call, as it does in a model, and the previous result is
// freed there too. Inputs are wrapped without copies (at::from_blob); results are copied into the
// problem's buffers after the run, untimed. Only this file includes ATen.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/api/include/torch/version.h>

#include "backends/libtorch/libtorch_backend.hpp"
#include "common/error.hpp"
#include "workloads/level0/operator.hpp"

namespace d500 {

std::string libtorch_version() {
  // get_parallel_info() is several lines; the one naming the threading backend is enough.
  std::string info = at::get_parallel_info(), backend = "ATen CPU";
  auto at_line = info.find("ATen parallel backend: ");
  if (at_line != std::string::npos) backend = info.substr(at_line + 23, info.find('\n', at_line) - at_line - 23);
  return "LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH) + " (CPU, " + backend + ")";
}

namespace {

at::Tensor wrap(const Tensor& t) {
  return at::from_blob(const_cast<float*>(t.data.data()), at::IntArrayRef(t.dims), at::kFloat);
}

void copy_into(const at::Tensor& from, Tensor& to) {
  at::Tensor c = from.contiguous();
  if (c.numel() != to.numel())
    throw Error("libtorch: result has " + std::to_string(c.numel()) + " elements, expected " + std::to_string(to.numel()));
  std::copy(c.data_ptr<float>(), c.data_ptr<float>() + c.numel(), to.data.begin());
}

class TorchKernel final : public OpKernel {
 public:
  TorchKernel(OpProblem& p, int threads) : p_(p) {
    at::set_num_threads(threads);
    for (const auto& t : p.in) in_.push_back(wrap(t));
    setup();
  }

  void run() override {
    c10::NoGradGuard no_grad;
    results_ = call_();
  }

  void finish() override {
    if (p_.op == "batchnorm" && p_.pass == "forward" && p_.s("mode") == "training") {
      // ATen returns the inverse standard deviation; the problem's output is the variance.
      const double eps = std::get<double>(p_.params.at("eps"));
      results_[2] = 1.0 / (results_[2] * results_[2]) - eps;
    }
    for (std::size_t i = 0; i < p_.out.size(); ++i) copy_into(results_.at(i), p_.out[i]);
  }

 private:
  void setup() {
    const auto& in = in_;
    if (p_.op == "conv2d") {
      const ConvShape cs = conv_shape(p_);
      const std::vector<std::int64_t> st{cs.stride, cs.stride}, pad{cs.pad, cs.pad}, dil{cs.dilation, cs.dilation};
      const std::int64_t g = cs.groups;
      if (p_.pass == "forward") {
        call_ = [=] { return std::vector<at::Tensor>{at::convolution(in[0], in[1], c10::nullopt, st, pad, dil, false, {0, 0}, g)}; };
      } else if (p_.pass == "backward_data") {
        // convolution_backward takes the input and weight tensors for their shapes.
        const at::Tensor x = at::zeros({cs.n, cs.c, cs.h, cs.w});
        call_ = [=] {
          return std::vector<at::Tensor>{std::get<0>(at::convolution_backward(
              in[0], x, in[1], c10::nullopt, st, pad, dil, false, {0, 0}, g, {true, false, false}))};
        };
      } else {
        const at::Tensor w = at::zeros({cs.k, cs.cg(), cs.r, cs.s});
        call_ = [=] {
          return std::vector<at::Tensor>{std::get<1>(at::convolution_backward(
              in[1], in[0], w, c10::nullopt, st, pad, dil, false, {0, 0}, g, {false, true, false}))};
        };
      }
    } else if (p_.op == "pool2d") {
      const PoolShape ps = pool_shape(p_);
      const std::vector<std::int64_t> k{ps.kernel, ps.kernel}, st{ps.stride, ps.stride}, pad{ps.pad, ps.pad};
      if (p_.pass == "forward" && ps.max) {
        call_ = [=] { return std::vector<at::Tensor>{at::max_pool2d(in[0], k, st, pad)}; };
      } else if (p_.pass == "forward") {
        call_ = [=] { return std::vector<at::Tensor>{at::avg_pool2d(in[0], k, st, pad, false, false)}; };
      } else if (ps.max) {
        // The positions of the maxima come from the forward pass, run once here, untimed.
        const at::Tensor idx = std::get<1>(at::max_pool2d_with_indices(in[0], k, st, pad));
        call_ = [=] {
          return std::vector<at::Tensor>{at::max_pool2d_with_indices_backward(in[1], in[0], k, st, pad, {1, 1}, false, idx)};
        };
      } else {
        call_ = [=] {
          return std::vector<at::Tensor>{at::avg_pool2d_backward(in[1], in[0], k, st, pad, false, false, c10::nullopt)};
        };
      }
    } else if (p_.op == "batchnorm") {
      const double eps = std::get<double>(p_.params.at("eps"));
      if (p_.pass == "backward") {
        // x, dy, gamma, mean, var: ATen's backward takes the saved inverse standard deviation.
        const at::Tensor invstd = 1.0 / at::sqrt(in[4] + eps);
        call_ = [=] {
          auto [dx, dg, db] = at::native_batch_norm_backward(in[1], in[0], in[2], c10::nullopt, c10::nullopt, in[3],
                                                             invstd, true, eps, {true, true, true});
          return std::vector<at::Tensor>{dx, dg, db};
        };
      } else if (p_.s("mode") == "training") {
        call_ = [=] {
          auto [y, mean, invstd] = at::native_batch_norm(in[0], in[1], in[2], c10::nullopt, c10::nullopt, true, 0.0, eps);
          return std::vector<at::Tensor>{y, mean, invstd};
        };
      } else {
        call_ = [=] {
          return std::vector<at::Tensor>{
              std::get<0>(at::native_batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.0, eps))};
        };
      }
    } else if (p_.op == "relu") {
      if (p_.pass == "forward") call_ = [=] { return std::vector<at::Tensor>{at::relu(in[0])}; };
      else call_ = [=] { return std::vector<at::Tensor>{at::threshold_backward(in[1], in[0], 0)}; };
    } else if (p_.op == "softmax") {
      if (p_.pass == "forward") call_ = [=] { return std::vector<at::Tensor>{at::_softmax(in[0], 1, false)}; };
      else call_ = [=] { return std::vector<at::Tensor>{at::_softmax_backward_data(in[1], in[0], 1, at::kFloat)}; };
    } else {
      throw Error("the libtorch backend has no " + p_.op);
    }
  }

  OpProblem& p_;
  std::vector<at::Tensor> in_, results_;
  std::function<std::vector<at::Tensor>()> call_;
};

// C = A * B through at::mm, as torch.mm.
class TorchGemm final : public OpKernel {
 public:
  TorchGemm(int m, int n, int k, const float* a, const float* b, float* c, int threads) : c_(c) {
    at::set_num_threads(threads);
    a_ = at::from_blob(const_cast<float*>(a), {m, k}, at::kFloat);
    b_ = at::from_blob(const_cast<float*>(b), {k, n}, at::kFloat);
  }
  void run() override { r_ = at::mm(a_, b_); }
  void finish() override { std::copy(r_.data_ptr<float>(), r_.data_ptr<float>() + r_.numel(), c_); }

 private:
  float* c_;
  at::Tensor a_, b_, r_;
};

}  // namespace

std::unique_ptr<OpKernel> make_libtorch_kernel(OpProblem& p, int threads) {
  try {
    return std::make_unique<TorchKernel>(p, threads);
  } catch (const c10::Error& e) {
    throw Error("LibTorch " + p.op + " " + p.pass + ": " + e.what_without_backtrace());
  }
}

std::unique_ptr<OpKernel> make_libtorch_gemm(int m, int n, int k, const float* a, const float* b, float* c, int threads) {
  return std::make_unique<TorchGemm>(m, n, k, a, b, c, threads);
}

}  // namespace d500
