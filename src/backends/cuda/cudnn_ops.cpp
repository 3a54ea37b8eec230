// The cuda backend's other level-0 operators through cuDNN's ops library (its v8-style "legacy"
// API, which cuDNN 9 keeps and PyTorch still calls): pooling, batch normalisation, ReLU and
// softmax, float32 NCHW as d500's problems hold them. One cuDNN call per repetition, timed as
// every cuda kernel (cuda_common.hpp). A backward pass that cuDNN computes from the forward's
// output (pooling, ReLU) gets that output from a forward call at setup, untimed, as a training
// step would have it from its forward pass.
#include <cmath>
#include <string>
#include <vector>

#include "backends/cuda/cudnn_common.hpp"
#include "common/error.hpp"

namespace d500::cuda {

namespace {

constexpr float kScaleOne = 1.0f, kScaleZero = 0.0f;

// pool2d: in x (forward) or x, dy (backward); out y or dx. Max pooling is cuDNN's deterministic
// max (the gradient to one maximum per window); average pooling excludes the padding, as d500's
// reference, PyTorch's count_include_pad=False and oneDNN's avg_exclude_padding do.
class CudnnPool final : public CudnnKernel {
 public:
  explicit CudnnPool(OpProblem& p)
      : CudnnKernel(p), ps_(pool_shape(p)), x_(ps_.n, ps_.c, ps_.h, ps_.w), y_(ps_.n, ps_.c, ps_.p(), ps_.q()) {
    const auto k = static_cast<int>(ps_.kernel), pad = static_cast<int>(ps_.pad), stride = static_cast<int>(ps_.stride);
    cudnn_check(cudnnCreatePoolingDescriptor(&pool_), "cudnnCreatePoolingDescriptor");
    cudnn_check(cudnnSetPooling2dDescriptor(
                    pool_, ps_.max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
                    CUDNN_NOT_PROPAGATE_NAN, k, k, pad, pad, stride, stride),
                "cudnnSetPooling2dDescriptor");
    int n = 0, c = 0, h = 0, w = 0;
    cudnn_check(cudnnGetPooling2dForwardOutputDim(pool_, x_.get(), &n, &c, &h, &w),
                "cudnnGetPooling2dForwardOutputDim");
    if (h != ps_.p() || w != ps_.q())
      throw Error("cuda: cuDNN's pooling output is " + std::to_string(h) + "x" + std::to_string(w) + ", d500's " +
                  std::to_string(ps_.p()) + "x" + std::to_string(ps_.q()));
    if (p.pass == "backward") {
      y_data_ = scratch(static_cast<std::size_t>(ps_.n * ps_.c * ps_.p() * ps_.q()) * sizeof(float));
      cudnn_check(cudnnPoolingForward(handle_, pool_, &kScaleOne, x_.get(), in(0), &kScaleZero, y_.get(), y_data_),
                  "cudnnPoolingForward (setup)");
    }
  }
  ~CudnnPool() override {
    if (pool_) cudnnDestroyPoolingDescriptor(pool_);
  }

  void run() override {
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    timer_.timed([&] {
      if (p_.pass == "forward")
        s = cudnnPoolingForward(handle_, pool_, &kScaleOne, x_.get(), in(0), &kScaleZero, y_.get(), out(0));
      else  // in: x, dy
        s = cudnnPoolingBackward(handle_, pool_, &kScaleOne, y_.get(), y_data_, y_.get(), in(1), x_.get(), in(0),
                                 &kScaleZero, x_.get(), out(0));
    });
    cudnn_check(s, p_.pass == "forward" ? "cudnnPoolingForward" : "cudnnPoolingBackward");
  }

  std::vector<std::pair<std::string, Value>> facts() const override {
    return {{"cudnn.choice", std::string(ps_.max ? "cudnnPooling*, CUDNN_POOLING_MAX_DETERMINISTIC"
                                                 : "cudnnPooling*, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING") +
                                 "; NCHW float32" +
                                 (p_.pass == "backward" ? "; y from a forward call at setup, untimed" : "")}};
  }

