// The `onednn` backend's level-1 node kernels: one oneDNN primitive (or a few) per node, created
// with the kernel, untimed, over the executor's buffers (plain row-major layouts). Convolutions
// let oneDNN choose its blocked formats, as frameworks built on it do: weights are reordered into
// them once (and again when the optimizer changes them), activations are reordered in and out
// inside the timed call. Backward passes use oneDNN's backward primitives; where a node's
// configuration has none (a broadcast it cannot express, an operator it lacks) the executor runs
// the reference for that node, and the per-node breakdown says so.
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "backends/conv_geom.hpp"
#include "backends/device_ops.hpp"
#include "backends/graph_ops.hpp"
#include "backends/half.hpp"
#include "backends/onednn/onednn_backend.hpp"
#include "common/error.hpp"

namespace d500 {
namespace {

using dnnl::memory;
using dt = memory::data_type;
using Args = std::unordered_map<int, memory>;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

memory::dims dims_of(const Shape& s) {
  if (s.empty()) return {1};
  return memory::dims(s.begin(), s.end());
}
memory::dims strides_of_dims(const memory::dims& d) {
  memory::dims st(d.size(), 1);
  for (std::size_t i = d.size(); i-- > 1;) st[i - 1] = st[i] * d[i];
  return st;
}
// Row-major f32, or bf16 (memory::dims is d500's Shape); a scalar is one element.
memory::desc plain(const memory::dims& d, bool bf16 = false) {
  const memory::dims dd = d.empty() ? memory::dims{1} : d;
  return memory::desc(dd, bf16 ? dt::bf16 : dt::f32, strides_of_dims(dd));
}
// A tensor as one row of its elements, stored as the view says (an element-wise node's).
memory::desc flat(const TensorView& v) { return plain(memory::dims{std::max<std::int64_t>(1, v.numel())}, v.bf16); }
memory user_mem(const memory::desc& md, void* p) { return memory(md, engine(), p); }
// A 4-D tensor (dims d) as the executor stores the view v: NCHW, or NHWC with the point's
// memory_format = "channels_last" where the executor's plan put it so (TensorView::channels_last);
// in float32, or in bfloat16 with math = "bf16" where it put it so (TensorView::bf16).
memory::desc stored(const memory::dims& d, const TensorView& v) {
  return v.channels_last ? memory::desc(d, v.bf16 ? dt::bf16 : dt::f32, memory::format_tag::nhwc) : plain(d, v.bf16);
}
// What a kernel computes in, for its impl(): "" or " (bfloat16)", " (NHWC)", " (bfloat16, NHWC)".
std::string computed_in(bool bf16, bool nhwc) {
  if (!bf16 && !nhwc) return "";
  return std::string(" (") + (bf16 ? "bfloat16" : "") + (bf16 && nhwc ? ", " : "") + (nhwc ? "NHWC" : "") + ")";
}

// " on bfloat16 activations" where a node's data input or output is stored in bfloat16
// (TensorView::bf16): a convolution that reads or writes it without a conversion.
std::string stored_note(const NodeProblem& p) {
  const bool in = !p.in.empty() && p.in[0].bf16, out = !p.out.empty() && p.out[0].bf16;
  return in || out ? " on bfloat16 activations" : "";
}

// The buffers that hold an activation in a primitive's format for one call (a convolution's input
// reordered in, its output before it is reordered out): two slots shared by every kernel of the
// thread, each as large as the largest any kernel reserved at its creation (untimed), so that a
// network's convolutions hold two activations' worth where each held six of its own (ResNet-20
// at batch 32 in NCHW: 586 MiB peak RSS, LibTorch 395 MiB). The kernels of a thread run one at a
// time, each call reordering in, computing and reordering out before the next begins.
class ReorderScratch {
 public:
  static constexpr int kSlots = 2;
  static ReorderScratch& mine() {
    thread_local ReorderScratch s;
    return s;
  }
  void reserve(int slot, std::size_t bytes) {
    Slot& b = slots_[slot];
    if (b.bytes >= bytes) return;
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    b.data.reset(static_cast<std::byte*>(std::aligned_alloc(64, rounded)));
    if (!b.data) throw std::bad_alloc();
    b.bytes = rounded;
  }
  // The slot's buffer, at least `bytes` long: grown by a kernel's creation, and at a call only
  // where no kernel of this thread reserved it (a kernel made on another thread).
  void* at(int slot, std::size_t bytes) {
    reserve(slot, bytes);
    return slots_[slot].data.get();
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  struct Slot {
    std::unique_ptr<std::byte, Free> data;
    std::size_t bytes = 0;
  };
  Slot slots_[kSlots];
};

// A user buffer bound to a primitive argument: the same memory when the primitive takes the
// plain layout, else a buffer in the primitive's format and a reorder (created here, once). The
// buffer is the argument's own, or with `slot` >= 0 the thread's ReorderScratch slot, placed
// before each use (pull() for an input, place() before the primitive for an output).
struct Arg {
  memory user, prim;
  dnnl::reorder to_prim, to_user;
  bool reorder = false;
  int slot = -1;
  std::size_t bytes = 0;  // prim's
  void bind(const memory::desc& want, const memory::desc& user_md, void* p, bool input, bool output,
            int scratch_slot = -1) {
    user = user_mem(user_md, p);
    if (want == user_md) {
      prim = user;
      return;
    }
    reorder = true;
    slot = scratch_slot;
    bytes = want.get_size();
    prim = slot >= 0 ? memory(want, engine(), ReorderScratch::mine().at(slot, bytes)) : memory(want, engine());
    if (input) to_prim = dnnl::reorder(user, prim);
    if (output) to_user = dnnl::reorder(prim, user);
  }
  void place() {
    if (reorder && slot >= 0) prim.set_data_handle(ReorderScratch::mine().at(slot, bytes));
  }
  void pull(dnnl::stream& s) {
    if (!reorder) return;
    place();
    to_prim.execute(s, user, prim);
  }
  void push(dnnl::stream& s) {
    if (reorder) to_user.execute(s, prim, user);
  }
};

class DnnlNode : public NodeKernel {
 public:
  explicit DnnlNode(std::string what) : what_(std::move(what)) {}
  std::string impl() const override { return "onednn " + what_; }

 protected:
  dnnl::stream s_{engine()};
  std::string what_;
};

// A node made of one forward primitive and, in training, one backward primitive, each with its
// arguments bound at creation.
class PairedNode : public DnnlNode {
 public:
  using DnnlNode::DnnlNode;
  void forward() override {
    fwd_.execute(s_, fargs_);
    s_.wait();
  }
  void backward() override {
    if (!bwd_) throw Error("onednn " + what_ + ": no backward pass");
    bwd_.execute(s_, bargs_);
    s_.wait();
  }

