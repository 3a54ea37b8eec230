#include "workloads/level0/gemm.hpp"

#include <cmath>

#include "backends/blas/blas_backend.hpp"
#include "backends/reference/ops.hpp"
#ifdef D500_HAVE_ONEDNN
#include "backends/onednn/onednn_backend.hpp"
#endif
#ifdef D500_HAVE_LIBTORCH
#include "backends/libtorch/libtorch_backend.hpp"
#endif
#include "workloads/level0/operator.hpp"
#include "workloads/level0/shape_sets.hpp"

namespace d500 {

double gemm_rel_error(int m, int n, int k, const float* a, const float* b, const float* c, int rows) {
  rows = std::min(rows, m);
  std::vector<double> ref(static_cast<std::size_t>(n));
  double num = 0, den = 0;
  for (int r = 0; r < rows; ++r) {
    int i = rows == m ? r : static_cast<int>(static_cast<std::int64_t>(r) * m / rows);
    reference::gemm_row_double(i, n, k, a, b, ref.data());
    const float* ci = c + static_cast<std::size_t>(i) * n;
    for (int j = 0; j < n; ++j) {
      double d = ci[j] - ref[j];
      num += d * d;
      den += ref[j] * ref[j];
    }
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

double gemm_tolerance(int k) { return 1e-6 * std::max(10.0, std::sqrt(static_cast<double>(k)) * 4.0); }

namespace {

enum class GemmBackend { Reference, Blas, Onednn, Libtorch };

class Gemm final : public Workload {
 public:
  Gemm(const RunContext& ctx, GemmBackend backend)
      : backend_(backend),
        m_(static_cast<int>(param<std::int64_t>(ctx.params, "m"))),
        n_(static_cast<int>(param<std::int64_t>(ctx.params, "n"))),
        k_(static_cast<int>(param<std::int64_t>(ctx.params, "k"))),
        a_(static_cast<std::size_t>(m_) * k_),
        b_(static_cast<std::size_t>(k_) * n_),
        c_(static_cast<std::size_t>(m_) * n_) {
    fill_uniform(a_.data(), a_.size(), ctx.seed);
    fill_uniform(b_.data(), b_.size(), ctx.seed ^ 0x9e3779b97f4a7c15ull);
    const int threads = static_cast<int>(param<std::int64_t>(ctx.params, "threads"));
    if (backend_ == GemmBackend::Blas) openblas_threads(threads);
#ifdef D500_HAVE_ONEDNN
    // The primitive is created here, before validation and timing: creation is not timed.
    if (backend_ == GemmBackend::Onednn)
      onednn_ = std::make_unique<OnednnGemm>(m_, n_, k_, a_.data(), b_.data(), c_.data(), threads);
#endif
#ifdef D500_HAVE_LIBTORCH
    if (backend_ == GemmBackend::Libtorch)
      torch_ = make_libtorch_gemm(m_, n_, k_, a_.data(), b_.data(), c_.data(), threads);
#endif
  }

  Validation validate() override {
    run();
    constexpr int kRows = 256;
    return {gemm_rel_error(m_, n_, k_, a_.data(), b_.data(), c_.data(), kRows), gemm_tolerance(k_),
            "relative Frobenius norm against a double-accumulated reference on " +
                std::to_string(std::min(kRows, m_)) + " of " + std::to_string(m_) + " rows"};
  }

  void measure(Harness& h) override {
    h.repeat([this] { run(); });
  }

  Work work() const override {
    const std::int64_t m = m_, n = n_, k = k_;
    return {2 * m * n * k, 4 * (m * k + k * n + m * n)};
  }

 private:
  void run() {
    switch (backend_) {
      case GemmBackend::Blas: blas_sgemm(m_, n_, k_, a_.data(), b_.data(), c_.data()); break;
      case GemmBackend::Reference: reference::sgemm(m_, n_, k_, a_.data(), b_.data(), c_.data()); break;
      case GemmBackend::Onednn:
#ifdef D500_HAVE_ONEDNN
        onednn_->run();
#endif
        break;
      case GemmBackend::Libtorch: torch_->run(); break;
    }
  }

  GemmBackend backend_;
  int m_, n_, k_;
  std::vector<float> a_, b_, c_;
#ifdef D500_HAVE_ONEDNN
  std::unique_ptr<OnednnGemm> onednn_;
#endif
  std::unique_ptr<OpKernel> torch_;
};

}  // namespace

void register_gemm(WorkloadRegistry& r) {
  WorkloadInfo w;
  w.name = "gemm";
  w.level = 0;
  w.description = "float32 matrix multiply C = A*B (A m x k, B k x n), row-major";
  w.rate_unit = "GFLOP/s";
  w.scaling = "weak";
  w.scaling_note = "total work: every rank multiplies its own matrices of the same size";
  const Value minus_one{std::int64_t{-1}};
  w.params = {
      {"shape", ValueType::String, Value{std::string()}, 0, 0, shape_names(deepbench_gemms()),
       "a named problem (deepbench/...) giving m, n, k; \"\": give them directly"},
      {"n", ValueType::Int, minus_one, 1, 65536, {}, "columns of C (and m, k unless given)"},
      {"m", ValueType::Int, minus_one, -1, 65536, {}, "rows of C; -1: same as n"},
      {"k", ValueType::Int, minus_one, -1, 65536, {}, "inner dimension; -1: same as n"},
      {"threads", ValueType::Int, Value{std::int64_t{1}}, 1, 1024, {}, "BLAS / oneDNN threads per rank"},
  };
  w.normalize = [](Params& p) {
    apply_named_shape(p, deepbench_gemms());
    for (const char* d : {"m", "k"})
      if (std::get<std::int64_t>(p.at(d)) == -1) p[d] = p.at("n");
  };
  w.check = [](const Params& p) -> std::string {
    std::string why = check_named_shape(p, deepbench_gemms());
    if (!why.empty()) return why;
    if (std::get<std::int64_t>(p.at("n")) <= 0) return "'n' must be given (a positive size) unless 'shape' names a problem";
    for (const char* d : {"m", "k"})
      if (std::get<std::int64_t>(p.at(d)) <= 0) return std::string(d) + " must be positive, or -1 for 'same as n'";
    if (std::get<std::string>(p.at("backend")) == "reference" && std::get<std::int64_t>(p.at("threads")) != 1)
      return "the reference backend is single-threaded: threads must be 1";
    return "";
  };
  w.backends["reference"] = [](const RunContext& c) { return std::make_unique<Gemm>(c, GemmBackend::Reference); };
  w.backends["blas"] = [](const RunContext& c) { return std::make_unique<Gemm>(c, GemmBackend::Blas); };
#ifdef D500_HAVE_ONEDNN
  w.backends["onednn"] = [](const RunContext& c) { return std::make_unique<Gemm>(c, GemmBackend::Onednn); };
#endif
#ifdef D500_HAVE_LIBTORCH
  w.backends["libtorch"] = [](const RunContext& c) { return std::make_unique<Gemm>(c, GemmBackend::Libtorch); };
#endif
  r.add(std::move(w));
}

}  // namespace d500
