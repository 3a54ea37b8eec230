#include "backends/onednn/onednn_backend.hpp"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "common/error.hpp"

namespace d500 {

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " (" + v->hash + ", OpenMP runtime)";
}

struct OnednnGemm::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul prim;
  dnnl::memory a, b, c;
};

OnednnGemm::OnednnGemm(int m, int n, int k, const float* a, const float* b, float* c, int threads)
    : impl_(std::make_unique<Impl>()) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  omp_set_num_threads(threads);
  try {
    dnnl::memory::desc a_md({m, k}, dt::f32, tag::ab), b_md({k, n}, dt::f32, tag::ab), c_md({m, n}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), impl_->engine);
    impl_->prim = dnnl::matmul(pd);
    // oneDNN takes non-const handles; it only reads the sources.
    impl_->a = dnnl::memory(a_md, impl_->engine, const_cast<float*>(a));
    impl_->b = dnnl::memory(b_md, impl_->engine, const_cast<float*>(b));
    impl_->c = dnnl::memory(c_md, impl_->engine, c);
  } catch (const dnnl::error& e) {
    throw Error(std::string("oneDNN matmul ") + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                ": " + e.what());
  }
}

OnednnGemm::~OnednnGemm() = default;

void OnednnGemm::run() {
  impl_->prim.execute(impl_->stream, {{DNNL_ARG_SRC, impl_->a}, {DNNL_ARG_WEIGHTS, impl_->b}, {DNNL_ARG_DST, impl_->c}});
  impl_->stream.wait();
}

}  // namespace d500