 protected:
  dnnl::primitive fwd_, bwd_;
  Args fargs_, bargs_;
};

// Relu's gradient, dy where y > 0, into `first` and (where not nullptr) `second`, on the kernel's
// OpenMP threads; zeros where no gradient reaches the output (dy nullptr). Each value the cuda
// kernel's (dy passed by value whatever y is: the loops vectorise). The backward pass of the
// joined nodes that end in a Relu (AddRelu, BatchNormRelu), over float32 tensors or, all four,
// bfloat16 ones (TensorView::bf16: a gradient passed or zeroed is exact in either).
// bfloat16 bits that stand for a value > 0 (sign clear, not zero, not NaN): integer compares,
// which vectorise where widening to float does not.
inline bool bf16_positive(std::uint16_t v) { return static_cast<std::int16_t>(v) > 0 && v <= 0x7f80; }

template <class T>
void relu_gradient(const T* y, const T* dy, T* first, T* second, std::int64_t n) {
  if (!dy) {
    for (T* d : {first, second})
      if (d) std::memset(d, 0, static_cast<std::size_t>(n) * sizeof(T));
    return;
  }
  if constexpr (std::is_same_v<T, std::uint16_t>) {
    auto passed = [](std::uint16_t v, std::uint16_t d) {
      return static_cast<std::uint16_t>(d & static_cast<std::uint16_t>(-static_cast<int>(bf16_positive(v))));
    };
    if (second) {
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < n; ++i) first[i] = second[i] = passed(y[i], dy[i]);
    } else {
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < n; ++i) first[i] = passed(y[i], dy[i]);
    }
  } else if (second) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) first[i] = second[i] = dev::relu_grad(y[i], dy[i]);
  } else {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) first[i] = dev::relu_grad(y[i], dy[i]);
  }
}
// The same over a kernel's untyped views: bfloat16 (`bf16`) or float32, all four alike.
void relu_gradient(bool bf16, const void* y, const void* dy, void* first, void* second, std::int64_t n) {
  using H = std::uint16_t;
  if (bf16)
    relu_gradient(static_cast<const H*>(y), static_cast<const H*>(dy), static_cast<H*>(first), static_cast<H*>(second),
                  n);
  else
    relu_gradient(static_cast<const float*>(y), static_cast<const float*>(dy), static_cast<float*>(first),
                  static_cast<float*>(second), n);
}

// ---- Convolution ----------------------------------------------------------------------------------
// With the point's math = "bf16" (bf16_math) x, w and backward dy are taken in bfloat16 and y, dx
// and dw written in it, the sums in float32: the primitives in oneDNN's bfloat16 configuration
// over the executor's float32 tensors, whose reorders into the primitives' formats round each
// value to nearest even and widen the results back (the bias and its gradient stay float32). The
// values the yardstick's bfloat16 simulation computes (ExecutorSpec::reduced_mantissa = 7).
// With channels-last activations (x or y stored NHWC: Takes::Each) the primitive computes in
// NHWC, which oneDNN's brgemm convolutions take as fast as its blocked formats, so that a tensor
// stored NHWC is read and written where it lies (in float32; in bfloat16 through a conversion
// that keeps its layout) and only an NCHW one is reordered.
class ConvKernel final : public DnnlNode {
 public:
  ConvKernel(const NodeProblem& p, const ConvGeom& g, bool bf16)
      : DnnlNode("convolution" + computed_in(bf16, p.in[0].channels_last || p.out[0].channels_last) + stored_note(p)),
        p_(p) {
    using namespace dnnl;
    const bool bias = p.in.size() > 2 && p.in[2].present();
    const memory::dims src{g.n, g.c, g.h, g.w}, dst{g.n, g.k, g.p, g.q};
    const memory::dims wei =
        g.groups > 1 ? memory::dims{g.groups, g.kg(), g.cg(), g.kh, g.kw} : memory::dims{g.k, g.c, g.kh, g.kw};
    const memory::desc src_u = stored(src, p.in[0]), dst_u = stored(dst, p.out[0]), wei_u = plain(wei),
                       b_u = plain(memory::dims{g.k});
    const dt type = bf16 ? dt::bf16 : dt::f32;
    const memory::format_tag act =
        p.in[0].channels_last || p.out[0].channels_last ? memory::format_tag::nhwc : memory::format_tag::any;
    const memory::desc src_a(src, type, act), dst_a(dst, type, act), wei_a(wei, type, memory::format_tag::any);
    const memory::dims st{g.sh, g.sw}, dil{g.dh - 1, g.dw - 1}, pl{g.pt, g.pl}, pr{g.pb, g.pr};
    const prop_kind pk = p.training ? prop_kind::forward_training : prop_kind::forward_inference;
    fpd_ = bias
               ? convolution_forward::primitive_desc(convolution_forward::desc(pk, algorithm::convolution_direct, src_a,
                                                                               wei_a, b_u, dst_a, st, dil, pl, pr),
                                                     engine())
               : convolution_forward::primitive_desc(
                     convolution_forward::desc(pk, algorithm::convolution_direct, src_a, wei_a, dst_a, st, dil, pl, pr),
                     engine());
    fwd_ = convolution_forward(fpd_);
    // The activations' reorder buffers: ReorderScratch's slots 0 and 1, the same pair in each pass.
    x_.bind(fpd_.src_desc(), src_u, p.in[0].data, true, false, 0);
    w_.bind(fpd_.weights_desc(), wei_u, p.in[1].data, true, false);
    y_.bind(fpd_.dst_desc(), dst_u, p.out[0].data, false, true, 1);
    fargs_ = {{DNNL_ARG_SRC, x_.prim}, {DNNL_ARG_WEIGHTS, w_.prim}, {DNNL_ARG_DST, y_.prim}};
    if (bias) fargs_[DNNL_ARG_BIAS] = user_mem(b_u, p.in[2].data);
    // Weights that are constants are prepared once, outside every timed call.
    w_const_ = p.const_in.size() > 1 && p.const_in[1];
    if (w_const_) w_.pull(s_), s_.wait();
    if (!p.training) return;
    const bool want_dx = p.din.size() > 0 && p.din[0].present();
    const bool want_dw = p.din.size() > 1 && p.din[1].present();
    const bool want_db = bias && p.din.size() > 2 && p.din[2].present();
    if (want_dx) {
      bdpd_ = convolution_backward_data::primitive_desc(
          convolution_backward_data::desc(algorithm::convolution_direct, src_a, wei_a, dst_a, st, dil, pl, pr),
          engine(), fpd_);
      bwd_data_ = convolution_backward_data(bdpd_);
      dy_d_.bind(bdpd_.diff_dst_desc(), dst_u, p.dout[0].data, true, false, 0);
      w_d_.bind(bdpd_.weights_desc(), wei_u, p.in[1].data, true, false);
      dx_.bind(bdpd_.diff_src_desc(), src_u, p.din[0].data, false, true, 1);
    }
    if (want_dw || want_db) {
      const memory::desc dw_a(wei, type, memory::format_tag::any);
      bwpd_ = bias ? convolution_backward_weights::primitive_desc(
                         convolution_backward_weights::desc(algorithm::convolution_direct, src_a, dw_a, b_u, dst_a, st,
                                                            dil, pl, pr),
                         engine(), fpd_)
                   : convolution_backward_weights::primitive_desc(
                         convolution_backward_weights::desc(algorithm::convolution_direct, src_a, dw_a, dst_a, st, dil,
                                                            pl, pr),
                         engine(), fpd_);
      bwd_w_ = convolution_backward_weights(bwpd_);
      x_w_.bind(bwpd_.src_desc(), src_u, p.in[0].data, true, false, 0);
      dy_w_.bind(bwpd_.diff_dst_desc(), dst_u, p.dout[0].data, true, false, 1);
      // The weights' gradient: where the executor wants it, or a scratch when only the bias's is.
      if (!want_dw) dw_scratch_ = memory(wei_u, engine());
      dw_.bind(bwpd_.diff_weights_desc(), wei_u, want_dw ? p.din[1].data : dw_scratch_.get_data_handle(), false, true);
      if (bias) db_ = want_db ? user_mem(b_u, p.din[2].data) : memory(b_u, engine());
    }
    if (want_dx) w_d_.pull(s_), s_.wait();
  }
  void forward() override {
    x_.pull(s_);
    if (!w_const_) w_.pull(s_);
    y_.place();
    fwd_.execute(s_, fargs_);
    y_.push(s_);
    s_.wait();
  }
  void backward() override {
    if (bwd_data_) {
      if (!w_const_) w_d_.pull(s_);
      dy_d_.pull(s_);
      dx_.place();
      bwd_data_.execute(
          s_, {{DNNL_ARG_DIFF_DST, dy_d_.prim}, {DNNL_ARG_WEIGHTS, w_d_.prim}, {DNNL_ARG_DIFF_SRC, dx_.prim}});
      dx_.push(s_);
    }
    if (bwd_w_) {
      x_w_.pull(s_);
      dy_w_.pull(s_);
      Args a{{DNNL_ARG_SRC, x_w_.prim}, {DNNL_ARG_DIFF_DST, dy_w_.prim}, {DNNL_ARG_DIFF_WEIGHTS, dw_.prim}};
      if (db_) a[DNNL_ARG_DIFF_BIAS] = db_;
      bwd_w_.execute(s_, a);
      dw_.push(s_);
    }
    s_.wait();
  }
  void constants_changed() override {
    if (!w_const_) return;
    w_.pull(s_);
    if (bwd_data_) w_d_.pull(s_);
    s_.wait();
  }

