// The `blas` backend's level-1 node kernels: the products of a network through OpenBLAS.
// Convolutions lower each image and group with the reference's im2col (its scratch allocated
// with the kernel, untimed) to cblas_sgemm, forward and both backward passes (a bias's gradient
// is an sgemv against ones); Gemm and MatMul are sgemm calls, batched MatMul one per product.
// Every other node runs on the reference (d500's executor says so per node).
#include <cblas.h>

#include "backends/blas/blas_backend.hpp"
#include "backends/conv_geom.hpp"

namespace d500 {
namespace {

using I = std::int64_t;

CBLAS_TRANSPOSE tr(bool t) { return t ? CblasTrans : CblasNoTrans; }
// C [m,n] = alpha op(A) op(B) + beta C, row-major, op(A) m x k.
void sgemm(bool ta, bool tb, I m, I n, I k, float alpha, const float* a, I lda, const float* b, I ldb, float beta,
           float* c, I ldc) {
  cblas_sgemm(CblasRowMajor, tr(ta), tr(tb), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

bool direct(const ConvGeom& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.pb == 0 && g.pr == 0;
}

class BlasGraphConv final : public NodeKernel {
 public:
  BlasGraphConv(const NodeProblem& p, const ConvGeom& g) : p_(p), g_(g) {
    col_.resize(static_cast<std::size_t>(direct(g) ? 0 : g.cg() * g.kh * g.kw * g.p * g.q));
    ones_.assign(static_cast<std::size_t>(g.p * g.q), 1.0f);
  }
  void forward() override {
    const float* x = p_.in[0].as<const float>();
    const float* w = p_.in[1].as<const float>();
    const float* b = p_.in.size() > 2 && p_.in[2].present() ? p_.in[2].as<const float>() : nullptr;
    float* y = p_.out[0].as<float>();
    const I PQ = g_.p * g_.q, CG = g_.cg(), KG = g_.kg(), R = CG * g_.kh * g_.kw;
    for (I n = 0; n < g_.n; ++n)
      for (I grp = 0; grp < g_.groups; ++grp) {
        const float* src = direct(g_) ? x + (n * g_.c + grp * CG) * g_.h * g_.w : col_.data();
        if (!direct(g_)) ref::im2col(g_, x, n, grp, col_.data());
        float* yg = y + (n * g_.k + grp * KG) * PQ;
        // Y_g = W_g col, plus the bias broadcast along the image (a rank-1 update with ones).
        if (b) {
          sgemm(false, false, KG, PQ, 1, 1.0f, b + grp * KG, 1, ones_.data(), PQ, 0.0f, yg, PQ);
          sgemm(false, false, KG, PQ, R, 1.0f, w + grp * KG * R, R, src, PQ, 1.0f, yg, PQ);
        } else {
          sgemm(false, false, KG, PQ, R, 1.0f, w + grp * KG * R, R, src, PQ, 0.0f, yg, PQ);
        }
      }
  }
  void backward() override {
    const float* x = p_.in[0].as<const float>();
    const float* w = p_.in[1].as<const float>();
    const float* dy = p_.dout[0].as<const float>();
    float* dx = p_.din[0].as<float>();
    float* dw = p_.din[1].as<float>();
    float* db = p_.din.size() > 2 ? p_.din[2].as<float>() : nullptr;
    const I PQ = g_.p * g_.q, CG = g_.cg(), KG = g_.kg(), R = CG * g_.kh * g_.kw;
    if (dx) std::fill(dx, dx + g_.n * g_.c * g_.h * g_.w, 0.0f);
    for (I n = 0; n < g_.n; ++n)
      for (I grp = 0; grp < g_.groups; ++grp) {
        const float* dyg = dy + (n * g_.k + grp * KG) * PQ;
        const float beta = n == 0 ? 0.0f : 1.0f;  // the weights' gradients add over the batch
        if (dx) {
          float* dst = direct(g_) ? dx + (n * g_.c + grp * CG) * g_.h * g_.w : col_.data();
          sgemm(true, false, R, PQ, KG, 1.0f, w + grp * KG * R, R, dyg, PQ, 0.0f, dst, PQ);
          if (!direct(g_)) ref::col2im(g_, col_.data(), n, grp, dx);
        }
        if (dw) {
          const float* src = direct(g_) ? x + (n * g_.c + grp * CG) * g_.h * g_.w : col_.data();
          if (!direct(g_)) ref::im2col(g_, x, n, grp, col_.data());
          sgemm(false, true, KG, R, PQ, 1.0f, dyg, PQ, src, PQ, beta, dw + grp * KG * R, R);
        }
        if (db)
          cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(KG), static_cast<int>(PQ), 1.0f, dyg,
                      static_cast<int>(PQ), ones_.data(), 1, beta, db + grp * KG, 1);
      }
  }
  std::string impl() const override { return "blas sgemm (im2col)"; }

 private:
  NodeProblem p_;
  ConvGeom g_;
  std::vector<float> col_, ones_;
};

// Gemm: Y = alpha op(A) op(B) + beta C with C of shape [n] or [m, n] (other broadcasts: the reference).
class BlasGraphGemm final : public NodeKernel {
 public:
  BlasGraphGemm(const NodeProblem& p) : p_(p) {
    const Shape& a = *p.in[0].shape;
    const Shape& b = *p.in[1].shape;
    ta_ = p.node->attr_i("transA", 0) != 0, tb_ = p.node->attr_i("transB", 0) != 0;
    m_ = ta_ ? a[1] : a[0], k_ = ta_ ? a[0] : a[1], n_ = tb_ ? b[0] : b[1];
    alpha_ = static_cast<float>(p.node->attr_f("alpha", 1.0));
    beta_ = p.in.size() > 2 && p.in[2].present() ? static_cast<float>(p.node->attr_f("beta", 1.0)) : 0.0f;
    ones_.assign(static_cast<std::size_t>(m_), 1.0f);
  }
  void forward() override {
    float* y = p_.out[0].as<float>();
    if (beta_ != 0.0f) {
      const float* c = p_.in[2].as<const float>();
      if (p_.in[2].numel() == m_ * n_)
        std::copy(c, c + m_ * n_, y);
      else
        sgemm(false, false, m_, n_, 1, 1.0f, ones_.data(), 1, c, n_, 0.0f, y, n_);  // each row gets C
    }
    sgemm(ta_, tb_, m_, n_, k_, alpha_, p_.in[0].as<const float>(), ta_ ? m_ : k_, p_.in[1].as<const float>(),
          tb_ ? k_ : n_, beta_, y, n_);
  }
  void backward() override {
    const float* a = p_.in[0].as<const float>();
    const float* b = p_.in[1].as<const float>();
    const float* dy = p_.dout[0].as<const float>();
    if (float* da = p_.din[0].as<float>()) {
      if (!ta_)
        sgemm(false, !tb_, m_, k_, n_, alpha_, dy, n_, b, tb_ ? k_ : n_, 0.0f, da, k_);
      else
        sgemm(tb_, true, k_, m_, n_, alpha_, b, tb_ ? k_ : n_, dy, n_, 0.0f, da, m_);
    }
    if (float* db = p_.din[1].as<float>()) {
      if (!tb_)
        sgemm(!ta_, false, k_, n_, m_, alpha_, a, ta_ ? m_ : k_, dy, n_, 0.0f, db, n_);
      else
        sgemm(true, ta_, n_, k_, m_, alpha_, dy, n_, a, ta_ ? m_ : k_, 0.0f, db, k_);
    }
    if (float* dc = p_.din.size() > 2 ? p_.din[2].as<float>() : nullptr) {
      if (p_.in[2].numel() == m_ * n_) {
        for (I i = 0; i < m_ * n_; ++i) dc[i] = beta_ * dy[i];
      } else {  // dC [n] = beta dY^T ones
        cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(m_), static_cast<int>(n_), beta_, dy,
                    static_cast<int>(n_), ones_.data(), 1, 0.0f, dc, 1);
      }
    }
  }
  std::string impl() const override { return "blas sgemm"; }

 private:
  NodeProblem p_;
  bool ta_, tb_;
  I m_, n_, k_;
  float alpha_, beta_;
  std::vector<float> ones_;
};

// MatMul of operands with at least two axes: one sgemm per product of the (broadcast) batch.
class BlasMatMul final : public NodeKernel {
 public:
  BlasMatMul(const NodeProblem& p) : p_(p) {
    Shape a = *p.in[0].shape, b = *p.in[1].shape;
    const std::size_t r = std::max(a.size(), b.size());
    while (a.size() < r) a.insert(a.begin(), 1);
    while (b.size() < r) b.insert(b.begin(), 1);
    m_ = a[r - 2], k_ = a[r - 1], n_ = b[r - 1];
    // Offsets of each product's operands: the output's batch in row-major order.
    Shape batch(a.begin(), a.end() - 2);
    for (std::size_t i = 0; i + 2 < r; ++i) batch[i] = std::max(a[i], b[i]);
    const I count = numel(batch);
    for (I idx = 0; idx < count; ++idx) {
      I rest = idx, ao = 0, bo = 0, as = 1, bs = 1;
      for (std::size_t d = batch.size(); d-- > 0;) {
        const I i = rest % batch[d];
        rest /= batch[d];
        ao += (a[d] == 1 ? 0 : i) * as;
        bo += (b[d] == 1 ? 0 : i) * bs;
        as *= a[d];
        bs *= b[d];
      }
      products_.push_back({ao * m_ * k_, bo * k_ * n_, idx * m_ * n_});
    }
  }
  void forward() override {
    const float* a = p_.in[0].as<const float>();
    const float* b = p_.in[1].as<const float>();
    float* y = p_.out[0].as<float>();
    for (const auto& pr : products_)
      sgemm(false, false, m_, n_, k_, 1.0f, a + pr.a, k_, b + pr.b, n_, 0.0f, y + pr.y, n_);
  }
  void backward() override {
    const float* a = p_.in[0].as<const float>();
    const float* b = p_.in[1].as<const float>();
    const float* dy = p_.dout[0].as<const float>();
    float* da = p_.din[0].as<float>();
    float* db = p_.din[1].as<float>();
    if (da) std::fill(da, da + p_.in[0].numel(), 0.0f);
    if (db) std::fill(db, db + p_.in[1].numel(), 0.0f);
    for (const auto& pr : products_) {  // a broadcast operand's gradient adds over its products
      if (da) sgemm(false, true, m_, k_, n_, 1.0f, dy + pr.y, n_, b + pr.b, n_, 1.0f, da + pr.a, k_);
      if (db) sgemm(true, false, k_, n_, m_, 1.0f, a + pr.a, k_, dy + pr.y, n_, 1.0f, db + pr.b, n_);
    }
  }
  std::string impl() const override { return "blas sgemm (batched)"; }

