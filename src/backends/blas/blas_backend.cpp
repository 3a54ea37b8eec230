// The `blas` backend: OpenBLAS. GEMM is one cblas_sgemm; conv2d lowers to sgemm (blas_conv.cpp).
#include "backends/blas/blas_backend.hpp"

#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "backends/registry.hpp"
#include "common/contain.hpp"
#include "common/error.hpp"

namespace d500 {

std::string openblas_version() {
  // openblas_get_config() names version, target core and threading model, e.g.
  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64".
  std::string s = openblas_get_config();
  return s + " (parallel=" + std::to_string(openblas_get_parallel()) + ")";
}

namespace {

// OpenBLAS's work buffer, one per thread, taken at its first product (BUFFER_SIZE on x86-64 in
// Debian's 0.3.21: 128 MiB, allocated with 4 KiB more).
constexpr std::size_t kOpenblasBuffer = (std::size_t{128} << 20) + 4096;

// Under an address-space limit (ulimit -v) OpenBLAS's first product cannot take its buffers, and
// OpenBLAS then retries its malloc for ever: the rank hangs until something kills it. So before
// the first product with `threads` threads, room for that many buffers is reserved and given back
// (address space only, never touched); without it the kernel is refused, naming the limit.
void require_openblas_room(int threads) {
  static std::atomic<int> room_for{0};  // threads whose buffers were found room for (then taken)
  threads = std::max(threads, 1);
  const std::int64_t limit = address_space_limit();
  if (threads <= room_for.load() || limit <= 0) return;
  std::vector<void*> probes;
  for (int i = 0; i < threads; ++i) {
    void* p = mmap(nullptr, kOpenblasBuffer, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) break;
    probes.push_back(p);
  }
  const bool room = static_cast<int>(probes.size()) == threads;
  for (void* p : probes) munmap(p, kOpenblasBuffer);
  if (room) {
    room_for = threads;
    return;
  }
  const auto mib = [](std::size_t b) { return std::to_string(b >> 20) + " MiB"; };
  throw Error("blas: the address-space limit (ulimit -v) is " + mib(static_cast<std::size_t>(limit)) +
              " and this rank already maps " + mib(static_cast<std::size_t>(mapped_bytes())) +
              "; OpenBLAS needs a buffer of " + mib(kOpenblasBuffer) + " for each of its " + std::to_string(threads) +
              " thread(s) at its first product and, without one, retries for ever (the rank would hang): raise "
              "ulimit -v by " +
              mib(kOpenblasBuffer * static_cast<std::size_t>(threads)) + " or more, or lift it (ulimit -v unlimited)");
}

}  // namespace

void openblas_threads(int n) {
  require_openblas_room(n);
  openblas_set_num_threads(n);
}

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