 private:
  NodeProblem p_;
  dnnl::convolution_forward::primitive_desc fpd_;
  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_data::primitive_desc bdpd_;
  dnnl::convolution_backward_data bwd_data_;
  dnnl::convolution_backward_weights::primitive_desc bwpd_;
  dnnl::convolution_backward_weights bwd_w_;
  Arg x_, w_, y_, dy_d_, w_d_, dx_, x_w_, dy_w_, dw_;
  memory db_, dw_scratch_;
  Args fargs_;
  bool w_const_ = false;
};

// ---- Matrix products: Gemm and MatMul through matmul ---------------------------------------------
// A matrix operand as oneDNN sees it: dims and strides, transposed by strides (no copy).
memory::desc matrix(std::int64_t rows, std::int64_t cols, bool transposed) {
  return memory::desc({rows, cols}, dt::f32, transposed ? memory::dims{1, rows} : memory::dims{cols, 1});
}

// A matrix product dst = src x weights over the user's memory (float32, strided), with its
// arguments. In bfloat16 (the point's math = "bf16") src and weights are rounded, to nearest even,
// into bfloat16 copies of the same strides before each product (oneDNN's reorders), and the
// products summed in float32 into the float32 dst, which is not rounded: the values the
// yardstick's bfloat16 simulation computes for Gemm and MatMul.
class Product {
 public:
  Product() = default;
  Product(const memory::desc& s, void* sp, const memory::desc& w, void* wp, const memory::desc& d, void* dp, bool bf16,
          const memory::desc* bias = nullptr, void* bp = nullptr) {
    args_ = {{DNNL_ARG_SRC, operand(s, sp, bf16)},
             {DNNL_ARG_WEIGHTS, operand(w, wp, bf16)},
             {DNNL_ARG_DST, user_mem(d, dp)}};
    const memory::desc& ps = args_[DNNL_ARG_SRC].get_desc();
    const memory::desc& pw = args_[DNNL_ARG_WEIGHTS].get_desc();
    if (bias) {
      args_[DNNL_ARG_BIAS] = user_mem(*bias, bp);
      prim_ = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(ps, pw, *bias, d), engine()));
    } else {
      prim_ = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(ps, pw, d), engine()));
    }
  }
  explicit operator bool() const { return static_cast<bool>(prim_); }
  void execute(dnnl::stream& s) {
    for (auto& [r, a] : rounds_) r.execute(s, a);
    prim_.execute(s, args_);
  }

 private:
  // The operand the primitive reads: the user's memory, or its bfloat16 copy (made here, once).
  memory operand(const memory::desc& md, void* p, bool bf16) {
    memory user = user_mem(md, p);
    if (!bf16) return user;
    dnnl_memory_desc_t c = md.data;  // the same dims and strides: a transposed view stays one
    c.data_type = dnnl_bf16;
    memory copy(memory::desc(c), engine());
    rounds_.emplace_back(dnnl::reorder(user, copy), Args{{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, copy}});
    return copy;
  }
  dnnl::matmul prim_;
  Args args_;
  std::vector<std::pair<dnnl::reorder, Args>> rounds_;
};

class MatmulKernel final : public DnnlNode {
 public:
  // Y = op(A) op(B) (+ C, broadcast, when beta is 1). Backward: dA, dB through matmuls on
  // transposed views; dC through a sum reduction.
  MatmulKernel(const NodeProblem& p, std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb, bool bias,
               bool bf16)
      : DnnlNode("matmul" + computed_in(bf16, false)) {
    using namespace dnnl;
    const memory::desc a = matrix(m, k, ta), b = matrix(k, n, tb), y = plain(memory::dims{m, n});
    if (bias) {
      const Shape& cs = *p.in[2].shape;
      memory::dims cd{1, 1};
      if (cs.size() == 1) cd[1] = cs[0];
      if (cs.size() == 2) cd = {cs[0], cs[1]};
      const memory::desc c = plain(cd);
      fwd_ = Product(a, p.in[0].data, b, p.in[1].data, y, p.out[0].data, bf16, &c, p.in[2].data);
      if (p.training && p.din.size() > 2 && p.din[2].present()) {
        sum_c_ = reduction(reduction::primitive_desc(reduction::desc(algorithm::reduction_sum, y, c, 0, 0), engine()));
        cargs_ = {{DNNL_ARG_SRC, user_mem(y, p.dout[0].data)}, {DNNL_ARG_DST, user_mem(c, p.din[2].data)}};
      }
    } else {
      fwd_ = Product(a, p.in[0].data, b, p.in[1].data, y, p.out[0].data, bf16);
    }
    if (!p.training) return;
    // Each gradient is written plain in its operand's own layout (oneDNN's fast matmul kernels
    // want a plain destination; a transposed one ran 50x slower): for a transposed operand its
    // transposed product is computed.
    const memory::desc dy = plain(memory::dims{m, n}), dyt = matrix(n, m, true);
    if (p.din[0].present()) {
      if (!ta)  // dA [m,k] = dY op(B)^T
        dA_ = Product(dy, p.dout[0].data, matrix(n, k, !tb), p.in[1].data, plain(memory::dims{m, k}), p.din[0].data,
                      bf16);
      else  // dA [k,m] = op(B) dY^T
        dA_ = Product(matrix(k, n, tb), p.in[1].data, dyt, p.dout[0].data, plain(memory::dims{k, m}), p.din[0].data,
                      bf16);
    }
    if (p.din[1].present()) {
      if (!tb)  // dB [k,n] = op(A)^T dY
        dB_ = Product(matrix(k, m, !ta), p.in[0].data, dy, p.dout[0].data, plain(memory::dims{k, n}), p.din[1].data,
                      bf16);
      else  // dB [n,k] = dY^T op(A)
        dB_ = Product(dyt, p.dout[0].data, matrix(m, k, ta), p.in[0].data, plain(memory::dims{n, k}), p.din[1].data,
                      bf16);
    }
  }
  void forward() override {
    fwd_.execute(s_);
    s_.wait();
  }
  void backward() override {
    if (dA_) dA_.execute(s_);
    if (dB_) dB_.execute(s_);
    if (sum_c_) sum_c_.execute(s_, cargs_);
    s_.wait();
  }

