// The recurrent operators RNN, GRU and LSTM (ONNX's definitions): forward, reverse or both
// directions, layout 0 (X [T, B, I]) or 1 (X [B, T, I]), optional biases, initial states and
// (LSTM) peepholes, the default activations (RNN tanh; GRU sigmoid, tanh; LSTM sigmoid, tanh,
// tanh), GRU's linear_before_reset either way. Backward is backpropagation through time over the
// states the forward pass kept in the kernel's scratch (so a backward pass follows its own
// forward pass, as the executor runs them). Refused: sequence lengths shorter than the sequence,
// clip, other activations, LSTM's input_forget. Work: 2 FLOPs per multiply-add of the gates'
// products, forward; twice that backward.
#include "backends/reference/ops_common.hpp"

namespace d500::ref {
namespace {

enum class Cell { Rnn, Gru, Lstm };

Cell cell_of(const Node& n) { return n.op == "RNN" ? Cell::Rnn : n.op == "GRU" ? Cell::Gru : Cell::Lstm; }
I gates_of(Cell c) { return c == Cell::Rnn ? 1 : c == Cell::Gru ? 3 : 4; }

// The sizes, and where each tensor's element lives under the layout.
struct Rnn {
  Cell cell;
  I t = 0, b = 0, in = 0, h = 0, d = 1, g = 1;
  bool batch_first = false, lbr = false;
  explicit Rnn(const NodeProblem& p) : cell(cell_of(*p.node)) {
    const Shape& x = shape_in(p, 0);
    batch_first = p.node->attr_i("layout", 0) != 0;
    t = batch_first ? x[1] : x[0];
    b = batch_first ? x[0] : x[1];
    in = x[2];
    h = p.node->attr_i("hidden_size", 0);
    d = p.node->attr_s("direction", "forward") == "bidirectional" ? 2 : 1;
    g = gates_of(cell);
    lbr = p.node->attr_i("linear_before_reset", 0) != 0;
  }
  bool reverse(I dir, const NodeProblem& p) const {
    return dir == 1 || p.node->attr_s("direction", "forward") == "reverse";
  }
  I x_at(I step, I batch, I i) const { return ((batch_first ? batch * t + step : step * b + batch) * in) + i; }
  I y_at(I step, I dir, I batch, I k) const {
    return (batch_first ? ((batch * t + step) * d + dir) : ((step * d + dir) * b + batch)) * h + k;
  }
  I state_at(I dir, I batch, I k) const { return (batch_first ? batch * d + dir : dir * b + batch) * h + k; }
  // Scratch: per direction and step the hidden state h, the cell state c (LSTM), the gates after
  // their activations, and GRU's R_h h + Rb_h (linear_before_reset); then the backward pass's
  // running gradients.
  I states() const { return d * t * b * h; }
  I scratch() const { return 3 * states() + d * t * b * g * h + 2 * b * h + b * g * h + b * h; }
};

// Inputs by slot (absent optional inputs: nullptr).
template <class T>
struct RnnIn {
  const T *x, *w, *r, *bias, *h0, *c0, *peep;
  explicit RnnIn(const NodeProblem& p) {
    auto at = [&](std::size_t i) { return i < p.in.size() && p.in[i].present() ? cin<T>(p, i) : nullptr; };
    x = at(0), w = at(1), r = at(2), bias = at(3), h0 = at(5), c0 = at(6), peep = at(7);
  }
};

// The state (h or c) a step starts from, unit by unit: the previous step's, kept in the scratch,
// or at the first step the initial state (zero without one).
template <class T>
struct Previous {
  const Rnn& s;
  const T *kept, *init;
  I n, slot, dir, bb;
  T operator()(I k) const {
    if (n > 0) return kept[(slot - s.b + bb) * s.h + k];
    return init ? init[s.state_at(dir, bb, k)] : T(0);
  }
};

template <class T>
void rnn_fwd(const NodeProblem& p, T* scratch) {
  const Rnn s(p);
  const RnnIn<T> a(p);
  const I G = s.g * s.h;
  T *hs = scratch, *cs = hs + s.states(), *qs = cs + s.states(), *gates = qs + s.states();
  T* y = p.out.size() > 0 && p.out[0].present() ? out<T>(p, 0) : nullptr;
  T* yh = p.out.size() > 1 && p.out[1].present() ? out<T>(p, 1) : nullptr;
  T* yc = p.out.size() > 2 && p.out[2].present() ? out<T>(p, 2) : nullptr;
  for (I dir = 0; dir < s.d; ++dir) {
    const T *W = a.w + dir * G * s.in, *R = a.r + dir * G * s.h;
    const T *Wb = a.bias ? a.bias + dir * 2 * G : nullptr, *Rb = Wb ? Wb + G : nullptr;
    const T* P = a.peep ? a.peep + dir * 3 * s.h : nullptr;
    for (I n = 0; n < s.t; ++n) {
      const I step = s.reverse(dir, p) ? s.t - 1 - n : n;
      const I slot = (dir * s.t + n) * s.b;  // kept in processing order
      for (I bb = 0; bb < s.b; ++bb) {
        const Previous<T> hprev{s, hs, a.h0, n, slot, dir, bb}, cprev{s, cs, a.c0, n, slot, dir, bb};
        T* gt = gates + (slot + bb) * G;
        T* q = qs + (slot + bb) * s.h;
        for (I j = 0; j < G; ++j) {
          T v = Wb ? Wb[j] : T(0);
          for (I i = 0; i < s.in; ++i) v += W[j * s.in + i] * a.x[s.x_at(step, bb, i)];
          const bool gru_h = s.cell == Cell::Gru && j >= 2 * s.h;
          if (!gru_h) {
            if (Rb) v += Rb[j];
            for (I k = 0; k < s.h; ++k) v += R[j * s.h + k] * hprev(k);
          }
          gt[j] = v;
        }
        T* hn = hs + (slot + bb) * s.h;
        T* cn = cs + (slot + bb) * s.h;
        for (I k = 0; k < s.h; ++k) {
          if (s.cell == Cell::Rnn) {
            gt[k] = std::tanh(gt[k]);
            hn[k] = gt[k];
          } else if (s.cell == Cell::Lstm) {  // gates i, o, f, c; peepholes i, o, f
            const T c0 = cprev(k);
            const T i = sigmoid(gt[k] + (P ? P[k] * c0 : T(0)));
            const T f = sigmoid(gt[2 * s.h + k] + (P ? P[2 * s.h + k] * c0 : T(0)));
            const T cc = std::tanh(gt[3 * s.h + k]);
            cn[k] = f * c0 + i * cc;
            const T o = sigmoid(gt[s.h + k] + (P ? P[s.h + k] * cn[k] : T(0)));
            gt[k] = i, gt[s.h + k] = o, gt[2 * s.h + k] = f, gt[3 * s.h + k] = cc;
            hn[k] = o * std::tanh(cn[k]);
          }
        }
        if (s.cell == Cell::Gru) {  // gates z, r, h
          for (I k = 0; k < 2 * s.h; ++k) gt[k] = sigmoid(gt[k]);
          for (I k = 0; k < s.h; ++k) {
            const I j = 2 * s.h + k;
            T rec = Rb ? Rb[j] : T(0);
            for (I m = 0; m < s.h; ++m) rec += R[j * s.h + m] * (s.lbr ? hprev(m) : gt[s.h + m] * hprev(m));
            q[k] = rec;  // linear_before_reset: R_h h + Rb_h; else R_h (r * h) + Rb_h
            gt[j] = std::tanh(gt[j] + (s.lbr ? gt[s.h + k] * rec : rec));
          }
          for (I k = 0; k < s.h; ++k) hn[k] = (T(1) - gt[k]) * gt[2 * s.h + k] + gt[k] * hprev(k);
        }
        for (I k = 0; k < s.h; ++k) {
          if (y) y[s.y_at(step, dir, bb, k)] = hn[k];
          if (n == s.t - 1 && yh) yh[s.state_at(dir, bb, k)] = hn[k];
          if (n == s.t - 1 && yc) yc[s.state_at(dir, bb, k)] = cn[k];
        }
      }
    }
  }
}

// LSTM, unit k of a step: the gates' pre-activation gradients into da from the gradient dh of
// its h and dc of its c (made the gradient of the previous c), and the peepholes' into dpd.
template <class T>
void lstm_unit_backward(I h, I k, const T* gt, T c, T c0, const T* P, T dh, T* da, T& dc_io, T* dpd) {
  const T i = gt[k], o = gt[h + k], f = gt[2 * h + k], cc = gt[3 * h + k];
  const T tc = std::tanh(c);
  const T dao = dh * tc * o * (T(1) - o);
  const T dc = dc_io + dh * o * (T(1) - tc * tc) + (P ? dao * P[h + k] : T(0));
  const T dai = dc * cc * i * (T(1) - i), daf = dc * c0 * f * (T(1) - f);
  da[k] = dai, da[h + k] = dao, da[2 * h + k] = daf;
  da[3 * h + k] = dc * i * (T(1) - cc * cc);
  dc_io = dc * f + (P ? dai * P[k] + daf * P[2 * h + k] : T(0));
  if (dpd) dpd[k] += dai * c0, dpd[h + k] += dao * c, dpd[2 * h + k] += daf * c0;
}

template <class T>
void zero_wanted(const NodeProblem& p) {
  for (std::size_t i = 0; i < p.din.size(); ++i)
    if (T* dd = din<T>(p, i)) std::fill(dd, dd + p.in[i].numel(), T(0));
}

// Backpropagation through time, per direction from its last processed step to its first.
template <class T>
void rnn_bwd(const NodeProblem& p, T* scratch) {
  const Rnn s(p);
  const RnnIn<T> a(p);
  const I G = s.g * s.h;
  zero_wanted<T>(p);
  const T *hs = scratch, *cs = hs + s.states(), *qs = cs + s.states(), *gates = qs + s.states();
  T* dh_next = scratch + 3 * s.states() + s.d * s.t * s.b * G;
  T* dc_next = dh_next + s.b * s.h;
  T* da = dc_next + s.b * s.h;
  T* ds = da + s.b * G;  // GRU, not linear_before_reset: the gradient of r * h_prev
  const T *dy = dout<T>(p, 0), *dyh = dout<T>(p, 1), *dyc = dout<T>(p, 2);
  T *dx = din<T>(p, 0), *dw = din<T>(p, 1), *dr = din<T>(p, 2), *db = din<T>(p, 3), *dh0 = din<T>(p, 5),
    *dc0 = din<T>(p, 6), *dp = din<T>(p, 7);
  for (I dir = 0; dir < s.d; ++dir) {
    const T *W = a.w + dir * G * s.in, *R = a.r + dir * G * s.h;
    const T* P = a.peep ? a.peep + dir * 3 * s.h : nullptr;
    std::fill(dh_next, dh_next + 2 * s.b * s.h, T(0));
    for (I n = s.t; n-- > 0;) {
      const I step = s.reverse(dir, p) ? s.t - 1 - n : n;
      const I slot = (dir * s.t + n) * s.b;
      for (I bb = 0; bb < s.b; ++bb) {
        const Previous<T> hprev{s, hs, a.h0, n, slot, dir, bb}, cprev{s, cs, a.c0, n, slot, dir, bb};
        const T* gt = gates + (slot + bb) * G;
        const T* q = qs + (slot + bb) * s.h;
        const T* c = cs + (slot + bb) * s.h;
        T* dhn = dh_next + bb * s.h;
        T* dcn = dc_next + bb * s.h;
        T* dab = da + bb * G;
        for (I k = 0; k < s.h; ++k) {  // the gradient reaching this step's h (and c)
          dhn[k] +=
              (dy ? dy[s.y_at(step, dir, bb, k)] : T(0)) + (n == s.t - 1 && dyh ? dyh[s.state_at(dir, bb, k)] : T(0));
          if (n == s.t - 1 && dyc) dcn[k] += dyc[s.state_at(dir, bb, k)];
        }
        // The gates' pre-activation gradients; dhn becomes the gradient of h_prev not through R.
        for (I k = 0; k < s.h; ++k) {
          const T dh = dhn[k];
          if (s.cell == Cell::Rnn) {
            dab[k] = dh * (T(1) - gt[k] * gt[k]);
            dhn[k] = 0;
          } else if (s.cell == Cell::Lstm) {
            lstm_unit_backward(s.h, k, gt, c[k], cprev(k), P, dh, dab, dcn[k], dp ? dp + dir * 3 * s.h : nullptr);
            dhn[k] = 0;
          } else {  // GRU
            const T z = gt[k], hh = gt[2 * s.h + k];
            dab[k] = dh * (hprev(k) - hh) * z * (T(1) - z);
            dab[2 * s.h + k] = dh * (T(1) - z) * (T(1) - hh * hh);  // of the h gate's pre-activation
            dhn[k] = dh * z;
          }
        }
        if (s.cell == Cell::Gru) {  // through the reset gate and R_h
          T* dRb = db ? db + dir * 2 * G + G : nullptr;
          for (I k = 0; k < s.h; ++k) {
            const I j = 2 * s.h + k;
            const T dah = dab[j], r = gt[s.h + k];
            const T dq = s.lbr ? dah * r : dah;    // the gradient of q
            if (s.lbr) dab[s.h + k] = dah * q[k];  // of r, then through the sigmoid below
            if (dRb) dRb[j] += dq;
            for (I m = 0; m < s.h; ++m) {
              const T src = s.lbr ? hprev(m) : gt[s.h + m] * hprev(m);
              if (dr) dr[(dir * G + j) * s.h + m] += dq * src;
            }
          }
          if (!s.lbr) {
            for (I m = 0; m < s.h; ++m) {
              T v = 0;
              for (I k = 0; k < s.h; ++k) v += R[(2 * s.h + k) * s.h + m] * dab[2 * s.h + k];
              ds[m] = v;
            }
            for (I m = 0; m < s.h; ++m) {
              const T r = gt[s.h + m];
              dab[s.h + m] = ds[m] * hprev(m);
              dhn[m] += ds[m] * r;
            }
          } else {
            for (I m = 0; m < s.h; ++m)
              for (I k = 0; k < s.h; ++k) dhn[m] += R[(2 * s.h + k) * s.h + m] * dab[2 * s.h + k] * gt[s.h + k];
          }
          for (I k = 0; k < s.h; ++k) dab[s.h + k] *= gt[s.h + k] * (T(1) - gt[s.h + k]);
        }
        // The products: W and its bias over every gate; R and its bias over the gates it feeds.
        const I rec = s.cell == Cell::Gru ? 2 * s.h : G;
        for (I j = 0; j < G; ++j) {
          const T v = dab[j];
          if (db) {
            db[dir * 2 * G + j] += v;
            if (j < rec) db[dir * 2 * G + G + j] += v;
          }
          for (I i = 0; i < s.in; ++i) {
            if (dw) dw[(dir * G + j) * s.in + i] += v * a.x[s.x_at(step, bb, i)];
            if (dx) dx[s.x_at(step, bb, i)] += W[j * s.in + i] * v;
          }
          if (j < rec)
            for (I k = 0; k < s.h; ++k) {
              if (dr) dr[(dir * G + j) * s.h + k] += v * hprev(k);
              dhn[k] += R[j * s.h + k] * v;
            }
        }
        if (n == 0) {  // the first processed step: what reaches the initial states
          for (I k = 0; k < s.h; ++k) {
            if (dh0) dh0[s.state_at(dir, bb, k)] += dhn[k];
            if (dc0) dc0[s.state_at(dir, bb, k)] += dcn[k];
          }
        }
      }
    }
  }
}

void infer_rnn(InferCtx& c) {
  const Cell cell = cell_of(c.node);
  const I G = gates_of(cell);
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 7})
    if (c.has_in(i) && c.dtype(i) != DType::F32) c.fail("input " + std::to_string(i) + " must be float32");
  const Shape& x = c.shape(0);
  if (x.size() != 3) c.fail("X must have three axes");
  const bool bf = c.node.attr_i("layout", 0) != 0;
  const I t = bf ? x[1] : x[0], b = bf ? x[0] : x[1];
  const std::string dir = c.node.attr_s("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    c.fail("direction \"" + dir + "\" is not forward, reverse or bidirectional");
  const I d = dir == "bidirectional" ? 2 : 1;
  const Shape& w = c.shape(1);
  I h = c.node.attr_i("hidden_size", 0);
  if (w.size() != 3 || w[0] != d || w[2] != x[2] || (h > 0 && w[1] != G * h) || w[1] % G)
    c.fail("W " + shape_str(w) + " does not fit X " + shape_str(x) + ", the direction and hidden_size");
  if (h <= 0) h = w[1] / G;
  c.node.attrs["hidden_size"] = int_attr(h);
  if (c.shape(2) != Shape{d, G * h, h}) c.fail("R must be " + shape_str({d, G * h, h}));
  if (c.has_in(3) && c.shape(3) != Shape{d, 2 * G * h}) c.fail("B must be " + shape_str({d, 2 * G * h}));
  const Shape state = bf ? Shape{b, d, h} : Shape{d, b, h};
  for (std::size_t i : {5, 6})
    if (c.has_in(i) && c.shape(i) != state) c.fail("initial states must be " + shape_str(state));
  if (c.has_in(7) && c.shape(7) != Shape{d, 3 * h}) c.fail("P must be " + shape_str({d, 3 * h}));
  if (c.has_in(4)) {
    if (!c.is_const(4)) c.fail("sequence_lens must be a constant");
    for (I v : c.ints(4, "sequence_lens"))
      if (v != t)
        c.fail("sequence lengths shorter than the sequence (" + std::to_string(v) + " of " + std::to_string(t) +
               ") are not supported");
  }
  if (c.node.has("clip")) c.fail("clip is not supported");
  if (c.node.has("activations")) c.fail("activations other than the defaults are not supported");
  if (c.node.attr_i("input_forget", 0)) c.fail("input_forget is not supported");
  c.set(0, DType::F32, bf ? Shape{b, t, d, h} : Shape{t, d, b, h});
  c.set(1, DType::F32, state);
  if (cell == Cell::Lstm) c.set(2, DType::F32, state);
}

std::int64_t rnn_scratch(const NodeProblem& p) { return Rnn(p).scratch(); }
double rnn_flops(const NodeProblem& p, bool backward) {
  const Rnn s(p);
  return (backward ? 4.0 : 2.0) * static_cast<double>(s.d * s.t * s.b * s.g * s.h * (s.in + s.h));
}

}  // namespace

void add_rnn_ops(std::vector<OpSchema>& t) {
  for (const char* op : {"RNN", "GRU", "LSTM"})
    t.push_back(OpSchema{.op = op,
                         .since = 7,
                         .infer = infer_rnn,
                         D500_FWD(rnn_fwd),
                         .bwd_f = rnn_bwd<float>,
                         .bwd_d = rnn_bwd<double>,
                         .scratch = rnn_scratch,
                         .flops = rnn_flops,
                         .diff_in = 0xEF,  // X, W, R, B, initial_h, initial_c, P: not sequence_lens
                         .saved_in = 0xEF});
}

}  // namespace d500::ref
