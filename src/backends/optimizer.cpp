// d500's reference optimizers (the rules are in optimizer.hpp): float32 state, float32
// arithmetic in PyTorch's order of operations, one pass over each parameter per step.
#include "backends/optimizer.hpp"

#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/value.hpp"

namespace d500 {

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> v{"sgd", "momentum", "nesterov", "adam", "adamw", "adagrad", "rmsprop"};
  return v;
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> v{"constant", "step", "cosine"};
  return v;
}

std::string check_optimizer(const OptimizerSpec& s) {
  auto in = [](const std::vector<std::string>& v, const std::string& x) {
    for (const auto& e : v)
      if (e == x) return true;
    return false;
  };
  if (!in(optimizer_names(), s.name))
    return "optimizer '" + s.name + "' is not one of " + join(optimizer_names(), ", ");
  if (!in(schedule_names(), s.schedule))
    return "schedule '" + s.schedule + "' is not one of " + join(schedule_names(), ", ");
  if (!(s.lr > 0) || !std::isfinite(s.lr)) return "lr must be a positive number";
  if (!(s.momentum >= 0 && s.momentum < 1)) return "momentum must be in [0, 1)";
  if ((s.name == "momentum" || s.name == "nesterov") && !(s.momentum > 0))
    return "optimizer '" + s.name + "' needs momentum > 0 (0 is plain sgd)";
  if (!(s.beta1 >= 0 && s.beta1 < 1) || !(s.beta2 >= 0 && s.beta2 < 1)) return "beta1 and beta2 must be in [0, 1)";
  if (!(s.eps > 0)) return "eps must be positive";
  if (!(s.alpha >= 0 && s.alpha < 1)) return "alpha must be in [0, 1)";
  if (!(s.weight_decay >= 0)) return "weight_decay must be >= 0";
  if (s.schedule == "step" && (s.step_size <= 0 || !(s.gamma > 0)))
    return "the step schedule needs step_size > 0 and gamma > 0";
  if (s.warmup_steps < 0) return "warmup_steps must be >= 0";
  return "";
}

double learning_rate(const OptimizerSpec& s, std::int64_t step) {
  double lr = s.lr;
  if (s.warmup_steps > 0 && step < s.warmup_steps)
    return lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  const std::int64_t t = step - s.warmup_steps;
  if (s.schedule == "step") {
    lr *= std::pow(s.gamma, static_cast<double>(t / s.step_size));
  } else if (s.schedule == "cosine" && s.total_steps > s.warmup_steps) {
    const double horizon = static_cast<double>(s.total_steps - s.warmup_steps);
    const double x = std::min(1.0, static_cast<double>(t) / horizon);
    lr *= 0.5 * (1 + std::cos(M_PI * x));
  }
  return lr;
}

namespace {
std::string num(double v) { return canonical(Value{v}); }
}  // namespace

std::string describe_optimizer(const OptimizerSpec& s) {
  std::string d = s.name + " lr=" + num(s.lr);
  if (s.name == "momentum" || s.name == "nesterov" || (s.name == "rmsprop" && s.momentum > 0))
    d += " momentum=" + num(s.momentum);
  if (s.name == "adam" || s.name == "adamw") d += " betas=(" + num(s.beta1) + "," + num(s.beta2) + ")";
  if (s.name == "adam" || s.name == "adamw" || s.name == "adagrad" || s.name == "rmsprop") d += " eps=" + num(s.eps);
  if (s.name == "rmsprop") d += " alpha=" + num(s.alpha);
  if (s.weight_decay > 0)
    d += std::string(s.name == "adamw" ? " decoupled" : "") + " weight_decay=" + num(s.weight_decay);
  d += ", schedule " + s.schedule;
  if (s.schedule == "step") d += " (x" + num(s.gamma) + " every " + std::to_string(s.step_size) + " steps)";
  if (s.schedule == "cosine") d += " (to 0 at step " + std::to_string(s.total_steps) + ")";
  if (s.warmup_steps > 0) d += ", linear warm-up over " + std::to_string(s.warmup_steps) + " steps";
  return d;
}

UpdateRule rule_of(const std::string& name) {
  static const std::pair<const char*, UpdateRule> rules[] = {
      {"sgd", UpdateRule::Sgd},        {"momentum", UpdateRule::Momentum}, {"nesterov", UpdateRule::Nesterov},
      {"adam", UpdateRule::Adam},      {"adamw", UpdateRule::AdamW},       {"adagrad", UpdateRule::Adagrad},
      {"rmsprop", UpdateRule::RmsProp}};
  for (const auto& [n, r] : rules)
    if (name == n) return r;
  throw Error("unknown optimizer '" + name + "' (valid: " + join(optimizer_names(), ", ") + ")");
}

