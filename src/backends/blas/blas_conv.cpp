// The `blas` backend's convolution: im2col (Caffe's lowering) and OpenBLAS sgemm, per image and
// group. 1x1 convolutions with stride 1 and no padding skip the lowering: the image is the matrix.
#include <cblas.h>

#include "backends/blas/blas_backend.hpp"
#include "backends/kernel.hpp"

namespace d500 {

namespace {

class BlasConv final : public OpKernel {
 public:
  BlasConv(OpProblem& p, int threads) : p_(p), cs_(conv_shape(p)) {
    openblas_threads(threads);
    direct_ = cs_.r == 1 && cs_.s == 1 && cs_.stride == 1 && cs_.pad == 0;
    // The lowered image is allocated here, never inside a timed run.
    if (!direct_) col_.assign(static_cast<std::size_t>(crs() * pq()), 0.0f);
  }

  void run() override {
    if (p_.pass == "forward")
      forward();
    else if (p_.pass == "backward_data")
      backward_data();
    else
      backward_filter();
  }

 private:
  std::int64_t crs() const { return cs_.cg() * cs_.r * cs_.s; }
  std::int64_t pq() const { return cs_.p() * cs_.q(); }
  const float* image(const float* x, std::int64_t n, std::int64_t g) const {
    return x + (n * cs_.c + g * cs_.cg()) * cs_.h * cs_.w;
  }

  // col[(c R + r) S + s][p Q + q] = x[n][g CG + c][p stride - pad + r dil][q stride - pad + s dil], 0 outside.
  void im2col(const float* xg) {
    const std::int64_t P = cs_.p(), Q = cs_.q();
    float* col = col_.data();
    for (std::int64_t c = 0; c < cs_.cg(); ++c)
      for (std::int64_t r = 0; r < cs_.r; ++r)
        for (std::int64_t s = 0; s < cs_.s; ++s) {
          float* row = col + ((c * cs_.r + r) * cs_.s + s) * P * Q;
          for (std::int64_t p = 0; p < P; ++p) {
            const std::int64_t ih = p * cs_.stride - cs_.pad + r * cs_.dilation;
            for (std::int64_t q = 0; q < Q; ++q) {
              const std::int64_t iw = q * cs_.stride - cs_.pad + s * cs_.dilation;
              row[p * Q + q] =
                  ih >= 0 && ih < cs_.h && iw >= 0 && iw < cs_.w ? xg[(c * cs_.h + ih) * cs_.w + iw] : 0.0f;
            }
          }
        }
  }

  // The adjoint of im2col: dx[...] += col[...] for every tap inside the image.
  void col2im(float* dxg) const {
    const std::int64_t P = cs_.p(), Q = cs_.q();
    std::fill(dxg, dxg + cs_.cg() * cs_.h * cs_.w, 0.0f);
    const float* col = col_.data();
    for (std::int64_t c = 0; c < cs_.cg(); ++c)
      for (std::int64_t r = 0; r < cs_.r; ++r)
        for (std::int64_t s = 0; s < cs_.s; ++s) {
          const float* row = col + ((c * cs_.r + r) * cs_.s + s) * P * Q;
          for (std::int64_t p = 0; p < P; ++p) {
            const std::int64_t ih = p * cs_.stride - cs_.pad + r * cs_.dilation;
            if (ih < 0 || ih >= cs_.h) continue;
            for (std::int64_t q = 0; q < Q; ++q) {
              const std::int64_t iw = q * cs_.stride - cs_.pad + s * cs_.dilation;
              if (iw >= 0 && iw < cs_.w) dxg[(c * cs_.h + ih) * cs_.w + iw] += row[p * Q + q];
            }
          }
        }
  }

  void forward() {
    const float* x = p_.in[0].data.data();
    const float* w = p_.in[1].data.data();
    float* y = p_.out[0].data.data();
    const auto KG = static_cast<int>(cs_.kg()), PQ = static_cast<int>(pq()), CRS = static_cast<int>(crs());
    for (std::int64_t n = 0; n < cs_.n; ++n)
      for (std::int64_t g = 0; g < cs_.groups; ++g) {
        const float* b = image(x, n, g);
        if (!direct_) im2col(b), b = col_.data();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, KG, PQ, CRS, 1.0f, w + g * KG * CRS, CRS, b, PQ, 0.0f,
                    y + (n * cs_.k + g * KG) * PQ, PQ);
      }
  }

  void backward_data() {
    const float* dy = p_.in[0].data.data();
    const float* w = p_.in[1].data.data();
    float* dx = p_.out[0].data.data();
    const auto KG = static_cast<int>(cs_.kg()), PQ = static_cast<int>(pq()), CRS = static_cast<int>(crs());
    for (std::int64_t n = 0; n < cs_.n; ++n)
      for (std::int64_t g = 0; g < cs_.groups; ++g) {
        float* dxg = dx + (n * cs_.c + g * cs_.cg()) * cs_.h * cs_.w;
        float* target = direct_ ? dxg : col_.data();
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, CRS, PQ, KG, 1.0f, w + g * KG * CRS, CRS,
                    dy + (n * cs_.k + g * KG) * PQ, PQ, 0.0f, target, PQ);
        if (!direct_) col2im(dxg);
      }
  }

  void backward_filter() {
    const float* x = p_.in[0].data.data();
    const float* dy = p_.in[1].data.data();
    float* dw = p_.out[0].data.data();
    const auto KG = static_cast<int>(cs_.kg()), PQ = static_cast<int>(pq()), CRS = static_cast<int>(crs());
    for (std::int64_t n = 0; n < cs_.n; ++n)
      for (std::int64_t g = 0; g < cs_.groups; ++g) {
        const float* b = image(x, n, g);
        if (!direct_) im2col(b), b = col_.data();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, KG, CRS, PQ, 1.0f, dy + (n * cs_.k + g * KG) * PQ, PQ, b,
                    PQ, n == 0 ? 0.0f : 1.0f, dw + g * KG * CRS, CRS);
      }
  }

  OpProblem& p_;
  ConvShape cs_;
  bool direct_ = false;
  std::vector<float> col_;
};

}  // namespace

std::unique_ptr<OpKernel> make_blas_conv(OpProblem& p, int threads) { return std::make_unique<BlasConv>(p, threads); }

}  // namespace d500