 private:
  Product fwd_, dA_, dB_;
  dnnl::reduction sum_c_;
  Args cargs_;
};

// Batched MatMul: operands of equal rank (1-D ones promoted) with broadcast batch axes. Backward
// where the gradients need no reduction over broadcast axes: equal batch axes, or B a plain
// matrix (A's batch then folds into its rows).
class BatchedMatmulKernel final : public DnnlNode {
 public:
  BatchedMatmulKernel(const NodeProblem& p, Shape a, Shape b, bool bf16)
      : DnnlNode("matmul" + computed_in(bf16, false)) {
    using namespace dnnl;
    const std::size_t r = std::max(a.size(), b.size());
    while (a.size() < r) a.insert(a.begin(), 1);
    while (b.size() < r) b.insert(b.begin(), 1);
    Shape y = a;
    for (std::size_t i = 0; i + 2 < r; ++i) y[i] = std::max(a[i], b[i]);
    y[r - 1] = b[r - 1];
    fwd_ = Product(plain(a), p.in[0].data, plain(b), p.in[1].data, plain(y), p.out[0].data, bf16);
    if (!p.training) return;
    const std::int64_t k = a[r - 1], n = b[r - 1];
    auto t = [](Shape s) {  // the last two axes swapped, by strides
      memory::dims d = dims_of(s), st = strides_of_dims(d);
      std::swap(d[d.size() - 1], d[d.size() - 2]);
      std::swap(st[st.size() - 1], st[st.size() - 2]);
      return memory::desc(d, dt::f32, st);
    };
    bool b_matrix = true;
    for (std::size_t i = 0; i + 2 < r; ++i) b_matrix = b_matrix && b[i] == 1;
    bool same_batch = true;
    for (std::size_t i = 0; i + 2 < r; ++i) same_batch = same_batch && a[i] == b[i];
    if (p.din[0].present()) {
      // dA = dY B^T: B broadcast over A's batch is fine (a read); A broadcast is not.
      bool a_full = true;
      for (std::size_t i = 0; i + 2 < r; ++i) a_full = a_full && a[i] == y[i];
      if (!a_full) throw Unsupported{};
      dA_ = Product(plain(y), p.dout[0].data, t(b), p.in[1].data, plain(a), p.din[0].data, bf16);
    }
    if (p.din[1].present()) {
      if (same_batch) {
        dB_ = Product(t(a), p.in[0].data, plain(y), p.dout[0].data, plain(b), p.din[1].data, bf16);
      } else if (b_matrix) {
        // dB [k,n] = A^T dY with A's batch folded into its rows.
        const std::int64_t rows = numel(a) / k;
        const memory::desc at({k, rows}, dt::f32, {1, k}), dy = plain(memory::dims{rows, n}),
                                                           db = plain(memory::dims{k, n});
        dB_ = Product(at, p.in[0].data, dy, p.dout[0].data, db, p.din[1].data, bf16);
      } else {
        throw Unsupported{};
      }
    }
  }
  struct Unsupported {};
  void forward() override {
    fwd_.execute(s_);
    s_.wait();
  }
  void backward() override {
    if (dA_) dA_.execute(s_);
    if (dB_) dB_.execute(s_);
    s_.wait();
  }

 private:
  Product fwd_, dA_, dB_;
};

// ---- Pooling ---------------------------------------------------------------------------------------
class PoolKernel final : public PairedNode {
 public:
  PoolKernel(const NodeProblem& p, const ConvGeom& g, dnnl::algorithm alg, bool global)
      : PairedNode((global ? "global pooling" : "pooling") + computed_in(p.in[0].bf16, p.in[0].channels_last)) {
    using namespace dnnl;
    const memory::dims src{g.n, g.c, g.h, g.w}, dst{g.n, g.c, g.p, g.q};
    // Channels-last and bfloat16 (Takes::Same): y as x, a global pool's [N, C, 1, 1] the same bytes
    // in either layout; stored in float32 after a pool over bfloat16 (its H W is 1: the executor
    // keeps it float32), converted from the primitive's bfloat16 one.
    TensorView as_stored = p.in[0];
    const memory::desc x = stored(src, as_stored), y = stored(dst, as_stored);
    as_stored.bf16 = p.out[0].bf16;
    const memory::desc y_u = stored(dst, as_stored);
    // A window that ceil mode adds past the declared padding: more right padding, which oneDNN's
    // max and average-excluding-padding ignore as the reference does.
    const std::int64_t pr_h = std::max(g.pb, (g.p - 1) * g.sh + (g.kh - 1) * g.dh + 1 - g.h - g.pt);
    const std::int64_t pr_w = std::max(g.pr, (g.q - 1) * g.sw + (g.kw - 1) * g.dw + 1 - g.w - g.pl);
    const memory::dims st{g.sh, g.sw}, k{g.kh, g.kw}, dil{g.dh - 1, g.dw - 1}, pl{g.pt, g.pl}, pr{pr_h, pr_w};
    const prop_kind pk = p.training ? prop_kind::forward_training : prop_kind::forward_inference;
    fpd_ = pooling_v2_forward::primitive_desc(pooling_v2_forward::desc(pk, alg, x, y, st, k, dil, pl, pr), engine());
    fwd_ = pooling_v2_forward(fpd_);
    y_.bind(y, y_u, p.out[0].data, false, true);
    fargs_ = {{DNNL_ARG_SRC, user_mem(x, p.in[0].data)}, {DNNL_ARG_DST, y_.prim}};
    if (p.training && alg == algorithm::pooling_max) {
      ws_ = memory(fpd_.workspace_desc(), engine());
      fargs_[DNNL_ARG_WORKSPACE] = ws_;
    }
    if (!p.training || !p.din[0].present()) return;
    bwd_ = pooling_v2_backward(
        pooling_v2_backward::primitive_desc(pooling_v2_backward::desc(alg, x, y, st, k, dil, pl, pr), engine(), fpd_));
    dy_.bind(y, y_u, p.dout[0].data, true, false);
    bargs_ = {{DNNL_ARG_DIFF_DST, dy_.prim}, {DNNL_ARG_DIFF_SRC, user_mem(x, p.din[0].data)}};
    if (ws_) bargs_[DNNL_ARG_WORKSPACE] = ws_;
  }
  void forward() override {
    fwd_.execute(s_, fargs_);
    y_.push(s_);
    s_.wait();
  }
  void backward() override {
    dy_.pull(s_);
    PairedNode::backward();
  }

 private:
  dnnl::pooling_v2_forward::primitive_desc fpd_;
  memory ws_;
  Arg y_, dy_;
};