StepRule step_rule(const OptimizerSpec& s, double lr, std::int64_t t) {
  StepRule r;
  r.rule = rule_of(s.name);
  r.lr = static_cast<float>(lr), r.wd = static_cast<float>(s.weight_decay), r.mu = static_cast<float>(s.momentum);
  r.b1 = static_cast<float>(s.beta1), r.b2 = static_cast<float>(s.beta2), r.eps = static_cast<float>(s.eps);
  r.alpha = static_cast<float>(s.alpha);
  const auto td = static_cast<double>(t);
  r.step_size = r.lr / static_cast<float>(1 - std::pow(s.beta1, td));
  r.bc2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(s.beta2, td)));
  r.first = t == 1;
  return r;
}

namespace {

class ReferenceOptimizer final : public Optimizer {
 public:
  ReferenceOptimizer(const OptimizerSpec& s, ParamAccess& p) : s_(s), p_(p) {
    if (const std::string why = check_optimizer(s); !why.empty()) throw Error(why);
    const UpdateRule r = rule_of(s.name);
    const bool one = rule_has_a(r), two = rule_has_b(r, static_cast<float>(s.momentum));
    for (std::size_t k = 0; k < p.count(); ++k) {
      const auto n = static_cast<std::size_t>(p.numel(k));
      a_.emplace_back(one ? n : 0, 0.0f);
      b_.emplace_back(two ? n : 0, 0.0f);
    }
  }

  void step(double lr_d) override {
    ++t_;
    const StepRule r = step_rule(s_, lr_d, t_);
    for (std::size_t k = 0; k < p_.count(); ++k) {
      float* p = p_.data(k);
      const float* g = p_.grad(k);
      if (!g) continue;  // no gradient this step: PyTorch skips the parameter too
      const std::int64_t n = p_.numel(k);
      float* a = a_[k].empty() ? nullptr : a_[k].data();
      float* b = b_[k].empty() ? nullptr : b_[k].data();
      for (std::int64_t i = 0; i < n; ++i) apply_rule_at(r, p, g, a, b, i);
    }
    p_.changed();
  }

  std::string describe() const override { return "d500's reference optimizer: " + describe_optimizer(s_); }

  // Every a_ vector, then every b_ vector.
  std::vector<std::byte> save() const override {
    std::vector<const std::vector<float>*> buffers;
    for (const auto* v : {&a_, &b_})
      for (const auto& x : *v) buffers.push_back(&x);
    return pack_optimizer_state(t_, buffers);
  }
  void load(const std::vector<std::byte>& state) override {
    std::vector<std::vector<float>*> buffers;
    for (auto* v : {&a_, &b_})
      for (auto& x : *v) buffers.push_back(&x);
    t_ = unpack_optimizer_state(state, buffers, describe());
  }

 private:
  OptimizerSpec s_;
  ParamAccess& p_;
  std::vector<std::vector<float>> a_, b_;  // first and second state per parameter (as the rule needs)
  std::int64_t t_ = 0;
};

}  // namespace

const std::vector<std::string>& axpy_optimizer_names() {
  static const std::vector<std::string> v{"sgd", "momentum", "nesterov"};
  return v;
}

std::vector<std::byte> pack_optimizer_state(std::int64_t step, const std::vector<const std::vector<float>*>& buffers) {
  std::vector<std::byte> out(sizeof step);
  std::memcpy(out.data(), &step, sizeof step);
  for (const auto* x : buffers) {
    const auto* bytes = reinterpret_cast<const std::byte*>(x->data());
    out.insert(out.end(), bytes, bytes + x->size() * sizeof(float));
  }
  return out;
}

std::int64_t unpack_optimizer_state(const std::vector<std::byte>& state,
                                    const std::vector<std::vector<float>*>& buffers, const std::string& who) {
  std::int64_t step = 0;
  std::size_t need = sizeof step;
  for (const auto* x : buffers) need += x->size() * sizeof(float);
  if (state.size() != need)
    throw Error("optimizer state of " + std::to_string(state.size()) + " bytes does not fit " + who + " (" +
                std::to_string(need) + " bytes)");
  std::memcpy(&step, state.data(), sizeof step);
  std::size_t at = sizeof step;
  for (auto* x : buffers) {
    std::memcpy(x->data(), state.data() + at, x->size() * sizeof(float));
    at += x->size() * sizeof(float);
  }
  return step;
}

std::unique_ptr<Optimizer> make_reference_optimizer(const OptimizerSpec& s, ParamAccess& params) {
  return std::make_unique<ReferenceOptimizer>(s, params);
}

}  // namespace d500
