// Matrix products: Gemm (alpha op(A) op(B) + beta C) and MatMul (numpy's matmul: batched, with
// broadcast batch axes and 1-D operands promoted). Work: 2 M N K per product forward, twice that
// backward (both operands' gradients).
#include "backends/reference/ops_common.hpp"

namespace d500::ref {
namespace {

struct GemmDims {
  I m, n, k;
  bool ta, tb;
};
GemmDims gemm_dims(const NodeProblem& p) {
  const Shape& a = shape_in(p, 0);
  const Shape& b = shape_in(p, 1);
  GemmDims d;
  d.ta = p.node->attr_i("transA", 0) != 0;
  d.tb = p.node->attr_i("transB", 0) != 0;
  d.m = d.ta ? a[1] : a[0];
  d.k = d.ta ? a[0] : a[1];
  d.n = d.tb ? b[0] : b[1];
  return d;
}

template <class T>
void gemm_fwd(const NodeProblem& p, T*) {
  const GemmDims d = gemm_dims(p);
  const T alpha = static_cast<T>(p.node->attr_f("alpha", 1.0));
  T beta = static_cast<T>(p.node->attr_f("beta", 1.0));
  T* y = out<T>(p, 0);
  const bool has_c = p.in.size() > 2 && p.in[2].present();
  if (has_c) {
    Dims ys;
    ys.push_back(d.m);
    ys.push_back(d.n);
    const T* c = cin<T>(p, 2);
    for_each_broadcast<1>(ys, {bstrides(Dims(shape_in(p, 2)), ys)},
                          [&](I pos, const std::array<I, 1>& o) { y[pos] = c[o[0]]; });
  } else {
    beta = T(0);
  }
  gemm<T>(d.ta, d.tb, d.m, d.n, d.k, alpha, cin<T>(p, 0), d.ta ? d.m : d.k, cin<T>(p, 1), d.tb ? d.k : d.n, beta, y,
          d.n);
}

template <class T>
void gemm_bwd(const NodeProblem& p, T*) {
  const GemmDims d = gemm_dims(p);
  const T alpha = static_cast<T>(p.node->attr_f("alpha", 1.0));
  const T beta = static_cast<T>(p.node->attr_f("beta", 1.0));
  const T* a = cin<T>(p, 0);
  const T* b = cin<T>(p, 1);
  const T* dy = dout<T>(p, 0);
  const I M = d.m, N = d.n, K = d.k;
  if (T* da = din<T>(p, 0)) {
    if (!dy)
      std::fill(da, da + M * K, T(0));
    else if (!d.ta)
      gemm<T>(false, !d.tb, M, K, N, alpha, dy, N, b, d.tb ? K : N, T(0), da, K);  // dY op(B)^T
    else
      gemm<T>(d.tb, true, K, M, N, alpha, b, d.tb ? K : N, dy, N, T(0), da, M);  // op(B) dY^T
  }
  if (T* db = din<T>(p, 1)) {
    if (!dy)
      std::fill(db, db + K * N, T(0));
    else if (!d.tb)
      gemm<T>(!d.ta, false, K, N, M, alpha, a, d.ta ? M : K, dy, N, T(0), db, N);  // op(A)^T dY
    else
      gemm<T>(true, d.ta, N, K, M, alpha, dy, N, a, d.ta ? M : K, T(0), db, K);  // dY^T op(A)
  }
  if (T* dc = din<T>(p, 2)) {
    const I nc = p.in[2].numel();
    if (!dy) {
      std::fill(dc, dc + nc, T(0));
      return;
    }
    Dims ys;
    ys.push_back(M);
    ys.push_back(N);
    reduce_to(dy, ys, dc, Dims(shape_in(p, 2)));
    for (I i = 0; i < nc; ++i) dc[i] *= beta;
  }
}

void infer_gemm(InferCtx& c) {
  c.require_float(0, c.n_in());
  const Shape& a = c.shape(0);
  const Shape& b = c.shape(1);
  if (a.size() != 2 || b.size() != 2)
    c.fail("A and B must be matrices (got " + shape_str(a) + " and " + shape_str(b) + ")");
  const bool ta = c.node.attr_i("transA", 0) != 0, tb = c.node.attr_i("transB", 0) != 0;
  const I m = ta ? a[1] : a[0], k = ta ? a[0] : a[1], kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb)
    c.fail("inner dimensions differ: op(A) is " + std::to_string(m) + "x" + std::to_string(k) + ", op(B) " +
           std::to_string(kb) + "x" + std::to_string(n));
  if (c.has_in(2)) {
    const Shape ys{m, n};
    if (broadcast_shapes(c.shape(2), ys, c.node.label()) != ys)
      c.fail("C " + shape_str(c.shape(2)) + " does not broadcast to " + shape_str(ys));
  }
  c.set(0, DType::F32, {m, n});
}

double gemm_flops(const NodeProblem& p, bool backward) {
  const GemmDims d = gemm_dims(p);
  return (backward ? 4.0 : 2.0) * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k);
}