 private:
  PoolShape ps_;
  TensorDesc x_, y_;
  cudnnPoolingDescriptor_t pool_ = nullptr;
  void* y_data_ = nullptr;
};

// batchnorm, spatial (per channel over N, H, W). In and out as d500's problem (batchnorm.cpp):
//   forward training:  x, gamma, beta            -> y, mean, var (biased)
//   forward inference: x, gamma, beta, mean, var -> y
//   backward:          x, dy, gamma, mean, var   -> dx, dgamma, dbeta
// Training writes cuDNN's running mean and variance with an averaging factor of 1, i.e. the batch's
// own mean and its unbiased variance, which finish() turns into the biased one d500 compares
// (var * (M - 1) / M). The backward pass is given the saved mean and 1 / sqrt(var + eps), made at
// setup, as a forward pass would have saved them.
class CudnnBatchNorm final : public CudnnKernel {
 public:
  explicit CudnnBatchNorm(OpProblem& p)
      : CudnnKernel(p),
        d_(nchw_shape(p)),
        eps_(std::get<double>(p.params.at("eps"))),
        training_(p.s("mode") == "training"),
        x_(d_.n, d_.c, d_.h, d_.w),
        bn_(1, d_.c, 1, 1) {
    if (eps_ < CUDNN_BN_MIN_EPSILON) throw Error("cuda: cuDNN needs eps >= " + std::to_string(CUDNN_BN_MIN_EPSILON));
    const std::size_t chan = static_cast<std::size_t>(d_.c) * sizeof(float);
    if (p.pass == "backward") {
      std::vector<float> inv(static_cast<std::size_t>(d_.c));
      const std::vector<float>& var = p.in[4].data;
      for (std::size_t c = 0; c < inv.size(); ++c)
        inv[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[c]) + eps_));
      inv_var_ = std::make_unique<DeviceBuffer>(chan);
      inv_var_->upload(inv.data(), chan);
    } else if (training_) {
      save_mean_ = scratch(chan);
      save_inv_var_ = scratch(chan);
    }
  }

  void run() override {
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    const auto mode = CUDNN_BATCHNORM_SPATIAL;
    timer_.timed([&] {
      if (p_.pass == "backward")
        s = cudnnBatchNormalizationBackward(handle_, mode, &kScaleOne, &kScaleZero, &kScaleOne, &kScaleZero, x_.get(),
                                            in(0), x_.get(), in(1), x_.get(), out(0), bn_.get(), in(2), out(1), out(2),
                                            eps_, in(3), inv_var_->get());
      else if (training_)
        s = cudnnBatchNormalizationForwardTraining(handle_, mode, &kScaleOne, &kScaleZero, x_.get(), in(0), x_.get(),
                                                   out(0), bn_.get(), in(1), in(2), 1.0, out(1), out(2), eps_,
                                                   save_mean_, save_inv_var_);
      else
        s = cudnnBatchNormalizationForwardInference(handle_, mode, &kScaleOne, &kScaleZero, x_.get(), in(0), x_.get(),
                                                    out(0), bn_.get(), in(1), in(2), in(3), in(4), eps_);
    });
    cudnn_check(s, p_.pass == "backward" ? "cudnnBatchNormalizationBackward"
                   : training_           ? "cudnnBatchNormalizationForwardTraining"
                                         : "cudnnBatchNormalizationForwardInference");
  }

  void finish() override {
    CudnnKernel::finish();
    if (p_.pass != "forward" || !training_) return;
    const double m = static_cast<double>(d_.n * d_.plane());
    for (float& v : p_.out[2].data) v = m > 1 ? static_cast<float>(static_cast<double>(v) * (m - 1) / m) : 0.0f;
  }

  std::vector<std::pair<std::string, Value>> facts() const override {
    return {
        {"cudnn.choice",
         std::string("cudnnBatchNormalization*, CUDNN_BATCHNORM_SPATIAL; NCHW float32") +
             (p_.pass == "backward" ? "; saved mean and 1/sqrt(var + eps) given, made at setup"
              : training_ ? "; the running statistics written with factor 1 (the batch's mean, its unbiased variance)"
                          : "")}};
  }

