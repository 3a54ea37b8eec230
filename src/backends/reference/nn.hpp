#pragma once
// The `reference` backend's neural-network operators: plain loops, one formula each, written
// for T = float (what the reference backend times) and T = double (the yardstick every backend
// is validated against, and what the finite-difference gradient checks in nn_test.cpp use).
// Layouts: NCHW activations, KCRS weights (C = channels per group), as in op_shapes.hpp.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "backends/op_shapes.hpp"

namespace d500::reference {

using I = std::int64_t;

// Visits every (image, output channel, input channel, kernel tap, output position) of a grouped,
// strided, padded, dilated convolution whose input position (ih, iw) lies inside the image, and
// calls f(x index, w index, y index). The three passes differ only in what f accumulates.
// [k0, k1) limits the output channels visited (all by default): each output channel's y and w
// entries are then touched by one caller alone, in the same order as in the whole visit.
template <class F>
void conv_taps(const ConvShape& cs, F&& f, I k0 = 0, I k1 = -1) {
  const I P = cs.p(), Q = cs.q(), CG = cs.cg(), KG = cs.kg();
  if (k1 < 0) k1 = cs.k;
  for (I n = 0; n < cs.n; ++n)
    for (I k = k0; k < k1; ++k) {
      const I g = k / KG;
      for (I c = 0; c < CG; ++c) {
        const I xc = g * CG + c;  // input channel in the whole tensor
        for (I r = 0; r < cs.r; ++r)
          for (I s = 0; s < cs.s; ++s) {
            const I wi = ((k * CG + c) * cs.r + r) * cs.s + s;
            for (I p = 0; p < P; ++p) {
              const I ih = p * cs.stride - cs.pad + r * cs.dilation;
              if (ih < 0 || ih >= cs.h) continue;
              for (I q = 0; q < Q; ++q) {
                const I iw = q * cs.stride - cs.pad + s * cs.dilation;
                if (iw < 0 || iw >= cs.w) continue;
                f(((n * cs.c + xc) * cs.h + ih) * cs.w + iw, wi, ((n * cs.k + k) * P + p) * Q + q);
              }
            }
          }
      }
    }
}

// y = conv(x, w); [k0, k1): only those output channels (their y entries must be zero).
template <class T>
void conv2d_forward_channels(const ConvShape& cs, const T* x, const T* w, T* y, I k0, I k1) {
  conv_taps(
      cs, [&](I xi, I wi, I yi) { y[yi] += x[xi] * w[wi]; }, k0, k1);
}
template <class T>
void conv2d_forward(const ConvShape& cs, const T* x, const T* w, T* y) {
  std::fill(y, y + cs.y_size(), T(0));
  conv2d_forward_channels(cs, x, w, y, 0, cs.k);
}

// dx = d<dy, conv(x, w)>/dx
template <class T>
void conv2d_backward_data(const ConvShape& cs, const T* dy, const T* w, T* dx) {
  std::fill(dx, dx + cs.x_size(), T(0));
  conv_taps(cs, [&](I xi, I wi, I yi) { dx[xi] += dy[yi] * w[wi]; });
}

// dw = d<dy, conv(x, w)>/dw
// [k0, k1): only those output channels' filters (their dw entries must be zero).
template <class T>
void conv2d_backward_filter_channels(const ConvShape& cs, const T* x, const T* dy, T* dw, I k0, I k1) {
  conv_taps(
      cs, [&](I xi, I wi, I yi) { dw[wi] += x[xi] * dy[yi]; }, k0, k1);
}
template <class T>
void conv2d_backward_filter(const ConvShape& cs, const T* x, const T* dy, T* dw) {
  std::fill(dw, dw + cs.w_size(), T(0));
  conv2d_backward_filter_channels(cs, x, dy, dw, 0, cs.k);
}

// Max or average over each window; padding positions are skipped (never the maximum, never
// counted in the average: PyTorch's count_include_pad=False, oneDNN's avg_exclude_padding).
template <class T>
void pool2d_forward(const PoolShape& ps, const T* x, T* y) {
  const I P = ps.p(), Q = ps.q();
  for (I nc = 0; nc < ps.n * ps.c; ++nc) {
    const T* xp = x + nc * ps.h * ps.w;
    T* yp = y + nc * P * Q;
    for (I p = 0; p < P; ++p)
      for (I q = 0; q < Q; ++q) {
        T acc = ps.max ? -std::numeric_limits<T>::infinity() : T(0);
        I count = 0;
        for (I r = 0; r < ps.kernel; ++r)
          for (I s = 0; s < ps.kernel; ++s) {
            const I ih = p * ps.stride - ps.pad + r, iw = q * ps.stride - ps.pad + s;
            if (ih < 0 || ih >= ps.h || iw < 0 || iw >= ps.w) continue;  // padding never wins a max nor counts
            const T v = xp[ih * ps.w + iw];
            acc = ps.max ? std::max(acc, v) : acc + v;
            ++count;
          }
        yp[p * Q + q] = ps.max ? acc : acc / static_cast<T>(count);
      }
  }
}

// Max: the gradient goes to the first maximum of each window (row-major order), as in PyTorch and
// oneDNN. Average: spread evenly over the window's elements inside the image.
template <class T>
void pool2d_backward(const PoolShape& ps, const T* x, const T* dy, T* dx) {
  const I P = ps.p(), Q = ps.q();
  std::fill(dx, dx + ps.n * ps.c * ps.h * ps.w, T(0));
  for (I nc = 0; nc < ps.n * ps.c; ++nc) {
    const T* xp = x + nc * ps.h * ps.w;
    T* dxp = dx + nc * ps.h * ps.w;
    const T* dyp = dy + nc * P * Q;
    for (I p = 0; p < P; ++p)
      for (I q = 0; q < Q; ++q) {
        I best = -1, count = 0;
        for (I r = 0; r < ps.kernel; ++r)
          for (I s = 0; s < ps.kernel; ++s) {
            const I ih = p * ps.stride - ps.pad + r, iw = q * ps.stride - ps.pad + s;
            if (ih < 0 || ih >= ps.h || iw < 0 || iw >= ps.w) continue;
            const I at = ih * ps.w + iw;
            if (best < 0 || xp[at] > xp[best]) best = at;
            ++count;
          }
        if (ps.max) {
          dxp[best] += dyp[p * Q + q];
          continue;
        }
        const T share = dyp[p * Q + q] / static_cast<T>(count);
        for (I r = 0; r < ps.kernel; ++r)
          for (I s = 0; s < ps.kernel; ++s) {
            const I ih = p * ps.stride - ps.pad + r, iw = q * ps.stride - ps.pad + s;
            if (ih >= 0 && ih < ps.h && iw >= 0 && iw < ps.w) dxp[ih * ps.w + iw] += share;
          }
      }
  }
}

// Batch statistics per channel over (N, H, W): the mean and the biased variance, as used to
// normalise in training.
template <class T>
void batchnorm_statistics(const Nchw& d, const T* x, T* mean, T* var) {
  const T m = static_cast<T>(d.n * d.plane());
  for (I c = 0; c < d.c; ++c) {
    T sum = 0;
    for (I n = 0; n < d.n; ++n)
      for (I i = 0; i < d.plane(); ++i) sum += x[(n * d.c + c) * d.plane() + i];
    const T mu = sum / m;
    T sq = 0;
    for (I n = 0; n < d.n; ++n)
      for (I i = 0; i < d.plane(); ++i) {
        const T e = x[(n * d.c + c) * d.plane() + i] - mu;
        sq += e * e;
      }
    mean[c] = mu;
    var[c] = sq / m;
  }
}

// y = gamma * (x - mean) / sqrt(var + eps) + beta, per channel.
template <class T>
void batchnorm_normalize(const Nchw& d, double eps, const T* x, const T* gamma, const T* beta, const T* mean,
                         const T* var, T* y) {
  for (I n = 0; n < d.n; ++n)
    for (I c = 0; c < d.c; ++c) {
      const T inv = T(1) / std::sqrt(var[c] + static_cast<T>(eps));
      const I base = (n * d.c + c) * d.plane();
      for (I i = 0; i < d.plane(); ++i) y[base + i] = gamma[c] * (x[base + i] - mean[c]) * inv + beta[c];
    }
}

// Training mode: normalise with the batch's own statistics, which are outputs too.
template <class T>
void batchnorm_forward_training(const Nchw& d, double eps, const T* x, const T* gamma, const T* beta, T* y, T* mean,
                                T* var) {
  batchnorm_statistics(d, x, mean, var);
  batchnorm_normalize(d, eps, x, gamma, beta, mean, var, y);
}

// The gradient of training-mode batch normalisation, through the batch statistics:
// dx = gamma / sqrt(var + eps) / M * (M dy - sum(dy) - xhat * sum(dy xhat)), M = N H W.
template <class T>
void batchnorm_backward(const Nchw& d, double eps, const T* x, const T* dy, const T* gamma, const T* mean, const T* var,
                        T* dx, T* dgamma, T* dbeta) {
  const T m = static_cast<T>(d.n * d.plane());
  for (I c = 0; c < d.c; ++c) {
    const T inv = T(1) / std::sqrt(var[c] + static_cast<T>(eps));
    T sdy = 0, sdyx = 0;
    for (I n = 0; n < d.n; ++n)
      for (I i = 0; i < d.plane(); ++i) {
        const I at = (n * d.c + c) * d.plane() + i;
        sdy += dy[at];
        sdyx += dy[at] * (x[at] - mean[c]) * inv;
      }
    dbeta[c] = sdy;
    dgamma[c] = sdyx;
    for (I n = 0; n < d.n; ++n)
      for (I i = 0; i < d.plane(); ++i) {
        const I at = (n * d.c + c) * d.plane() + i;
        const T xhat = (x[at] - mean[c]) * inv;
        dx[at] = gamma[c] * inv / m * (m * dy[at] - sdy - xhat * sdyx);
      }
  }
}

template <class T>
void relu_forward(I count, const T* x, T* y) {
  for (I i = 0; i < count; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
}

// The subgradient at 0 is taken as 0, as in PyTorch and oneDNN.
template <class T>
void relu_backward(I count, const T* x, const T* dy, T* dx) {
  for (I i = 0; i < count; ++i) dx[i] = x[i] > T(0) ? dy[i] : T(0);
}

// Softmax over the last axis of a rows x cols matrix, shifted by the row maximum for range.
template <class T>
void softmax_forward(I rows, I cols, const T* x, T* y) {
  for (I i = 0; i < rows; ++i) {
    const T* xi = x + i * cols;
    T* yi = y + i * cols;
    const T mx = *std::max_element(xi, xi + cols);
    T sum = 0;
    for (I j = 0; j < cols; ++j) sum += (yi[j] = std::exp(xi[j] - mx));
    for (I j = 0; j < cols; ++j) yi[j] /= sum;
  }
}

// dx = y * (dy - sum(dy * y)), row by row; takes the forward's output y, as the frameworks do.
template <class T>
void softmax_backward(I rows, I cols, const T* y, const T* dy, T* dx) {
  for (I i = 0; i < rows; ++i) {
    T dot = 0;
    for (I j = 0; j < cols; ++j) dot += dy[i * cols + j] * y[i * cols + j];
    for (I j = 0; j < cols; ++j) dx[i * cols + j] = y[i * cols + j] * (dy[i * cols + j] - dot);
  }
}

}  // namespace d500::reference