// ---- Batch and layer normalisation --------------------------------------------------------------------
// In training the optional outputs (the running statistics updated by ONNX's momentum from the
// batch's, which oneDNN leaves as its mean and biased variance; before opset 14 also those) are
// written after the primitive, channel by channel. BatchNormRelu (networks/fuse.hpp, the point's
// fusion = "bn_relu"): the primitive writes y and d500's loop applies the ReLU to it in place, on
// the kernel's OpenMP threads; backward the loop writes dy where y > 0 into x's gradient, which the
// primitive then takes as its incoming gradient and overwrites in place (oneDNN's batch
// normalisation allows it): the normalised output is never stored apart. oneDNN's own
// fuse_norm_relu flag took 4.5 times as long on these plain NCHW layouts (its ncsp kernel:
// docs/performance.md).
class BatchNormKernel final : public PairedNode {
 public:
  void forward() override {
    PairedNode::forward();
    if (relu_) {
      if (half_) {
        auto* y = static_cast<std::uint16_t*>(y_);
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n_; ++i) y[i] = bf16_positive(y[i]) ? y[i] : std::uint16_t{0};
      } else {
        auto* y = static_cast<float*>(y_);
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n_; ++i) y[i] = dev::relu(y[i]);
      }
    }
    if (!training_) return;
    const auto* mean = static_cast<const float*>(mean_.get_data_handle());
    const auto* var = static_cast<const float*>(var_.get_data_handle());
    for (std::int64_t c = 0; c < channels_; ++c) stats_.write(c, mean[c], var[c]);
  }
  BatchNormKernel(const NodeProblem& p, bool training, float eps, bool relu)
      : PairedNode((relu ? "batch normalization, relu in place by d500's loop" : "batch normalization") +
                   computed_in(p.in[0].bf16, p.in[0].channels_last)),
        relu_(relu),
        half_(p.in[0].bf16),
        n_(p.out[0].numel()),
        y_(p.out[0].data),
        stats_(p) {
    using namespace dnnl;
    // x, y and their gradients stored alike (Takes::Same); scale, shift and the statistics float32.
    const memory::desc x = stored(dims_of(*p.in[0].shape), p.in[0]), ch = plain(*p.in[1].shape);
    auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    if (!training) flags = flags | normalization_flags::use_global_stats;
    fpd_ = batch_normalization_forward::primitive_desc(
        batch_normalization_forward::desc(training ? prop_kind::forward_training : prop_kind::forward_inference, x, eps,
                                          flags),
        engine());
    fwd_ = batch_normalization_forward(fpd_);
    fargs_ = {{DNNL_ARG_SRC, user_mem(x, p.in[0].data)},
              {DNNL_ARG_SCALE, user_mem(ch, p.in[1].data)},
              {DNNL_ARG_SHIFT, user_mem(ch, p.in[2].data)},
              {DNNL_ARG_DST, user_mem(x, p.out[0].data)}};
    if (training) {
      mean_ = memory(ch, engine());
      var_ = memory(ch, engine());
    } else {
      mean_ = user_mem(ch, p.in[3].data);
      var_ = user_mem(ch, p.in[4].data);
    }
    fargs_[DNNL_ARG_MEAN] = mean_;
    fargs_[DNNL_ARG_VARIANCE] = var_;
    training_ = training;
    channels_ = numel(*p.in[1].shape);
    if (!p.training) return;
    const bool dx = p.din[0].present(), ds = p.din[1].present(), db = p.din[2].present();
    bwd_ = batch_normalization_backward(batch_normalization_backward::primitive_desc(
        batch_normalization_backward::desc(prop_kind::backward, x, x, eps,
                                           normalization_flags::use_scale | normalization_flags::use_shift),
        engine(), fpd_));
    bargs_ = {{DNNL_ARG_SRC, user_mem(x, p.in[0].data)},
              {DNNL_ARG_DIFF_DST, user_mem(x, p.dout[0].data)},
              {DNNL_ARG_SCALE, user_mem(ch, p.in[1].data)},
              {DNNL_ARG_SHIFT, user_mem(ch, p.in[2].data)},
              {DNNL_ARG_MEAN, mean_},
              {DNNL_ARG_VARIANCE, var_},
              {DNNL_ARG_DIFF_SRC, dx ? user_mem(x, p.din[0].data) : memory(x, engine())},
              {DNNL_ARG_DIFF_SCALE, ds ? user_mem(ch, p.din[1].data) : memory(ch, engine())},
              {DNNL_ARG_DIFF_SHIFT, db ? user_mem(ch, p.din[2].data) : memory(ch, engine())}};
    if (relu_) {  // the masked gradient in x's gradient (or scratch of the kernel's own), in place
      bargs_[DNNL_ARG_DIFF_DST] = bargs_[DNNL_ARG_DIFF_SRC];
      masked_ = bargs_[DNNL_ARG_DIFF_SRC].get_data_handle();
      dy_ = p.dout[0].present() ? p.dout[0].data : nullptr;
    }
  }
  void backward() override {
    if (relu_) relu_gradient(half_, y_, dy_, masked_, nullptr, n_);
    PairedNode::backward();
  }

 private:
  dnnl::batch_normalization_forward::primitive_desc fpd_;
  memory mean_, var_;
  bool relu_, half_;  // half_: x, y and their gradients stored in bfloat16
  std::int64_t n_;
  void* y_;
  const void* dy_ = nullptr;
  void* masked_ = nullptr;
  BatchNormStatistics stats_;
  bool training_ = false;
  std::int64_t channels_ = 0;
};

class LayerNormKernel final : public PairedNode {
 public:
  // Over the axes from `axis` on, as a [outer, inner] matrix normalised along its rows.
  LayerNormKernel(const NodeProblem& p, std::int64_t outer, std::int64_t inner, float eps)
      : PairedNode("layer normalization") {
    using namespace dnnl;
    const memory::desc x = plain(memory::dims{outer, inner}), stat = plain(memory::dims{outer}),
                       sc = plain(memory::dims{inner});
    const bool shift = p.in.size() > 2 && p.in[2].present();
    auto flags = normalization_flags::use_scale;
    if (shift) flags = flags | normalization_flags::use_shift;
    fpd_ = layer_normalization_forward::primitive_desc(
        layer_normalization_forward::desc(p.training ? prop_kind::forward_training : prop_kind::forward_inference, x,
                                          stat, eps, flags),
        engine());
    fwd_ = layer_normalization_forward(fpd_);
    mean_ = memory(stat, engine());
    var_ = memory(stat, engine());
    fargs_ = {{DNNL_ARG_SRC, user_mem(x, p.in[0].data)},
              {DNNL_ARG_SCALE, user_mem(sc, p.in[1].data)},
              {DNNL_ARG_DST, user_mem(x, p.out[0].data)},
              {DNNL_ARG_MEAN, mean_},
              {DNNL_ARG_VARIANCE, var_}};
    if (shift) fargs_[DNNL_ARG_SHIFT] = user_mem(sc, p.in[2].data);
    if (!p.training) return;
    bwd_ = layer_normalization_backward(layer_normalization_backward::primitive_desc(
        layer_normalization_backward::desc(prop_kind::backward, x, x, stat, eps, flags), engine(), fpd_));
    bargs_ = {{DNNL_ARG_SRC, user_mem(x, p.in[0].data)},
              {DNNL_ARG_DIFF_DST, user_mem(x, p.dout[0].data)},
              {DNNL_ARG_SCALE, user_mem(sc, p.in[1].data)},
              {DNNL_ARG_MEAN, mean_},
              {DNNL_ARG_VARIANCE, var_},
              {DNNL_ARG_DIFF_SRC, p.din[0].present() ? user_mem(x, p.din[0].data) : memory(x, engine())},
              {DNNL_ARG_DIFF_SCALE, p.din[1].present() ? user_mem(sc, p.din[1].data) : memory(sc, engine())}};
    if (shift) {
      bargs_[DNNL_ARG_SHIFT] = user_mem(sc, p.in[2].data);
      bargs_[DNNL_ARG_DIFF_SHIFT] = p.din[2].present() ? user_mem(sc, p.din[2].data) : memory(sc, engine());
    }
  }

 private:
  dnnl::layer_normalization_forward::primitive_desc fpd_;
  memory mean_, var_;
};

