#pragma once
// The geometry of a level-1 convolution or pooling node over one or two spatial axes (1-D as 2-D
// with height 1), read from the node's normalised attributes (see ops_conv.cpp's shape
// inference): what every backend's convolution and pooling kernels agree on. Also the
// reference's im2col lowering, which the blas backend shares.
#include <cstdint>

#include "backends/graph.hpp"

namespace d500 {

struct ConvGeom {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input: batch, channels, height, width
  std::int64_t k = 0;                       // output channels (pooling: c)
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  std::int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads: top, left, bottom, right
  std::int64_t p = 0, q = 0;                    // output height, width
  std::int64_t groups = 1;
  std::int64_t cg() const { return c / groups; }
  std::int64_t kg() const { return k / groups; }
  // Multiply-adds count twice.
  std::int64_t flops() const { return 2 * n * k * p * q * cg() * kh * kw; }
};

// The geometry of `node` on input shape `x` with `out_channels` outputs (pooling: x[1]).
ConvGeom conv_geom(const Node& node, const Shape& x, std::int64_t out_channels);
// ConvTranspose's geometry, node X [N, C, H, W] to Y [N, K, Ho, Wo]: the convolution whose
// backward-data pass it is, from Y (input, c = K) to X (output, k = C), weights [C, K/g, kh, kw].
ConvGeom transpose_geom(const Node& node, const Shape& x, const Shape& y);
// The number of windows along an axis: floor, or ceil in ceil_mode, as ONNX defines it.
std::int64_t pooled_size(std::int64_t in, std::int64_t pb, std::int64_t pe, std::int64_t k, std::int64_t d,
                         std::int64_t s, bool ceil_mode);

namespace ref {
// im2col: image n, group grp of x as col [C/g*kh*kw, P*Q]; col2im adds it back (its adjoint).
template <class T>
void im2col(const ConvGeom& g, const T* x, std::int64_t n, std::int64_t grp, T* col);
template <class T>
void col2im(const ConvGeom& g, const T* col, std::int64_t n, std::int64_t grp, T* dx);
// The reference convolution passes (col: a scratch of C/g*kh*kw*P*Q elements).
template <class T>
void conv_forward(const ConvGeom& g, const T* x, const T* w, const T* b, T* y, T* col);
template <class T>
void conv_backward_data(const ConvGeom& g, const T* dy, const T* w, T* dx, T* col);
template <class T>
void conv_backward_filter(const ConvGeom& g, const T* x, const T* dy, T* dw, T* db, T* col);
}  // namespace ref

}  // namespace d500
