// The `onednn` backend (Debian libdnnl-dev): its registration, its version, and GEMM through a
// matmul primitive. The neural-network operators are in onednn_ops.cpp. Only these two files
// include dnnl.hpp, so the rest of d500 builds without it.
#include "backends/onednn/onednn_backend.hpp"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "backends/registry.hpp"
#include "common/error.hpp"

namespace d500 {

// The instruction set oneDNN's kernels use on this CPU: what its float32 and bfloat16 speeds hang
// on (bfloat16 primitives are native from avx512_core_bf16, emulated on avx512_core).
std::string onednn_isa() {
  using isa = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case isa::sse41: return "sse41";
    case isa::avx: return "avx";
    case isa::avx2: return "avx2";
    case isa::avx2_vnni: return "avx2_vnni";
    case isa::avx512_core: return "avx512_core";
    case isa::avx512_core_vnni: return "avx512_core_vnni";
    case isa::avx512_core_bf16: return "avx512_core_bf16";
    case isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

bool onednn_isa_has_bf16() {
  const std::string isa = onednn_isa();
  return isa.rfind("avx512", 0) == 0 || isa == "other";  // "other": an ISA newer than 2.6's names
}

namespace {

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " (" +
         v->hash + ", OpenMP runtime, " + onednn_isa() + " kernels" + (onednn_isa_has_bf16() ? "" : ", no bfloat16") +
         ")";
}

// C = A * B through a oneDNN matmul primitive, created once (outside any timing) over the
// problem's row-major buffers; run() executes it and waits for the stream.
class OnednnGemm final : public OpKernel {
 public:
  OnednnGemm(OpProblem& p, int threads) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::dim m = p.i("m"), n = p.i("n"), k = p.i("k");
    omp_set_num_threads(threads);
    try {
      dnnl::memory::desc a_md({m, k}, dt::f32, tag::ab), b_md({k, n}, dt::f32, tag::ab), c_md({m, n}, dt::f32, tag::ab);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine_);
      prim_ = dnnl::matmul(pd);
      // oneDNN takes non-const handles; it only reads the sources.
      a_ = dnnl::memory(a_md, engine_, p.in[0].data.data());
      b_ = dnnl::memory(b_md, engine_, p.in[1].data.data());
      c_ = dnnl::memory(c_md, engine_, p.out[0].data.data());
    } catch (const dnnl::error& e) {
      throw Error("oneDNN matmul " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + ": " +
                  e.what());
    }
  }
  void run() override {
    prim_.execute(stream_, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, c_}});
    stream_.wait();
  }

 private:
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  dnnl::matmul prim_;
  dnnl::memory a_, b_, c_;
};

}  // namespace

void register_backend_onednn(BackendRegistry& r) {
  r.add({.name = "onednn",
         .description = "oneDNN primitives (matmul, convolution, pooling, batch normalisation, eltwise, softmax)",
         .version = onednn_version,
         .supports = [](const std::string& op) { return op == "gemm" || onednn_supports(op); },
         .make_kernel = [](OpProblem& p, int threads) -> std::unique_ptr<OpKernel> {
           if (p.op == "gemm") return std::make_unique<OnednnGemm>(p, threads);
           return make_onednn_kernel(p, threads);
         },
         // Convolutions keep reordered copies of their inputs and outputs (oneDNN's blocked
         // formats); the scratchpad is bounded by the same again.
         .workspace_bytes = [](const OpProblem& p) -> std::int64_t {
           std::int64_t n = 0;
           for (const auto& t : p.in) n += t.numel();
           for (const auto& t : p.out) n += t.numel();
           return p.op == "conv2d" ? 2 * 4 * n : 0;
         },
         .make_node_kernel = make_onednn_node_kernel,
         .channels_last = onednn_takes,
         .bf16_storage = onednn_bf16_storage});
}

}  // namespace d500
