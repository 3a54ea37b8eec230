// The `blas` backend: OpenBLAS. GEMM is one cblas_sgemm; conv2d lowers to sgemm (blas_conv.cpp).
#include "backends/blas/blas_backend.hpp"

#include <cblas.h>

#include "backends/registry.hpp"

namespace d500 {

std::string openblas_version() {
  // openblas_get_config() names version, target core and threading model, e.g.
  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64".
  std::string s = openblas_get_config();
  return s + " (parallel=" + std::to_string(openblas_get_parallel()) + ")";
}

void openblas_threads(int n) { openblas_set_num_threads(n); }

namespace {

// C = A * B, row-major, A m x k, B k x n, straight into the problem's buffers.
class BlasGemm final : public OpKernel {
 public:
  BlasGemm(OpProblem& p, int threads)
      : m_(static_cast<int>(p.i("m"))),
        n_(static_cast<int>(p.i("n"))),
        k_(static_cast<int>(p.i("k"))),
        a_(p.in[0].data.data()),
        b_(p.in[1].data.data()),
        c_(p.out[0].data.data()) {
    openblas_threads(threads);
  }
  void run() override {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m_, n_, k_, 1.0f, a_, k_, b_, n_, 0.0f, c_, n_);
  }

 private:
  int m_, n_, k_;
  const float *a_, *b_;
  float* c_;
};

}  // namespace

void register_backend_blas(BackendRegistry& r) {
  r.add({.name = "blas",
         .description = "OpenBLAS (cblas_sgemm; convolution through im2col)",
         .version = openblas_version,
         .supports = [](const std::string& op) { return op == "gemm" || op == "conv2d"; },
         .make_kernel = [](OpProblem& p, int threads) -> std::unique_ptr<OpKernel> {
           if (p.op == "gemm") return std::make_unique<BlasGemm>(p, threads);
           return make_blas_conv(p, threads);
         },
         .workspace_bytes = [](const OpProblem& p) -> std::int64_t {
           if (p.op != "conv2d") return 0;      // GEMM works in the problem's buffers
           const ConvShape cs = conv_shape(p);  // the im2col buffer of one image and group
           return 4 * cs.cg() * cs.r * cs.s * cs.p() * cs.q();
         },
         .make_node_kernel = make_blas_node_kernel});
}

}  // namespace d500