// ---- Softmax and LogSoftmax over one axis of a [outer, len, inner] view -------------------------------------
class SoftmaxKernel final : public PairedNode {
 public:
  SoftmaxKernel(const NodeProblem& p, bool log) : PairedNode(log ? "log-softmax" : "softmax") {
    using namespace dnnl;
    const Node& n = *p.node;
    const memory::desc x = plain(memory::dims{n.attr_i("_outer", 1), n.attr_i("_len", 1), n.attr_i("_inner", 1)});
    const algorithm alg = log ? algorithm::softmax_log : algorithm::softmax_accurate;
    fpd_ = softmax_v2_forward::primitive_desc(
        softmax_v2_forward::desc(p.training ? prop_kind::forward_training : prop_kind::forward_inference, alg, x, x, 1),
        engine());
    fwd_ = softmax_v2_forward(fpd_);
    fargs_ = {{DNNL_ARG_SRC, user_mem(x, p.in[0].data)}, {DNNL_ARG_DST, user_mem(x, p.out[0].data)}};
    if (!p.training || !p.din[0].present()) return;
    bwd_ = softmax_v2_backward(
        softmax_v2_backward::primitive_desc(softmax_v2_backward::desc(alg, x, x, x, 1), engine(), fpd_));
    bargs_ = {{DNNL_ARG_DST, user_mem(x, p.out[0].data)},
              {DNNL_ARG_DIFF_DST, user_mem(x, p.dout[0].data)},
              {DNNL_ARG_DIFF_SRC, user_mem(x, p.din[0].data)}};
  }

 private:
  dnnl::softmax_v2_forward::primitive_desc fpd_;
};

// ---- Element-wise -------------------------------------------------------------------------------------
class EltwiseKernel final : public PairedNode {
 public:
  // `use_dst`: the backward algorithm reads the output (as the op's saved tensor is).
  EltwiseKernel(const NodeProblem& p, dnnl::algorithm fwd_alg, dnnl::algorithm bwd_alg, float alpha, float beta,
                bool use_dst, const std::string& what)
      : PairedNode(what + computed_in(p.in[0].bf16, false)) {
    using namespace dnnl;
    const memory::desc x = flat(p.in[0]);  // y and the gradients stored alike (Takes::Same)
    fpd_ = eltwise_forward::primitive_desc(
        eltwise_forward::desc(p.training ? prop_kind::forward_training : prop_kind::forward_inference, fwd_alg, x,
                              alpha, beta),
        engine());
    fwd_ = eltwise_forward(fpd_);
    fargs_ = {{DNNL_ARG_SRC, user_mem(x, p.in[0].data)}, {DNNL_ARG_DST, user_mem(x, p.out[0].data)}};
    if (!p.training || !p.din[0].present()) return;
    bwd_ = eltwise_backward(
        eltwise_backward::primitive_desc(eltwise_backward::desc(bwd_alg, x, x, alpha, beta), engine(), fpd_));
    bargs_ = {{use_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, user_mem(x, use_dst ? p.out[0].data : p.in[0].data)},
              {DNNL_ARG_DIFF_DST, user_mem(x, p.dout[0].data)},
              {DNNL_ARG_DIFF_SRC, user_mem(x, p.din[0].data)}};
  }

 private:
  dnnl::eltwise_forward::primitive_desc fpd_;
};

// ---- Binary Add / Sub / Mul / Div with broadcasting of the second operand ----------------------------------
// Shapes right-aligned to the output's rank.
Shape aligned(const Shape& s, std::size_t r) {
  Shape a(r - s.size(), 1);
  a.insert(a.end(), s.begin(), s.end());
  return a;
}

class BinaryKernel final : public DnnlNode {
 public:
  // src0 must have the output's shape; `swap` when the node's first input is the broadcast one
  // (commutative ops only). Backward: Add and Sub hand dY (summed over broadcast axes) back, Mul
  // multiplies it by the other operand, Div by 1/B (B's own gradient is left to the reference).
  BinaryKernel(const NodeProblem& p, dnnl::algorithm alg, bool swap)
      : DnnlNode("binary" + computed_in(p.out[0].bf16, false)) {
    using namespace dnnl;
    const Shape& ys = *p.out[0].shape;
    const std::size_t r = ys.size();
    const std::size_t i0 = swap ? 1 : 0, i1 = swap ? 0 : 1;
    // In bfloat16 only as a same-shape Add whose tensors are all so (Takes::Same).
    const bool half = p.out[0].bf16;
    const memory::desc y = plain(aligned(ys, r), half), b = plain(aligned(*p.in[i1].shape, r), half);
    prim_ = binary(binary::primitive_desc(binary::desc(alg, y, b, y), engine()));
    fargs_ = {{DNNL_ARG_SRC_0, user_mem(y, p.in[i0].data)},
              {DNNL_ARG_SRC_1, user_mem(b, p.in[i1].data)},
              {DNNL_ARG_DST, user_mem(y, p.out[0].data)}};
    if (!p.training) return;
    for (std::size_t i = 0; i < 2; ++i) {
      if (!p.din[i].present()) continue;
      const memory::desc di = plain(aligned(*p.in[i].shape, r), half);
      const bool full = di == y;
      Grad gr;
      memory dy = user_mem(y, p.dout[0].data), target = user_mem(di, p.din[i].data);
      memory src = dy;  // what is summed over the broadcast axes (or copied)
      if (alg == algorithm::binary_mul || alg == algorithm::binary_div) {
        // dA = dY * B, dB = dY * A for Mul; dA = dY / B for Div.
        if (alg == algorithm::binary_div && i == 1) throw Unsupported{};
        const std::size_t other = 1 - i;
        const memory::desc od = plain(aligned(*p.in[other].shape, r));
        if (!(od == y) && !(di == y)) throw Unsupported{};  // both broadcast: no single primitive
        gr.tmp = full ? target : memory(y, engine());
        const memory::desc s0 = od == y ? od : y, s1 = od == y ? y : od;
        gr.op = binary(binary::primitive_desc(binary::desc(alg, s0, s1, y), engine()));
        gr.op_args = {{DNNL_ARG_SRC_0, od == y ? user_mem(od, p.in[other].data) : dy},
                      {DNNL_ARG_SRC_1, od == y ? dy : user_mem(od, p.in[other].data)},
                      {DNNL_ARG_DST, gr.tmp}};
        if (alg == algorithm::binary_div) {  // dY / B: dY must be src0
          gr.op = binary(binary::primitive_desc(binary::desc(alg, y, od, y), engine()));
          gr.op_args = {{DNNL_ARG_SRC_0, dy}, {DNNL_ARG_SRC_1, user_mem(od, p.in[other].data)}, {DNNL_ARG_DST, gr.tmp}};
        }
        src = gr.tmp;
      }
      const float scale = alg == algorithm::binary_sub && i == 1 ? -1.0f : 1.0f;
      if (!full || src.get_data_handle() != target.get_data_handle() || scale != 1.0f) {
        primitive_attr attr;
        if (scale != 1.0f) {
          post_ops po;
          po.append_eltwise(1.0f, algorithm::eltwise_linear, scale, 0.0f);
          attr.set_post_ops(po);
        }
        if (full) {
          gr.reduce = reorder(reorder::primitive_desc(engine(), y, engine(), di, attr));
        } else {
          gr.reduce = reduction(
              reduction::primitive_desc(reduction::desc(algorithm::reduction_sum, y, di, 0, 0), attr, engine()));
        }
        gr.reduce_args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, target}, {DNNL_ARG_FROM, src}, {DNNL_ARG_TO, target}};
      }
      grads_.push_back(std::move(gr));
    }
  }
  struct Unsupported {};
  void forward() override {
    prim_.execute(s_, fargs_);
    s_.wait();
  }
  void backward() override {
    for (auto& g : grads_) {
      if (g.op) g.op.execute(s_, g.op_args);
      if (g.reduce) g.reduce.execute(s_, g.reduce_args);
    }
    s_.wait();
  }

 private:
  struct Grad {
    dnnl::primitive op, reduce;
    Args op_args, reduce_args;
    memory tmp;
  };
  dnnl::binary prim_;
  Args fargs_;
  std::vector<Grad> grads_;
};

