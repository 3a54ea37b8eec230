// Convolution and pooling over three spatial axes (X [N, C, D, H, W]: Conv3d, MaxPool3d,
// AvgPool3d as PyTorch exports them), in direct loops over each output's window: the reference
// where no backend has a kernel (every backend's own convolution and pooling take 1-D and 2-D
// windows and leave these to it). The geometry is the attributes ops_conv.cpp's shape inference
// made explicit (kernel_shape, strides, dilations, pads begin... end...).
#include "backends/conv_geom.hpp"
#include "backends/reference/ops_common.hpp"

namespace d500::ref {
namespace {

struct Geom3 {
  I n = 0, c = 0, k = 0, groups = 1;
  I in[3] = {}, ker[3] = {}, st[3] = {}, dil[3] = {}, pad[3] = {}, pad_end[3] = {}, out[3] = {};
  I in_count() const { return in[0] * in[1] * in[2]; }
  I out_count() const { return out[0] * out[1] * out[2]; }
  I ker_count() const { return ker[0] * ker[1] * ker[2]; }
};

Geom3 geom3(const Node& node, const Shape& x, I out_channels) {
  Geom3 g;
  g.n = x[0], g.c = x[1], g.k = out_channels, g.groups = node.attr_i("group", 1);
  const auto ks = node.attr_ints("kernel_shape"), st = node.attr_ints("strides"), dl = node.attr_ints("dilations"),
             pd = node.attr_ints("pads");
  const bool ceil_mode = node.attr_i("ceil_mode", 0) != 0;
  for (std::size_t a = 0; a < 3; ++a) {
    g.in[a] = x[a + 2], g.ker[a] = ks[a], g.st[a] = st[a], g.dil[a] = dl[a], g.pad[a] = pd[a], g.pad_end[a] = pd[a + 3];
    g.out[a] = pooled_size(g.in[a], pd[a], pd[a + 3], ks[a], dl[a], st[a], ceil_mode);
  }
  return g;
}

// Calls f(tap index in the kernel, index in the input volume) for every tap of output o (an index
// into the output volume) that falls inside the input.
template <class F>
void taps(const Geom3& g, I o, F&& f) {
  const I o2 = o % g.out[2], o1 = o / g.out[2] % g.out[1], o0 = o / (g.out[2] * g.out[1]);
  for (I a = 0; a < g.ker[0]; ++a) {
    const I i0 = o0 * g.st[0] - g.pad[0] + a * g.dil[0];
    if (i0 < 0 || i0 >= g.in[0]) continue;
    for (I b = 0; b < g.ker[1]; ++b) {
      const I i1 = o1 * g.st[1] - g.pad[1] + b * g.dil[1];
      if (i1 < 0 || i1 >= g.in[1]) continue;
      for (I e = 0; e < g.ker[2]; ++e) {
        const I i2 = o2 * g.st[2] - g.pad[2] + e * g.dil[2];
        if (i2 >= 0 && i2 < g.in[2]) f((a * g.ker[1] + b) * g.ker[2] + e, (i0 * g.in[1] + i1) * g.in[2] + i2);
      }
    }
  }
}

Geom3 conv_geom3(const NodeProblem& p) { return geom3(*p.node, shape_in(p, 0), shape_in(p, 1)[0]); }
Geom3 pool_geom3(const NodeProblem& p) { return geom3(*p.node, shape_in(p, 0), shape_in(p, 0)[1]); }

}  // namespace

bool is_3d(const NodeProblem& p) { return shape_in(p, 0).size() == 5; }

Shape window3d_output(const Node& n, const Shape& x, I channels) {
  const Geom3 g = geom3(n, x, channels);
  return {x[0], channels, g.out[0], g.out[1], g.out[2]};
}

template <class T>
void conv3d_fwd(const NodeProblem& p) {
  const Geom3 g = conv_geom3(p);
  const T *x = cin<T>(p, 0), *w = cin<T>(p, 1);
  const T* b = p.in.size() > 2 && p.in[2].present() ? cin<T>(p, 2) : nullptr;
  T* y = out<T>(p, 0);
  const I cg = g.c / g.groups, kg = g.k / g.groups, kv = g.ker_count(), ov = g.out_count(), iv = g.in_count();
  for (I n = 0; n < g.n; ++n)
    for (I k = 0; k < g.k; ++k) {
      const I grp = k / kg;
      for (I o = 0; o < ov; ++o) {
        T s = b ? b[k] : T(0);
        for (I c = 0; c < cg; ++c) {
          const T* xc = x + (n * g.c + grp * cg + c) * iv;
          const T* wk = w + (k * cg + c) * kv;
          taps(g, o, [&](I t, I at) { s += wk[t] * xc[at]; });
        }
        y[(n * g.k + k) * ov + o] = s;
      }
    }
}

template <class T>
void conv3d_bwd(const NodeProblem& p) {
  const Geom3 g = conv_geom3(p);
  const T *x = cin<T>(p, 0), *w = cin<T>(p, 1), *dy = dout<T>(p, 0);
  T *dx = din<T>(p, 0), *dw = din<T>(p, 1), *db = din<T>(p, 2);
  if (dx) std::fill(dx, dx + p.in[0].numel(), T(0));
  if (dw) std::fill(dw, dw + p.in[1].numel(), T(0));
  if (db) std::fill(db, db + p.in[2].numel(), T(0));
  if (!dy) return;
  const I cg = g.c / g.groups, kg = g.k / g.groups, kv = g.ker_count(), ov = g.out_count(), iv = g.in_count();
  for (I n = 0; n < g.n; ++n)
    for (I k = 0; k < g.k; ++k) {
      const I grp = k / kg;
      for (I o = 0; o < ov; ++o) {
        const T d = dy[(n * g.k + k) * ov + o];
        if (db) db[k] += d;
        for (I c = 0; c < cg; ++c) {
          const I xoff = (n * g.c + grp * cg + c) * iv, woff = (k * cg + c) * kv;
          taps(g, o, [&](I t, I at) {
            if (dx) dx[xoff + at] += w[woff + t] * d;
            if (dw) dw[woff + t] += x[xoff + at] * d;
          });
        }
      }
    }
}

// MaxPool (the first maximum of a window gets its gradient) and AveragePool (count_include_pad:
// the taps inside the padded volume, else inside the input, divide).
template <class T>
void pool3d(const NodeProblem& p, bool max, bool backward) {
  const Geom3 g = pool_geom3(p);
  const bool include = p.node->attr_i("count_include_pad", 0) != 0;
  const T* x = cin<T>(p, 0);
  const I ov = g.out_count(), iv = g.in_count();
  T* y = backward ? nullptr : out<T>(p, 0);
  T* dx = backward ? din<T>(p, 0) : nullptr;
  const T* dy = backward ? dout<T>(p, 0) : nullptr;
  if (backward && !dx) return;
  if (dx) std::fill(dx, dx + p.in[0].numel(), T(0));
  if (backward && !dy) return;
  for (I nc = 0; nc < g.n * g.c; ++nc)
    for (I o = 0; o < ov; ++o) {
      const T* xv = x + nc * iv;
      if (max) {
        I best = -1;
        taps(g, o, [&](I, I at) {
          if (best < 0 || xv[at] > xv[best]) best = at;
        });
        if (y) y[nc * ov + o] = best < 0 ? -std::numeric_limits<T>::infinity() : xv[best];
        if (dx && best >= 0) dx[nc * iv + best] += dy[nc * ov + o];
        continue;
      }
      I count = 0;
      T s = 0;
      taps(g, o, [&](I, I at) { ++count, s += xv[at]; });
      if (include) {  // the window's taps inside the padded volume
        count = 1;
        const I o2 = o % g.out[2], o1 = o / g.out[2] % g.out[1], o0 = o / (g.out[2] * g.out[1]);
        const I os[3] = {o0, o1, o2};
        for (std::size_t a = 0; a < 3; ++a) {
          const I b0 = os[a] * g.st[a] - g.pad[a];
          count *= std::min(b0 + g.ker[a], g.in[a] + g.pad_end[a]) - b0;
        }
      }
      if (y) y[nc * ov + o] = count > 0 ? s / static_cast<T>(count) : T(0);
      if (dx && count > 0) {
        const T share = dy[nc * ov + o] / static_cast<T>(count);
        taps(g, o, [&](I, I at) { dx[nc * iv + at] += share; });
      }
    }
}

template <class T>
void pool3d_fwd(const NodeProblem& p, bool max) {
  pool3d<T>(p, max, false);
}
template <class T>
void pool3d_bwd(const NodeProblem& p, bool max) {
  pool3d<T>(p, max, true);
}

double window3d_flops(const NodeProblem& p, bool conv, bool backward) {
  const Geom3 g = conv ? conv_geom3(p) : pool_geom3(p);
  const double taps_ =
      static_cast<double>(g.n * (conv ? g.k * (g.c / g.groups) * 2 : g.c) * g.out_count() * g.ker_count());
  return (backward && conv ? 2.0 : 1.0) * taps_;
}

template void conv3d_fwd<float>(const NodeProblem&);
template void conv3d_fwd<double>(const NodeProblem&);
template void conv3d_bwd<float>(const NodeProblem&);
template void conv3d_bwd<double>(const NodeProblem&);
template void pool3d_fwd<float>(const NodeProblem&, bool);
template void pool3d_fwd<double>(const NodeProblem&, bool);
template void pool3d_bwd<float>(const NodeProblem&, bool);
template void pool3d_bwd<double>(const NodeProblem&, bool);

}  // namespace d500::ref
