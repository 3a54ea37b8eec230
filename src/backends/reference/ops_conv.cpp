// Convolutions and pooling over one or two spatial axes (1-D as 2-D with height 1; three:
// ops_conv3d.cpp): Conv,
// ConvTranspose, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool. Shape inference makes
// the geometry explicit (auto_pad becomes `pads`; defaults become attributes), so kernels and
// backends read one form. Convolutions lower each image and group to a GEMM through im2col.
#include "backends/conv_geom.hpp"
#include "backends/reference/ops_common.hpp"

namespace d500 {

ConvGeom conv_geom(const Node& node, const Shape& x, std::int64_t out_channels) {
  ConvGeom g;
  const bool one_d = x.size() == 3;
  g.n = x[0];
  g.c = x[1];
  g.h = one_d ? 1 : x[2];
  g.w = x.back();
  g.k = out_channels;
  g.groups = node.attr_i("group", 1);
  const auto ks = node.attr_ints("kernel_shape"), st = node.attr_ints("strides"), dl = node.attr_ints("dilations"),
             pd = node.attr_ints("pads");
  if (one_d) {
    g.kh = 1, g.kw = ks[0], g.sh = 1, g.sw = st[0], g.dh = 1, g.dw = dl[0];
    g.pt = 0, g.pl = pd[0], g.pb = 0, g.pr = pd[1];
  } else {
    g.kh = ks[0], g.kw = ks[1], g.sh = st[0], g.sw = st[1], g.dh = dl[0], g.dw = dl[1];
    g.pt = pd[0], g.pl = pd[1], g.pb = pd[2], g.pr = pd[3];
  }
  const bool ceil_mode = node.attr_i("ceil_mode", 0) != 0;
  g.p = pooled_size(g.h, g.pt, g.pb, g.kh, g.dh, g.sh, ceil_mode);
  g.q = pooled_size(g.w, g.pl, g.pr, g.kw, g.dw, g.sw, ceil_mode);
  return g;
}

ConvGeom transpose_geom(const Node& node, const Shape& x, const Shape& y) {
  ConvGeom g = conv_geom(node, y, x[1]);
  // conv_geom computed p, q from y; they must equal X's spatial size.
  g.p = x.size() == 4 ? x[2] : 1;
  g.q = x.back();
  return g;
}

std::int64_t pooled_size(std::int64_t in, std::int64_t pb, std::int64_t pe, std::int64_t k, std::int64_t d,
                         std::int64_t s, bool ceil_mode) {
  const std::int64_t span = in + pb + pe - ((k - 1) * d + 1);
  if (span < 0) return 0;
  // As ONNX's shape inference (1.12) computes it; PyTorch also drops a last window that would
  // start in the trailing padding, which ONNX does not.
  return (ceil_mode ? (span + s - 1) / s : span / s) + 1;
}

namespace ref {

// Copies image `n`, group `grp` of x into col [Cg*kh*kw, P*Q] (zero where a tap is in the padding).
template <class T>
void im2col(const ConvGeom& g, const T* x, I n, I grp, T* col) {
  const I P = g.p, Q = g.q, CG = g.cg();
  for (I c = 0; c < CG; ++c) {
    const T* xc = x + ((n * g.c) + grp * CG + c) * g.h * g.w;
    for (I r = 0; r < g.kh; ++r)
      for (I s = 0; s < g.kw; ++s) {
        T* row = col + ((c * g.kh + r) * g.kw + s) * P * Q;
        for (I p = 0; p < P; ++p) {
          const I ih = p * g.sh - g.pt + r * g.dh;
          T* dst = row + p * Q;
          if (ih < 0 || ih >= g.h) {
            std::fill(dst, dst + Q, T(0));
            continue;
          }
          const T* src = xc + ih * g.w;
          for (I q = 0; q < Q; ++q) {
            const I iw = q * g.sw - g.pl + s * g.dw;
            dst[q] = iw >= 0 && iw < g.w ? src[iw] : T(0);
          }
        }
      }
  }
}

// Adds col [Cg*kh*kw, P*Q] into image `n`, group `grp` of dx: the adjoint of im2col.
template <class T>
void col2im(const ConvGeom& g, const T* col, I n, I grp, T* dx) {
  const I P = g.p, Q = g.q, CG = g.cg();
  for (I c = 0; c < CG; ++c) {
    T* xc = dx + ((n * g.c) + grp * CG + c) * g.h * g.w;
    for (I r = 0; r < g.kh; ++r)
      for (I s = 0; s < g.kw; ++s) {
        const T* row = col + ((c * g.kh + r) * g.kw + s) * P * Q;
        for (I p = 0; p < P; ++p) {
          const I ih = p * g.sh - g.pt + r * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          T* dst = xc + ih * g.w;
          for (I q = 0; q < Q; ++q) {
            const I iw = q * g.sw - g.pl + s * g.dw;
            if (iw >= 0 && iw < g.w) dst[iw] += row[p * Q + q];
          }
        }
      }
  }
}

namespace {
// A 1x1, stride-1, unpadded convolution's im2col is the image itself.
bool direct(const ConvGeom& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.pb == 0 && g.pr == 0;
}

}  // namespace

template <class T>
void conv_forward(const ConvGeom& g, const T* x, const T* w, const T* b, T* y, T* col) {
  const I PQ = g.p * g.q, CG = g.cg(), KG = g.kg(), R = CG * g.kh * g.kw;
  for (I n = 0; n < g.n; ++n)
    for (I grp = 0; grp < g.groups; ++grp) {
      const T* src = col;
      if (direct(g))
        src = x + (n * g.c + grp * CG) * g.h * g.w;
      else
        im2col(g, x, n, grp, col);
      T* yg = y + (n * g.k + grp * KG) * PQ;
      gemm<T>(false, false, KG, PQ, R, T(1), w + grp * KG * R, R, src, PQ, T(0), yg, PQ);
      if (b)
        for (I k = 0; k < KG; ++k)
          for (I i = 0; i < PQ; ++i) yg[k * PQ + i] += b[grp * KG + k];
    }
}

template <class T>
void conv_backward_data(const ConvGeom& g, const T* dy, const T* w, T* dx, T* col) {
  const I PQ = g.p * g.q, CG = g.cg(), KG = g.kg(), R = CG * g.kh * g.kw;
  std::fill(dx, dx + g.n * g.c * g.h * g.w, T(0));
  for (I n = 0; n < g.n; ++n)
    for (I grp = 0; grp < g.groups; ++grp) {
      const T* dyg = dy + (n * g.k + grp * KG) * PQ;
      if (direct(g)) {
        gemm<T>(true, false, R, PQ, KG, T(1), w + grp * KG * R, R, dyg, PQ, T(0), dx + (n * g.c + grp * CG) * g.h * g.w,
                PQ);
        continue;
      }
      gemm<T>(true, false, R, PQ, KG, T(1), w + grp * KG * R, R, dyg, PQ, T(0), col, PQ);
      col2im(g, col, n, grp, dx);
    }
}

template <class T>
void conv_backward_filter(const ConvGeom& g, const T* x, const T* dy, T* dw, T* db, T* col) {
  const I PQ = g.p * g.q, CG = g.cg(), KG = g.kg(), R = CG * g.kh * g.kw;
  if (dw) std::fill(dw, dw + g.k * R, T(0));
  if (db) std::fill(db, db + g.k, T(0));
  for (I n = 0; n < g.n; ++n)
    for (I grp = 0; grp < g.groups; ++grp) {
      const T* dyg = dy + (n * g.k + grp * KG) * PQ;
      if (dw) {
        const T* src = col;
        if (direct(g))
          src = x + (n * g.c + grp * CG) * g.h * g.w;
        else
          im2col(g, x, n, grp, col);
        gemm<T>(false, true, KG, R, PQ, T(1), dyg, PQ, src, PQ, T(1), dw + grp * KG * R, R);
      }
      if (db)
        for (I k = 0; k < KG; ++k) {
          double s = 0;  // a bias's gradient sums over the batch and the image: long, in double
          for (I i = 0; i < PQ; ++i) s += dyg[k * PQ + i];
          db[grp * KG + k] += static_cast<T>(s);
        }
    }
}

template void im2col<float>(const ConvGeom&, const float*, I, I, float*);
template void im2col<double>(const ConvGeom&, const double*, I, I, double*);
template void col2im<float>(const ConvGeom&, const float*, I, I, float*);
template void col2im<double>(const ConvGeom&, const double*, I, I, double*);
template void conv_forward<float>(const ConvGeom&, const float*, const float*, const float*, float*, float*);
template void conv_forward<double>(const ConvGeom&, const double*, const double*, const double*, double*, double*);
template void conv_backward_data<float>(const ConvGeom&, const float*, const float*, float*, float*);
template void conv_backward_data<double>(const ConvGeom&, const double*, const double*, double*, double*);
template void conv_backward_filter<float>(const ConvGeom&, const float*, const float*, float*, float*, float*);
template void conv_backward_filter<double>(const ConvGeom&, const double*, const double*, double*, double*, double*);

namespace {

// ---- Shape inference shared by convolutions and pooling --------------------------------------
// Fills kernel_shape, strides, dilations and explicit pads (begin..., end...) for `spatial` axes,
// resolving auto_pad; `kernel` is the kernel's spatial size (from W for convolutions).
void normalise_window(InferCtx& c, const Shape& in_spatial, Shape kernel) {
  Node& n = c.node;
  const std::size_t sp = in_spatial.size();
  if (sp < 1 || sp > 3) c.fail(std::to_string(sp) + "-D windows are not supported (1-D to 3-D are)");
  if (n.has("kernel_shape")) kernel = n.attr_ints("kernel_shape");
  if (kernel.size() != sp)
    c.fail("kernel_shape has " + std::to_string(kernel.size()) + " axes, the input " + std::to_string(sp));
  auto strides = n.attr_ints("strides", Shape(sp, 1)), dil = n.attr_ints("dilations", Shape(sp, 1));
  auto pads = n.attr_ints("pads", Shape(2 * sp, 0));
  if (strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp)
    c.fail("strides, dilations or pads have the wrong length");
  for (std::size_t i = 0; i < sp; ++i)
    if (strides[i] < 1 || dil[i] < 1 || kernel[i] < 1 || pads[i] < 0 || pads[sp + i] < 0)
      c.fail("strides, dilations and kernel sizes must be positive, pads non-negative");
  const std::string auto_pad = n.attr_s("auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    pads.assign(2 * sp, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (std::size_t i = 0; i < sp; ++i) {
      const I out = (in_spatial[i] + strides[i] - 1) / strides[i];
      const I total = std::max<I>(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in_spatial[i]);
      const I small = total / 2;
      pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      pads[sp + i] = total - pads[i];
    }
  } else if (auto_pad != "NOTSET") {
    c.fail("auto_pad \"" + auto_pad + "\" is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  n.attrs["kernel_shape"] = ints_attr(kernel);
  n.attrs["strides"] = ints_attr(strides);
  n.attrs["dilations"] = ints_attr(dil);
  n.attrs["pads"] = ints_attr(pads);
  n.attrs.erase("auto_pad");
}

Shape spatial(const Shape& s) { return Shape(s.begin() + 2, s.end()); }

// Sets the output of a windowed operator (convolution, pooling) on x: [N, channels, spatial...].
void set_window_output(InferCtx& c, const Shape& x, I channels) {
  if (x.size() == 5) {
    const Shape y = window3d_output(c.node, x, channels);
    if (y[2] < 1 || y[3] < 1 || y[4] < 1)
      c.fail("the output would be empty (the kernel does not fit the padded input)");
    c.set(0, DType::F32, y);
    return;
  }
  const ConvGeom g = conv_geom(c.node, x, channels);
  if (g.p < 1 || g.q < 1) c.fail("the output would be empty (the kernel does not fit the padded input)");
  Shape y{x[0], channels};
  if (x.size() == 4) y.push_back(g.p);
  y.push_back(g.q);
  c.set(0, DType::F32, y);
}

void infer_conv(InferCtx& c) {
  c.require_float(0, c.n_in());
  const Shape& x = c.shape(0);
  const Shape& w = c.shape(1);
  if (x.size() < 3 || w.size() != x.size())
    c.fail("X " + shape_str(x) + " and W " + shape_str(w) + " must be N C spatial... of equal rank");
  const I groups = c.node.attr_i("group", 1);
  if (groups < 1 || x[1] % groups || w[0] % groups)
    c.fail("group " + std::to_string(groups) + " does not divide the channels");
  if (w[1] * groups != x[1])
    c.fail("W has " + std::to_string(w[1]) + " input channels per group, X " + std::to_string(x[1] / groups));
  if (c.has_in(2) && c.shape(2) != Shape{w[0]}) c.fail("B must have shape [" + std::to_string(w[0]) + "]");
  normalise_window(c, spatial(x), spatial(w));
  set_window_output(c, x, w[0]);
}

ConvGeom node_conv_geom(const NodeProblem& p) { return conv_geom(*p.node, shape_in(p, 0), shape_in(p, 1)[0]); }

template <class T>
void conv_fwd(const NodeProblem& p, T* scratch) {
  if (is_3d(p)) return conv3d_fwd<T>(p);
  const T* b = p.in.size() > 2 && p.in[2].present() ? cin<T>(p, 2) : nullptr;
  conv_forward(node_conv_geom(p), cin<T>(p, 0), cin<T>(p, 1), b, out<T>(p, 0), scratch);
}
template <class T>
void conv_bwd(const NodeProblem& p, T* scratch) {
  if (is_3d(p)) return conv3d_bwd<T>(p);
  const ConvGeom g = node_conv_geom(p);
  if (zero_without_upstream<T>(p)) return;
  const T* dy = dout<T>(p, 0);
  T* dx = din<T>(p, 0);
  T* dw = din<T>(p, 1);
  T* db = din<T>(p, 2);
  if (dx) conv_backward_data(g, dy, cin<T>(p, 1), dx, scratch);
  if (dw || db) conv_backward_filter(g, cin<T>(p, 0), dy, dw, db, scratch);
}
std::int64_t conv_scratch(const NodeProblem& p) {
  if (is_3d(p)) return 0;
  const ConvGeom g = node_conv_geom(p);
  return g.cg() * g.kh * g.kw * g.p * g.q;
}
double conv_flops(const NodeProblem& p, bool backward) {
  if (is_3d(p)) return window3d_flops(p, true, backward);
  const ConvGeom g = node_conv_geom(p);
  return (backward ? 2.0 : 1.0) * static_cast<double>(g.flops());
}

// ---- ConvTranspose: the adjoint of a convolution from Y-space to X-space ---------------------
// X [N, C, H, W], W [C, K/g, kh, kw], Y [N, K, Ho, Wo]. The convolution whose backward-data pass
// this is maps [N, K, Ho, Wo] to [N, C, H, W] with weights [C, K/g, kh, kw] (transpose_geom).

void infer_conv_transpose(InferCtx& c) {
  c.require_float(0, c.n_in());
  const Shape& x = c.shape(0);
  const Shape& w = c.shape(1);
  if (x.size() < 3 || w.size() != x.size())
    c.fail("X " + shape_str(x) + " and W " + shape_str(w) + " must be N C spatial... of equal rank");
  const I groups = c.node.attr_i("group", 1);
  if (groups < 1 || w[0] != x[1] || x[1] % groups) c.fail("W's first axis must be X's channels, divisible by group");
  const I k = w[1] * groups;
  if (c.has_in(2) && c.shape(2) != Shape{k}) c.fail("B must have shape [" + std::to_string(k) + "]");
  const Shape sx = spatial(x);
  const std::size_t sp = sx.size();
  if (sp < 1 || sp > 2) c.fail(std::to_string(sp) + "-D convolutions are not supported (1-D and 2-D are)");
  Node& n = c.node;
  Shape kernel = n.has("kernel_shape") ? n.attr_ints("kernel_shape") : spatial(w);
  const auto strides = n.attr_ints("strides", Shape(sp, 1)), dil = n.attr_ints("dilations", Shape(sp, 1));
  auto out_pad = n.attr_ints("output_padding", Shape(sp, 0));
  auto pads = n.attr_ints("pads", Shape(2 * sp, 0));
  if (kernel.size() != sp || strides.size() != sp || dil.size() != sp || out_pad.size() != sp || pads.size() != 2 * sp)
    c.fail("kernel_shape, strides, dilations, output_padding or pads have the wrong length");
  const std::string auto_pad = n.attr_s("auto_pad", "NOTSET");
  Shape out(sp);
  if (n.has("output_shape")) {
    Shape os = n.attr_ints("output_shape");
    if (os.size() == sp + 2) os.erase(os.begin(), os.begin() + 2);
    if (os.size() != sp) c.fail("output_shape has the wrong length");
    for (std::size_t i = 0; i < sp; ++i) {
      I total = strides[i] * (sx[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - os[i];
      if (total < 0) {  // a larger output than the windows cover: the extra rows are output padding
        out_pad[i] -= total;
        total = 0;
      }
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[sp + i] = total - pads[i];
      out[i] = os[i];
    }
  } else {
    for (std::size_t i = 0; i < sp; ++i) {
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        const I target = sx[i] * strides[i];
        const I total = std::max<I>(0, strides[i] * (sx[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - target);
        pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pads[sp + i] = total - pads[i];
      } else if (auto_pad == "VALID") {
        pads[i] = pads[sp + i] = 0;
      }
      out[i] = strides[i] * (sx[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - pads[i] - pads[sp + i];
    }
  }
  for (std::size_t i = 0; i < sp; ++i)
    if (out_pad[i] >= strides[i] && out_pad[i] >= dil[i])
      c.fail("output_padding must be smaller than the stride or the dilation");
  n.attrs["kernel_shape"] = ints_attr(kernel);
  n.attrs["strides"] = ints_attr(strides);
  n.attrs["dilations"] = ints_attr(dil);
  n.attrs["pads"] = ints_attr(pads);
  n.attrs.erase("auto_pad");
  n.attrs.erase("output_shape");
  Shape y{x[0], k};
  y.insert(y.end(), out.begin(), out.end());
  for (auto d : out)
    if (d < 1) c.fail("the output would be empty");
  // The forward convolution from Y back to X must reproduce X's size (output_padding < stride).
  const ConvGeom g = conv_geom(n, y, x[1]);
  if (g.q != sx.back() || (sp == 2 && g.p != sx[0])) c.fail("its geometry is inconsistent (output_padding too large?)");
  c.set(0, DType::F32, y);
}

ConvGeom node_transpose_geom(const NodeProblem& p) { return transpose_geom(*p.node, shape_in(p, 0), shape_out(p, 0)); }

template <class T>
void conv_transpose_fwd(const NodeProblem& p, T* scratch) {
  const ConvGeom g = node_transpose_geom(p);
  T* y = out<T>(p, 0);
  conv_backward_data(g, cin<T>(p, 0), cin<T>(p, 1), y, scratch);
  if (p.in.size() > 2 && p.in[2].present()) {
    const T* b = cin<T>(p, 2);
    const I plane = g.h * g.w;
    for (I n = 0; n < g.n; ++n)
      for (I k = 0; k < g.c; ++k)
        for (I i = 0; i < plane; ++i) y[(n * g.c + k) * plane + i] += b[k];
  }
}
template <class T>
void conv_transpose_bwd(const NodeProblem& p, T* scratch) {
  const ConvGeom g = node_transpose_geom(p);
  if (zero_without_upstream<T>(p)) return;
  const T* dy = dout<T>(p, 0);
  // In the forward convolution's terms: input dY, output X, weights W.
  if (T* dx = din<T>(p, 0)) conv_forward<T>(g, dy, cin<T>(p, 1), nullptr, dx, scratch);
  if (T* dw = din<T>(p, 1)) conv_backward_filter<T>(g, dy, cin<T>(p, 0), dw, nullptr, scratch);
  if (T* db = din<T>(p, 2)) {
    const I plane = g.h * g.w;
    for (I k = 0; k < g.c; ++k) {
      T s = 0;
      for (I n = 0; n < g.n; ++n)
        for (I i = 0; i < plane; ++i) s += dy[(n * g.c + k) * plane + i];
      db[k] = s;
    }
  }
}
std::int64_t conv_transpose_scratch(const NodeProblem& p) {
  const ConvGeom g = node_transpose_geom(p);
  return g.cg() * g.kh * g.kw * g.p * g.q;
}
double conv_transpose_flops(const NodeProblem& p, bool backward) {
  return (backward ? 2.0 : 1.0) * static_cast<double>(node_transpose_geom(p).flops());
}

// ---- Pooling --------------------------------------------------------------------------------------
void infer_pool(InferCtx& c) {
  c.require_float();
  const Shape& x = c.shape(0);
  if (x.size() < 3) c.fail("X " + shape_str(x) + " must be N C spatial...");
  if (!c.node.has("kernel_shape")) c.fail("kernel_shape is required");
  if (c.node.op == "MaxPool" && c.out.size() > 1 && c.out[1]) c.fail("the Indices output is not supported");
  normalise_window(c, spatial(x), {});
  set_window_output(c, x, x[1]);
}

ConvGeom node_pool_geom(const NodeProblem& p) { return conv_geom(*p.node, shape_in(p, 0), shape_in(p, 0)[1]); }

// Calls f(index in the plane of x) for every tap of window (p, q) inside the image.
template <class F>
void window_taps(const ConvGeom& g, I p, I q, F&& f) {
  for (I r = 0; r < g.kh; ++r) {
    const I ih = p * g.sh - g.pt + r * g.dh;
    if (ih < 0 || ih >= g.h) continue;
    for (I s = 0; s < g.kw; ++s) {
      const I iw = q * g.sw - g.pl + s * g.dw;
      if (iw >= 0 && iw < g.w) f(ih * g.w + iw);
    }
  }
}

// The divisor of an average window: its taps inside the image, or (count_include_pad) inside
// the padded image, as PyTorch counts them.
I avg_count(const ConvGeom& g, I p, I q, bool include_pad) {
  if (!include_pad) {
    I n = 0;
    window_taps(g, p, q, [&](I) { ++n; });
    return n;
  }
  const I h0 = p * g.sh - g.pt, w0 = q * g.sw - g.pl;
  const I h1 = std::min(h0 + g.kh, g.h + g.pb), w1 = std::min(w0 + g.kw, g.w + g.pr);
  return (h1 - h0) * (w1 - w0);
}

template <class T>
void maxpool_fwd(const NodeProblem& p, T*) {
  if (is_3d(p)) return pool3d_fwd<T>(p, true);
  const ConvGeom g = node_pool_geom(p);
  const T* x = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  for (I nc = 0; nc < g.n * g.c; ++nc) {
    const T* xp = x + nc * g.h * g.w;
    for (I i = 0; i < g.p; ++i)
      for (I j = 0; j < g.q; ++j) {
        T m = -std::numeric_limits<T>::infinity();
        window_taps(g, i, j, [&](I at) { m = std::max(m, xp[at]); });
        y[(nc * g.p + i) * g.q + j] = m;
      }
  }
}
template <class T>
void maxpool_bwd(const NodeProblem& p, T*) {
  if (is_3d(p)) return pool3d_bwd<T>(p, true);
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const ConvGeom g = node_pool_geom(p);
  const T* x = cin<T>(p, 0);
  const T* dy = dout<T>(p, 0);
  std::fill(dx, dx + p.in[0].numel(), T(0));
  if (!dy) return;
  for (I nc = 0; nc < g.n * g.c; ++nc) {
    const T* xp = x + nc * g.h * g.w;
    for (I i = 0; i < g.p; ++i)
      for (I j = 0; j < g.q; ++j) {
        I best = -1;  // the first maximum of the window in row-major order, as PyTorch and oneDNN
        window_taps(g, i, j, [&](I at) {
          if (best < 0 || xp[at] > xp[best]) best = at;
        });
        if (best >= 0) dx[nc * g.h * g.w + best] += dy[(nc * g.p + i) * g.q + j];
      }
  }
}
template <class T>
void avgpool_fwd(const NodeProblem& p, T*) {
  if (is_3d(p)) return pool3d_fwd<T>(p, false);
  const ConvGeom g = node_pool_geom(p);
  const bool inc = p.node->attr_i("count_include_pad", 0) != 0;
  const T* x = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  for (I nc = 0; nc < g.n * g.c; ++nc) {
    const T* xp = x + nc * g.h * g.w;
    for (I i = 0; i < g.p; ++i)
      for (I j = 0; j < g.q; ++j) {
        T s = 0;
        window_taps(g, i, j, [&](I at) { s += xp[at]; });
        const I count = avg_count(g, i, j, inc);
        y[(nc * g.p + i) * g.q + j] = count > 0 ? s / static_cast<T>(count) : T(0);
      }
  }
}
template <class T>
void avgpool_bwd(const NodeProblem& p, T*) {
  if (is_3d(p)) return pool3d_bwd<T>(p, false);
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const ConvGeom g = node_pool_geom(p);
  const bool inc = p.node->attr_i("count_include_pad", 0) != 0;
  const T* dy = dout<T>(p, 0);
  std::fill(dx, dx + p.in[0].numel(), T(0));
  if (!dy) return;
  for (I nc = 0; nc < g.n * g.c; ++nc)
    for (I i = 0; i < g.p; ++i)
      for (I j = 0; j < g.q; ++j) {
        const I count = avg_count(g, i, j, inc);
        if (count == 0) continue;
        const T share = dy[(nc * g.p + i) * g.q + j] / static_cast<T>(count);
        window_taps(g, i, j, [&](I at) { dx[nc * g.h * g.w + at] += share; });
      }
}
double pool_flops(const NodeProblem& p, bool backward) {
  if (is_3d(p)) return window3d_flops(p, false, backward);
  const ConvGeom g = node_pool_geom(p);
  return static_cast<double>(g.n * g.c * g.p * g.q * g.kh * g.kw);
}

// ---- Global pooling over every spatial axis ------------------------------------------------------
void infer_global_pool(InferCtx& c) {
  c.require_float();
  const Shape& x = c.shape(0);
  if (x.size() < 3) c.fail("X " + shape_str(x) + " must be N C spatial...");
  Shape y(x.size(), 1);
  y[0] = x[0];
  y[1] = x[1];
  c.set(0, DType::F32, y);
}
I plane_of(const NodeProblem& p) { return p.in[0].numel() / (shape_in(p, 0)[0] * shape_in(p, 0)[1]); }

template <class T>
void gap_fwd(const NodeProblem& p, T*) {
  const T* x = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  const I plane = plane_of(p), nc = p.out[0].numel();
  for (I i = 0; i < nc; ++i) {
    T s = 0;
    for (I j = 0; j < plane; ++j) s += x[i * plane + j];
    y[i] = s / static_cast<T>(plane);
  }
}
template <class T>
void gap_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const T* dy = dout<T>(p, 0);
  const I plane = plane_of(p), nc = p.out[0].numel();
  for (I i = 0; i < nc; ++i)
    for (I j = 0; j < plane; ++j) dx[i * plane + j] = dy ? dy[i] / static_cast<T>(plane) : T(0);
}
template <class T>
void gmp_fwd(const NodeProblem& p, T*) {
  const T* x = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  const I plane = plane_of(p), nc = p.out[0].numel();
  for (I i = 0; i < nc; ++i) y[i] = *std::max_element(x + i * plane, x + (i + 1) * plane);
}
template <class T>
void gmp_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const T* x = cin<T>(p, 0);
  const T* dy = dout<T>(p, 0);
  const I plane = plane_of(p), nc = p.out[0].numel();
  std::fill(dx, dx + p.in[0].numel(), T(0));
  for (I i = 0; i < nc && dy; ++i) dx[(std::max_element(x + i * plane, x + (i + 1) * plane) - x)] = dy[i];
}
double global_pool_flops(const NodeProblem& p, bool) { return static_cast<double>(p.in[0].numel()); }

}  // namespace

void add_conv_ops(std::vector<OpSchema>& t) {
  t.push_back(OpSchema{.op = "Conv",
                       .since = 1,
                       .infer = infer_conv,
                       D500_FWD(conv_fwd),
                       .bwd_f = conv_bwd<float>,
                       .bwd_d = conv_bwd<double>,
                       .scratch = conv_scratch,
                       .flops = conv_flops,
                       .diff_in = 7,
                       .saved_in = 3});
  t.push_back(OpSchema{.op = "ConvTranspose",
                       .since = 1,
                       .infer = infer_conv_transpose,
                       D500_FWD(conv_transpose_fwd),
                       .bwd_f = conv_transpose_bwd<float>,
                       .bwd_d = conv_transpose_bwd<double>,
                       .scratch = conv_transpose_scratch,
                       .flops = conv_transpose_flops,
                       .diff_in = 7,
                       .saved_in = 3});
  t.push_back(OpSchema{.op = "MaxPool",
                       .since = 8,
                       .infer = infer_pool,
                       D500_FWD(maxpool_fwd),
                       .bwd_f = maxpool_bwd<float>,
                       .bwd_d = maxpool_bwd<double>,
                       .flops = pool_flops,
                       .diff_in = 1,
                       .saved_in = 1});
  t.push_back(OpSchema{.op = "AveragePool",
                       .since = 7,
                       .infer = infer_pool,
                       D500_FWD(avgpool_fwd),
                       .bwd_f = avgpool_bwd<float>,
                       .bwd_d = avgpool_bwd<double>,
                       .flops = pool_flops,
                       .diff_in = 1});
  t.push_back(OpSchema{.op = "GlobalAveragePool",
                       .since = 1,
                       .infer = infer_global_pool,
                       D500_FWD(gap_fwd),
                       .bwd_f = gap_bwd<float>,
                       .bwd_d = gap_bwd<double>,
                       .flops = global_pool_flops,
                       .diff_in = 1});
  t.push_back(OpSchema{.op = "GlobalMaxPool",
                       .since = 1,
                       .infer = infer_global_pool,
                       D500_FWD(gmp_fwd),
                       .bwd_f = gmp_bwd<float>,
                       .bwd_d = gmp_bwd<double>,
                       .flops = global_pool_flops,
                       .diff_in = 1,
                       .saved_in = 1});
}

}  // namespace ref
}  // namespace d500