// AddRelu (networks/fuse.hpp, the point's fusion = "add_relu"): the binary add with a ReLU
// post-op, one pass; backward one pass too, on the kernel's OpenMP threads: dy where y > 0 into
// both operands' gradients (oneDNN's ReLU gradient and a reorder copying it took longer here than
// the Add and Relu nodes' own backward passes: docs/performance.md).
class AddReluKernel final : public DnnlNode {
 public:
  explicit AddReluKernel(const NodeProblem& p)
      : DnnlNode("binary add with relu post-op" + computed_in(p.out[0].bf16, false)),
        half_(p.out[0].bf16),
        n_(p.out[0].numel()),
        y_(p.out[0].data),
        dy_(p.training && p.dout[0].present() ? p.dout[0].data : nullptr),
        d0_(p.training ? p.din[0].data : nullptr),
        d1_(p.training ? p.din[1].data : nullptr) {
    using namespace dnnl;
    const memory::desc x = flat(p.out[0]);  // the operands stored alike (Takes::Same)
    primitive_attr attr;
    post_ops po;
    po.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(po);
    fwd_ = binary(binary::primitive_desc(binary::desc(algorithm::binary_add, x, x, x), attr, engine()));
    fargs_ = {{DNNL_ARG_SRC_0, user_mem(x, p.in[0].data)},
              {DNNL_ARG_SRC_1, user_mem(x, p.in[1].data)},
              {DNNL_ARG_DST, user_mem(x, p.out[0].data)}};
  }
  void forward() override {
    fwd_.execute(s_, fargs_);
    s_.wait();
  }
  void backward() override {
    if (void* first = d0_ ? d0_ : d1_) relu_gradient(half_, y_, dy_, first, d0_ ? d1_ : nullptr, n_);
  }
  std::string impl() const override { return DnnlNode::impl() + "; backward d500's loop"; }

 private:
  bool half_;
  std::int64_t n_;
  const void *y_, *dy_;
  void *d0_, *d1_;
  dnnl::primitive fwd_;
  Args fargs_;
};

// ---- Transpose: a reorder from a permuted view --------------------------------------------------------
class TransposeKernel final : public PairedNode {
 public:
  TransposeKernel(const NodeProblem& p) : PairedNode("reorder (transpose)") {
    const Shape& x = *p.in[0].shape;
    const auto& perm = p.node->attrs.at("perm").ints;
    const memory::dims xs = strides_of_dims(dims_of(x));
    memory::dims yd, view_st;
    for (auto a : perm)
      yd.push_back(x[static_cast<std::size_t>(a)]), view_st.push_back(xs[static_cast<std::size_t>(a)]);
    const memory::desc view(yd, dt::f32, view_st), y = plain(yd);
    fwd_ = dnnl::reorder(user_mem(view, p.in[0].data), user_mem(y, p.out[0].data));
    fargs_ = {{DNNL_ARG_FROM, user_mem(view, p.in[0].data)}, {DNNL_ARG_TO, user_mem(y, p.out[0].data)}};
    if (!p.training || !p.din[0].present()) return;
    // dX through the same permuted view: dX viewed as Y's axes is written from dY.
    bwd_ = dnnl::reorder(user_mem(y, p.dout[0].data), user_mem(view, p.din[0].data));
    bargs_ = {{DNNL_ARG_FROM, user_mem(y, p.dout[0].data)}, {DNNL_ARG_TO, user_mem(view, p.din[0].data)}};
  }
};

// ---- ReduceMean / ReduceSum (forward only) ---------------------------------------------------------------
class ReduceKernel final : public PairedNode {
 public:
  ReduceKernel(const NodeProblem& p, bool mean) : PairedNode("reduction") {
    const Shape& x = *p.in[0].shape;
    Shape kept = x;
    for (auto a : p.node->attrs.at("axes").ints) kept[static_cast<std::size_t>(a)] = 1;
    const memory::desc xd = plain(x), yd = plain(kept);
    fwd_ = dnnl::reduction(dnnl::reduction::primitive_desc(
        dnnl::reduction::desc(mean ? dnnl::algorithm::reduction_mean : dnnl::algorithm::reduction_sum, xd, yd, 0, 0),
        engine()));
    fargs_ = {{DNNL_ARG_SRC, user_mem(xd, p.in[0].data)}, {DNNL_ARG_DST, user_mem(yd, p.out[0].data)}};
  }
};

bool all_float(const NodeProblem& p) {
  for (const auto& t : p.in)
    if (t.present() && t.dtype != DType::F32) return false;
  for (const auto& t : p.out)
    if (t.present() && t.dtype != DType::F32) return false;
  return true;
}