 private:
  Nchw d_;
  double eps_;
  bool training_;
  TensorDesc x_, bn_;
  std::unique_ptr<DeviceBuffer> inv_var_;
  void* save_mean_ = nullptr;
  void* save_inv_var_ = nullptr;
};

// relu: forward x -> y; backward x, dy -> dx, cuDNN reading y (made at setup) as well.
class CudnnRelu final : public CudnnKernel {
 public:
  explicit CudnnRelu(OpProblem& p) : CudnnKernel(p), d_(nchw_shape(p)), x_(d_.n, d_.c, d_.h, d_.w) {
    cudnn_check(cudnnCreateActivationDescriptor(&act_), "cudnnCreateActivationDescriptor");
    cudnn_check(cudnnSetActivationDescriptor(act_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
                "cudnnSetActivationDescriptor");
    if (p.pass == "backward") {
      y_data_ = scratch(static_cast<std::size_t>(d_.size()) * sizeof(float));
      cudnn_check(cudnnActivationForward(handle_, act_, &kScaleOne, x_.get(), in(0), &kScaleZero, x_.get(), y_data_),
                  "cudnnActivationForward (setup)");
    }
  }
  ~CudnnRelu() override {
    if (act_) cudnnDestroyActivationDescriptor(act_);
  }

  void run() override {
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    timer_.timed([&] {
      if (p_.pass == "forward")
        s = cudnnActivationForward(handle_, act_, &kScaleOne, x_.get(), in(0), &kScaleZero, x_.get(), out(0));
      else
        s = cudnnActivationBackward(handle_, act_, &kScaleOne, x_.get(), y_data_, x_.get(), in(1), x_.get(), in(0),
                                    &kScaleZero, x_.get(), out(0));
    });
    cudnn_check(s, p_.pass == "forward" ? "cudnnActivationForward" : "cudnnActivationBackward");
  }

  std::vector<std::pair<std::string, Value>> facts() const override {
    return {{"cudnn.choice", std::string("cudnnActivation*, CUDNN_ACTIVATION_RELU; NCHW float32") +
                                 (p_.pass == "backward" ? "; y from a forward call at setup, untimed" : "")}};
  }

 private:
  Nchw d_;
  TensorDesc x_;
  cudnnActivationDescriptor_t act_ = nullptr;
  void* y_data_ = nullptr;
};

// softmax over the c columns of each of n rows (cuDNN's instance mode on n x c x 1 x 1):
// forward x -> y; backward y, dy -> dx. CUDNN_SOFTMAX_ACCURATE subtracts the row maximum, as
// d500's reference does.
class CudnnSoftmax final : public CudnnKernel {
 public:
  explicit CudnnSoftmax(OpProblem& p) : CudnnKernel(p), x_(p.i("n"), p.i("c"), 1, 1) {}

  void run() override {
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    timer_.timed([&] {
      if (p_.pass == "forward")
        s = cudnnSoftmaxForward(handle_, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &kScaleOne, x_.get(),
                                in(0), &kScaleZero, x_.get(), out(0));
      else
        s = cudnnSoftmaxBackward(handle_, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &kScaleOne, x_.get(),
                                 in(0), x_.get(), in(1), &kScaleZero, x_.get(), out(0));
    });
    cudnn_check(s, p_.pass == "forward" ? "cudnnSoftmaxForward" : "cudnnSoftmaxBackward");
  }

  std::vector<std::pair<std::string, Value>> facts() const override {
    return {
        {"cudnn.choice",
         std::string("cudnnSoftmax*, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE (n x c x 1 x 1); float32")}};
  }

 private:
  TensorDesc x_;
};

}  // namespace

std::unique_ptr<OpKernel> make_cudnn_op(OpProblem& p) {
  if (p.op == "pool2d") return std::make_unique<CudnnPool>(p);
  if (p.op == "batchnorm") return std::make_unique<CudnnBatchNorm>(p);
  if (p.op == "relu") return std::make_unique<CudnnRelu>(p);
  if (p.op == "softmax") return std::make_unique<CudnnSoftmax>(p);
  throw Error("cuda: no cuDNN kernel for operator '" + p.op + "'");
}

}  // namespace d500::cuda
