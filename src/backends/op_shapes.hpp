#pragma once
// The shapes of the level-0 operators, shared by the reference and every backend so that all of
// them agree on one meaning of every parameter. Layouts are the frameworks' common denominator:
// activations NCHW, convolution weights KCRS with C = channels per group (PyTorch's layout).
#include <cstdint>

namespace d500 {

struct ConvShape {
  std::int64_t n, c, h, w;                                     // input: batch, channels, height, width
  std::int64_t k, r, s;                                        // output channels, kernel height, kernel width
  std::int64_t stride = 1, pad = 0, dilation = 1, groups = 1;  // the same along both axes
  std::int64_t p() const { return (h + 2 * pad - dilation * (r - 1) - 1) / stride + 1; }  // output height
  std::int64_t q() const { return (w + 2 * pad - dilation * (s - 1) - 1) / stride + 1; }  // output width
  std::int64_t cg() const { return c / groups; }                                          // input channels per group
  std::int64_t kg() const { return k / groups; }                                          // output channels per group
  std::int64_t x_size() const { return n * c * h * w; }
  std::int64_t w_size() const { return k * cg() * r * s; }
  std::int64_t y_size() const { return n * k * p() * q(); }
  // Multiply-adds count twice; the same for the forward and both backward passes.
  std::int64_t flops() const { return 2 * n * k * p() * q() * cg() * r * s; }
};

struct PoolShape {
  std::int64_t n, c, h, w;
  std::int64_t kernel, stride, pad;  // square window
  bool max = true;                   // false: average over the window's elements inside the image
  std::int64_t p() const { return (h + 2 * pad - kernel) / stride + 1; }
  std::int64_t q() const { return (w + 2 * pad - kernel) / stride + 1; }
};

struct Nchw {
  std::int64_t n, c, h, w;
  std::int64_t size() const { return n * c * h * w; }
  std::int64_t plane() const { return h * w; }
};

}  // namespace d500