std::unique_ptr<NodeKernel> make(const NodeProblem& p) {
  using dnnl::algorithm;
  const Node& n = *p.node;
  const std::string& op = n.op;
  const bool training = p.training;
  const std::size_t rank = p.in.empty() ? 0 : p.in[0].shape->size();
  if (!all_float(p)) return nullptr;
  const bool bf16 = p.params && bf16_math(*p.params);
  for (std::size_t j = 1; j < p.out.size(); ++j)  // optional extra outputs: BatchNormalization's statistics only
    if (p.out[j].present() && !is_batch_norm(op)) return nullptr;
  if (op == "Conv" && rank <= 4)
    return std::make_unique<ConvKernel>(p, conv_geom(n, *p.in[0].shape, (*p.in[1].shape)[0]), bf16);
  if (op == "Gemm") {
    const Shape& a = *p.in[0].shape;
    const Shape& b = *p.in[1].shape;
    const bool ta = n.attr_i("transA", 0) != 0, tb = n.attr_i("transB", 0) != 0;
    const bool bias = p.in.size() > 2 && p.in[2].present();
    if (n.attr_f("alpha", 1.0) != 1.0 || (bias && n.attr_f("beta", 1.0) != 1.0)) return nullptr;
    if (bias && p.in[2].shape->size() == 2 && (*p.in[2].shape)[0] != 1 && (*p.in[2].shape)[0] != (ta ? a[1] : a[0]))
      return nullptr;
    return std::make_unique<MatmulKernel>(p, ta ? a[1] : a[0], tb ? b[0] : b[1], ta ? a[0] : a[1], ta, tb, bias, bf16);
  }
  if (op == "MatMul") {
    Shape a = *p.in[0].shape, b = *p.in[1].shape;
    if (a.size() < 2 || b.size() < 2) return nullptr;  // 1-D operands: the reference
    try {
      return std::make_unique<BatchedMatmulKernel>(p, a, b, bf16);
    } catch (const BatchedMatmulKernel::Unsupported&) {
      return nullptr;
    }
  }
  if ((op == "MaxPool" || op == "AveragePool") && rank <= 4) {
    const ConvGeom g = conv_geom(n, *p.in[0].shape, (*p.in[0].shape)[1]);
    const bool include_pad = n.attr_i("count_include_pad", 0) != 0;
    if (op == "AveragePool" && include_pad && n.attr_i("ceil_mode", 0)) return nullptr;
    const algorithm alg = op == "MaxPool" ? algorithm::pooling_max
                          : include_pad   ? algorithm::pooling_avg_include_padding
                                          : algorithm::pooling_avg_exclude_padding;
    return std::make_unique<PoolKernel>(p, g, alg, false);
  }
  if ((op == "GlobalAveragePool" || op == "GlobalMaxPool") && rank >= 3 && rank <= 4) {
    const Shape& x = *p.in[0].shape;
    ConvGeom g;
    g.n = x[0], g.c = x[1], g.h = rank == 4 ? x[2] : 1, g.w = x.back();
    g.k = g.c, g.kh = g.h, g.kw = g.w, g.sh = g.h, g.sw = g.w, g.p = 1, g.q = 1;
    return std::make_unique<PoolKernel>(
        p, g, op == "GlobalMaxPool" ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding, true);
  }
  if (is_batch_norm(op) && rank >= 2 && rank <= 5) {
    const bool bn_training = training || n.attr_i("training_mode", 0) != 0;
    const auto eps = static_cast<float>(n.attr_f("epsilon", 1e-5));
    // NCHW with planes: d500's loops (nchw_batch_norm.cpp; oneDNN has no JIT kernel for it).
    if (rank >= 3 && !p.in[0].channels_last && p.in.size() >= 5)
      return make_nchw_batch_norm(p, bn_training, eps, op == "BatchNormRelu");
    return std::make_unique<BatchNormKernel>(p, bn_training, eps, op == "BatchNormRelu");
  }
  if (op == "LayerNormalization") {
    const Shape& x = *p.in[0].shape;
    const auto axis = static_cast<std::size_t>(n.attr_i("axis", -1));
    std::int64_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < x.size(); ++i) (i < axis ? outer : inner) *= x[i];
    return std::make_unique<LayerNormKernel>(p, outer, inner, static_cast<float>(n.attr_f("epsilon", 1e-5)));
  }
  if (op == "Softmax" || op == "LogSoftmax") return std::make_unique<SoftmaxKernel>(p, op == "LogSoftmax");
  struct Elt {
    const char* op;
    algorithm fwd, bwd;
    bool use_dst;
    const char* what;
  };
  static const Elt elts[] = {
      {"Relu", algorithm::eltwise_relu, algorithm::eltwise_relu, false, "eltwise relu"},
      {"LeakyRelu", algorithm::eltwise_relu, algorithm::eltwise_relu, false, "eltwise relu (leaky)"},
      {"Sigmoid", algorithm::eltwise_logistic_use_dst_for_bwd, algorithm::eltwise_logistic_use_dst_for_bwd, true,
       "eltwise logistic"},
      {"Tanh", algorithm::eltwise_tanh_use_dst_for_bwd, algorithm::eltwise_tanh_use_dst_for_bwd, true, "eltwise tanh"},
      {"Sqrt", algorithm::eltwise_sqrt_use_dst_for_bwd, algorithm::eltwise_sqrt_use_dst_for_bwd, true, "eltwise sqrt"},
      {"Exp", algorithm::eltwise_exp_use_dst_for_bwd, algorithm::eltwise_exp_use_dst_for_bwd, true, "eltwise exp"},
      {"Log", algorithm::eltwise_log, algorithm::eltwise_log, false, "eltwise log"},
      {"Abs", algorithm::eltwise_abs, algorithm::eltwise_abs, false, "eltwise abs"},
      {"Neg", algorithm::eltwise_linear, algorithm::eltwise_linear, false, "eltwise linear"},
      {"HardSwish", algorithm::eltwise_hardswish, algorithm::eltwise_hardswish, false, "eltwise hardswish"},
  };
  for (const auto& e : elts)
    if (op == e.op) {
      const float alpha = op == "LeakyRelu" ? static_cast<float>(n.attr_f("alpha", 0.01)) : op == "Neg" ? -1.0f : 0.0f;
      return std::make_unique<EltwiseKernel>(p, e.fwd, e.bwd, alpha, 0.0f, e.use_dst, e.what);
    }
  if (op == "AddRelu") return std::make_unique<AddReluKernel>(p);  // two operands of one shape
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    const Shape& ys = *p.out[0].shape;
    const bool first_full = *p.in[0].shape == ys, second_full = *p.in[1].shape == ys;
    const bool commutative = op == "Add" || op == "Mul";
    if (!first_full && !(second_full && commutative)) return nullptr;
    const algorithm alg = op == "Add"   ? algorithm::binary_add
                          : op == "Sub" ? algorithm::binary_sub
                          : op == "Mul" ? algorithm::binary_mul
                                        : algorithm::binary_div;
    try {
      return std::make_unique<BinaryKernel>(p, alg, !first_full);
    } catch (const BinaryKernel::Unsupported&) {
      return nullptr;
    }
  }
  if (op == "Transpose") return std::make_unique<TransposeKernel>(p);
  if ((op == "ReduceMean" || op == "ReduceSum") && !training)
    return std::make_unique<ReduceKernel>(p, op == "ReduceMean");
  return nullptr;
}

}  // namespace

Takes onednn_takes(const NodeProblem& p) {
  const std::string& op = p.node->op;
  if (p.in.empty() || p.in[0].dtype != DType::F32 || p.in[0].shape->size() != 4 || !all_float(p)) return Takes::Never;
  if (op == "Conv") return p.in.size() >= 2 && p.in[1].shape->size() == 4 ? Takes::Each : Takes::Never;
  // The nodes make() gives oneDNN's per-channel primitives (with their layout) or an element-wise
  // kernel, which computes the same on either layout when all its tensors share one.
  if (is_batch_norm(op)) return p.in.size() >= 5 ? Takes::Same : Takes::Never;
  if (op == "Relu" || op == "AddRelu" || op == "GlobalAveragePool" || op == "GlobalMaxPool") return Takes::Same;
  if (op == "Add") return p.in.size() == 2 && *p.in[1].shape == *p.in[0].shape ? Takes::Same : Takes::Never;
  if (op == "MaxPool" || op == "AveragePool") {
    const bool indices = p.out.size() > 1 && p.out[1].present();
    const bool refused =
        op == "AveragePool" && p.node->attr_i("count_include_pad", 0) && p.node->attr_i("ceil_mode", 0);
    return indices || refused ? Takes::Never : Takes::Same;
  }
  return Takes::Never;
}

Takes onednn_bf16_storage(const NodeProblem& p) { return onednn_takes(p); }

std::unique_ptr<NodeKernel> make_onednn_node_kernel(const NodeProblem& p, int threads) {
  omp_set_num_threads(threads);
  try {
    return make(p);
  } catch (const dnnl::error& e) {
    const bool bf16 = p.params && bf16_math(*p.params);
    if (bf16 && !onednn_isa_has_bf16())
      throw Error("oneDNN " + p.node->label() + ": " + e.what() + " (math = \"bf16\": oneDNN " +
                  std::to_string(dnnl_version()->major) + "." + std::to_string(dnnl_version()->minor) +
                  " computes in bfloat16 only on CPUs with AVX-512, and this one runs its " + onednn_isa() +
                  " kernels: give this point math = \"fp32\", or run it on an AVX-512 CPU)");
    throw Error("oneDNN " + p.node->label() + ": " + e.what());
  }
}

}  // namespace d500
