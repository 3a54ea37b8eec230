#pragma once
// Level 2's optimizers: what a point asks for (OptimizerSpec, with its learning-rate schedule),
// the one interface every optimizer has (Optimizer), and d500's reference optimizers, written
// once and applied to the float32 parameters and gradients of any executor (GraphRunner::
// parameter, parameter_gradient). A framework's own optimizer (LibTorch's torch::optim) comes
// from its runner (GraphRunner::native_optimizer) behind the same interface.
//
// The update rules are PyTorch's, term for term (torch.optim, 1.13), so that the reference and
// the native optimizer can be compared on the same gradients:
//   sgd       p -= lr * (g + wd p)
//   momentum  b = mu b + (g + wd p)  (b = g + wd p at the first step);  p -= lr b
//   nesterov  as momentum, but p -= lr ((g + wd p) + mu b)
//   adam      g' = g + wd p; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
//             p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
//   adamw     p *= 1 - lr wd, then adam with wd = 0
//   adagrad   g' = g + wd p; s += g'^2; p -= lr g' / (sqrt(s) + eps)
//   rmsprop   g' = g + wd p; s = alpha s + (1-alpha) g'^2; a = sqrt(s) + eps;
//             mu > 0: b = mu b + g'/a, p -= lr b;  else p -= lr g'/a
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/optimizer_rule.hpp"
#include "common/error.hpp"

namespace d500 {

struct OptimizerSpec {
  std::string name = "sgd";  // sgd, momentum, nesterov, adam, adamw, adagrad, rmsprop
  double lr = 0.01;
  double momentum = 0.9;  // momentum, nesterov; rmsprop's (0: none)
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double alpha = 0.99;  // rmsprop's smoothing
  double weight_decay = 0;
  // The learning rate over steps: constant, step (x gamma every step_size steps), cosine (to 0
  // at total_steps); a linear warm-up from lr/warmup_steps to lr over the first warmup_steps.
  std::string schedule = "constant";
  std::int64_t step_size = 1000;
  double gamma = 0.1;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 0;  // cosine's horizon; 0: constant after warm-up
};

// The names OptimizerSpec::name and ::schedule take.
const std::vector<std::string>& optimizer_names();
const std::vector<std::string>& schedule_names();
// "" when the spec is valid, else why not (names the key).
std::string check_optimizer(const OptimizerSpec& s);
// The learning rate of step `step` (0-based) under the spec's schedule.
double learning_rate(const OptimizerSpec& s, std::int64_t step);
// The rule in words, for the point's record: "adam (PyTorch's rule) lr=0.001 betas=(0.9,0.999) ...".
std::string describe_optimizer(const OptimizerSpec& s);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies one update with learning rate `lr` to the parameters from their current gradients.
  virtual void step(double lr) = 0;
  virtual std::string describe() const = 0;
  // The optimizer's state (moments, step count), for checkpoints: opaque bytes that load() takes back.
  virtual std::vector<std::byte> save() const = 0;
  virtual void load(const std::vector<std::byte>& state) = 0;
  // A step of a recording replayed (GraphRunner::replay_step) with learning rate `lr`: the device
  // ran the step() recorded, with its coefficients then; the optimizer counts the step and throws
  // where this step's coefficients differ from the recorded ones (a schedule's rate, Adam's bias
  // corrections). Only an optimizer whose step a runner records has it.
  virtual void replayed(double /*lr*/) { throw Error("internal error: " + describe() + " has no recorded step"); }
};

// The parameters as the reference optimizer sees them: float32 storage and gradients (a
// gradient may move between steps: the optimizer asks for it at every step).
class ParamAccess {
 public:
  virtual ~ParamAccess() = default;
  virtual std::size_t count() const = 0;
  virtual float* data(std::size_t k) = 0;
  virtual const float* grad(std::size_t k) = 0;  // nullptr: no gradient (treated as zero)
  virtual std::int64_t numel(std::size_t k) const = 0;
  virtual void changed() = 0;  // the parameters were written
};

// The rule named `name` (one of optimizer_names(); throws otherwise), and one step's coefficients
// for the element update every optimizer of d500's applies (optimizer_rule.hpp): step `t` is
// 1-based, `lr` the schedule's rate for it.
UpdateRule rule_of(const std::string& name);
StepRule step_rule(const OptimizerSpec& s, double lr, std::int64_t t);

// The rules an optimizer of axpy and scale alone computes (SGD's family): d500's device
// optimizer (networks/executor.cpp) has these, and a device backend's plan-time check names them.
const std::vector<std::string>& axpy_optimizer_names();

// The checkpoint layout of d500's own optimizers (reference and device): the step count (int64),
// then each state buffer's floats in order. Unpacking fills the buffers at their sizes and returns
// the step count; bytes that do not fit them are refused, naming `who`.
std::vector<std::byte> pack_optimizer_state(std::int64_t step, const std::vector<const std::vector<float>*>& buffers);
std::int64_t unpack_optimizer_state(const std::vector<std::byte>& state,
                                    const std::vector<std::vector<float>*>& buffers, const std::string& who);

// d500's reference optimizer over `params` (which must outlive it).
std::unique_ptr<Optimizer> make_reference_optimizer(const OptimizerSpec& s, ParamAccess& params);

}  // namespace d500
