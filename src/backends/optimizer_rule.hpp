#pragma once
// One parameter element's update under each of d500's optimizer rules (optimizer.hpp: PyTorch's,
// term for term), written once for the host and the device: the reference optimizer applies it
// element by element, and the cuda backend's fused optimizer kernel (cuda/cuda_kernels.cu, built
// by nvcc with --fmad=false) applies the same function on the GPU. Neither side contracts a
// multiply and an add (d500 is built without -march=native), and sqrt and division are IEEE
// rounded on both, so a device step rounds as the reference's does. This header is read by nvcc:
// nothing here but plain arithmetic.
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define D500_HOST_DEVICE __host__ __device__
#else
#define D500_HOST_DEVICE
#endif

namespace d500 {

enum class UpdateRule : std::int32_t { Sgd, Momentum, Nesterov, Adam, AdamW, Adagrad, RmsProp };

// One step's coefficients, made on the host once per step (step_rule, optimizer.cpp: the bias
// corrections in double, as PyTorch's are). State per element: a (momentum, exp_avg, Adagrad's
// sum, RMSprop's square average) and b (exp_avg_sq, RMSprop's momentum buffer), as the rule needs.
struct StepRule {
  UpdateRule rule = UpdateRule::Sgd;
  float lr = 0, wd = 0, mu = 0;       // learning rate, weight decay, momentum
  float b1 = 0, b2 = 0, eps = 0;      // Adam's betas; the denominator's epsilon
  float alpha = 0;                    // RMSprop's smoothing
  float step_size = 0, bc2_sqrt = 0;  // Adam: lr / (1 - b1^t), sqrt(1 - b2^t)
  bool first = false;                 // the first step (momentum's buffer starts as the gradient)
};

// Whether the rule keeps state a / b (the reference and device optimizers allocate by these).
D500_HOST_DEVICE inline bool rule_has_a(UpdateRule r) { return r != UpdateRule::Sgd; }
D500_HOST_DEVICE inline bool rule_has_b(UpdateRule r, float mu) {
  return r == UpdateRule::Adam || r == UpdateRule::AdamW || (r == UpdateRule::RmsProp && mu > 0);
}

D500_HOST_DEVICE inline void apply_rule(const StepRule& r, float& p, float g, float& a, float& b) {
  switch (r.rule) {
    case UpdateRule::Sgd: p -= r.lr * (g + r.wd * p); return;
    case UpdateRule::Momentum:
    case UpdateRule::Nesterov: {
      const float d = g + r.wd * p;
      a = r.first ? d : r.mu * a + d;
      p -= r.lr * (r.rule == UpdateRule::Nesterov ? d + r.mu * a : a);
      return;
    }
    case UpdateRule::Adam:
    case UpdateRule::AdamW: {
      float d = g;
      if (r.rule == UpdateRule::AdamW)
        p *= 1 - r.lr * r.wd;
      else
        d += r.wd * p;
      a = a * r.b1 + (1 - r.b1) * d;  // torch: exp_avg.lerp_(grad, 1 - beta1)
      b = b * r.b2 + (1 - r.b2) * d * d;
      const float denom = sqrtf(b) / r.bc2_sqrt + r.eps;
      p -= r.step_size * (a / denom);
      return;
    }
    case UpdateRule::Adagrad: {
      const float d = g + r.wd * p;
      a += d * d;
      p -= r.lr * (d / (sqrtf(a) + r.eps));
      return;
    }
    case UpdateRule::RmsProp: {
      const float d = g + r.wd * p;
      a = r.alpha * a + (1 - r.alpha) * d * d;
      const float avg = sqrtf(a) + r.eps;
      if (r.mu > 0) {
        b = r.mu * b + d / avg;
        p -= r.lr * b;
      } else {
        p -= r.lr * (d / avg);
      }
      return;
    }
  }
}

// Element i of a parameter p with gradient g, its state arrays a and b nullptr where the rule keeps
// none: the loop body of every optimizer step (the reference's, the cuda kernel's, a test device's).
D500_HOST_DEVICE inline void apply_rule_at(const StepRule& r, float* p, const float* g, float* a, float* b,
                                           std::int64_t i) {
  float no_a = 0, no_b = 0;
  apply_rule(r, p[i], g[i], a ? a[i] : no_a, b ? b[i] : no_b);
}

}  // namespace d500