 private:
  struct Product {
    I a, b, y;
  };
  NodeProblem p_;
  I m_, k_, n_;
  std::vector<Product> products_;
};

}  // namespace

std::unique_ptr<NodeKernel> make_blas_node_kernel(const NodeProblem& p, int threads) {
  for (const auto& t : p.in)
    if (t.present() && t.dtype != DType::F32) return nullptr;
  openblas_threads(threads);
  const std::string& op = p.node->op;
  if (op == "Conv" && p.in[0].shape->size() <= 4)
    return std::make_unique<BlasGraphConv>(p, conv_geom(*p.node, *p.in[0].shape, (*p.in[1].shape)[0]));
  if (op == "Gemm") {
    const bool has_c = p.in.size() > 2 && p.in[2].present();
    const Shape& a = *p.in[0].shape;
    const Shape& b = *p.in[1].shape;
    const I m = p.node->attr_i("transA", 0) ? a[1] : a[0], n = p.node->attr_i("transB", 0) ? b[0] : b[1];
    if (has_c && p.in[2].numel() != n && p.in[2].numel() != m * n) return nullptr;
    if (has_c && p.in[2].numel() == n && p.in[2].shape->size() == 2 && (*p.in[2].shape)[0] != 1)
      return nullptr;  // [m,1] when n = m...
    return std::make_unique<BlasGraphGemm>(p);
  }
  if (op == "MatMul" && p.in[0].shape->size() >= 2 && p.in[1].shape->size() >= 2)
    return std::make_unique<BlasMatMul>(p);
  return nullptr;
}

}  // namespace d500