// ---- MatMul -----------------------------------------------------------------------------------
struct MatMulDims {
  I m = 0, n = 0, k = 0;
  Dims a_batch, b_batch, batch;  // batch axes of A, B and the output
};
// Without allocation (it runs inside the timed kernels); infer_matmul checks the shapes first.
MatMulDims matmul_dims(const Shape& a, const Shape& b) {
  MatMulDims d;
  Dims sa(a), sb(b);
  if (sa.size() == 1) {  // [K] -> [1, K]
    sa[1] = sa[0];
    sa[0] = 1;
    sa.n = 2;
  }
  if (sb.size() == 1) sb.push_back(1);  // [K] -> [K, 1]
  d.m = sa[sa.size() - 2];
  d.k = sa.back();
  d.n = sb.back();
  for (std::size_t i = 0; i + 2 < sa.size(); ++i) d.a_batch.push_back(sa[i]);
  for (std::size_t i = 0; i + 2 < sb.size(); ++i) d.b_batch.push_back(sb[i]);
  const std::size_t r = std::max(d.a_batch.size(), d.b_batch.size());
  for (std::size_t i = 0; i < r; ++i) {
    const I x = i + d.a_batch.size() < r ? 1 : d.a_batch[i + d.a_batch.size() - r];
    const I y = i + d.b_batch.size() < r ? 1 : d.b_batch[i + d.b_batch.size() - r];
    d.batch.push_back(x == 1 ? y : x);
  }
  return d;
}
MatMulDims matmul_dims(const NodeProblem& p) { return matmul_dims(shape_in(p, 0), shape_in(p, 1)); }

// Calls f(index of the output matrix, of A's, of B's) for every product of the batch.
template <class F>
void each_product(const MatMulDims& d, F&& f) {
  if (d.batch.empty()) {
    f(I{0}, I{0}, I{0});
    return;
  }
  for_each_broadcast<2>(d.batch, {bstrides(d.a_batch, d.batch), bstrides(d.b_batch, d.batch)},
                        [&](I pos, const std::array<I, 2>& o) { f(pos, o[0], o[1]); });
}

template <class T>
void matmul_fwd(const NodeProblem& p, T*) {
  const MatMulDims d = matmul_dims(p);
  const T* a = cin<T>(p, 0);
  const T* b = cin<T>(p, 1);
  T* y = out<T>(p, 0);
  each_product(d, [&](I yi, I ai, I bi) {
    gemm<T>(false, false, d.m, d.n, d.k, T(1), a + ai * d.m * d.k, d.k, b + bi * d.k * d.n, d.n, T(0),
            y + yi * d.m * d.n, d.n);
  });
}

template <class T>
void matmul_bwd(const NodeProblem& p, T*) {
  const MatMulDims d = matmul_dims(p);
  const T* a = cin<T>(p, 0);
  const T* b = cin<T>(p, 1);
  const T* dy = dout<T>(p, 0);
  T* da = din<T>(p, 0);
  T* db = din<T>(p, 1);
  if (da) std::fill(da, da + p.in[0].numel(), T(0));
  if (db) std::fill(db, db + p.in[1].numel(), T(0));
  if (!dy) return;
  // Products that share an operand through broadcasting add their gradients (beta = 1).
  each_product(d, [&](I yi, I ai, I bi) {
    const T* g = dy + yi * d.m * d.n;
    if (da) gemm<T>(false, true, d.m, d.k, d.n, T(1), g, d.n, b + bi * d.k * d.n, d.n, T(1), da + ai * d.m * d.k, d.k);
    if (db) gemm<T>(true, false, d.k, d.n, d.m, T(1), a + ai * d.m * d.k, d.k, g, d.n, T(1), db + bi * d.k * d.n, d.n);
  });
}

void infer_matmul(InferCtx& c) {
  c.require_float(0, 2);
  const Shape& a = c.shape(0);
  const Shape& b = c.shape(1);
  if (a.empty() || b.empty()) c.fail("its operands must have at least one axis");
  const Shape sa = a.size() == 1 ? Shape{1, a[0]} : a, sb = b.size() == 1 ? Shape{b[0], 1} : b;
  if (sa.size() > 8 || sb.size() > 8) c.fail("operands of more than 8 axes are not supported");
  if (sa.back() != sb[sb.size() - 2]) c.fail("inner dimensions differ (" + shape_str(a) + " x " + shape_str(b) + ")");
  const Shape y_batch =
      broadcast_shapes(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2), c.node.label());
  const MatMulDims d = matmul_dims(a, b);
  Shape y = y_batch;
  if (a.size() > 1) y.push_back(d.m);
  if (b.size() > 1) y.push_back(d.n);
  c.set(0, DType::F32, y);
}

double matmul_flops(const NodeProblem& p, bool backward) {
  const MatMulDims d = matmul_dims(p);
  return (backward ? 4.0 : 2.0) * static_cast<double>(d.batch.count()) * static_cast<double>(d.m) *
         static_cast<double>(d.n) * static_cast<double>(d.k);
}

}  // namespace

void add_linalg_ops(std::vector<OpSchema>& t) {
  t.push_back(OpSchema{.op = "Gemm",
                       .since = 7,
                       .infer = infer_gemm,
                       D500_FWD(gemm_fwd),
                       .bwd_f = gemm_bwd<float>,
                       .bwd_d = gemm_bwd<double>,
                       .flops = gemm_flops,
                       .diff_in = 7,
                       .saved_in = 3});
  t.push_back(OpSchema{.op = "MatMul",
                       .since = 1,
                       .infer = infer_matmul,
                       D500_FWD(matmul_fwd),
                       .bwd_f = matmul_bwd<float>,
                       .bwd_d = matmul_bwd<double>,
                       .flops = matmul_flops,
                       .diff_in = 3,
                       .saved_in = 3});
}

}  // namespace d500::ref
