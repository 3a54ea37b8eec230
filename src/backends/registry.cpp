#include "backends/registry.hpp"

#include <mpi.h>

#include "backends/blas/blas_backend.hpp"
#ifdef D500_HAVE_ONEDNN
#include "backends/onednn/onednn_backend.hpp"
#endif
#ifdef D500_HAVE_LIBTORCH
#include "backends/libtorch/libtorch_backend.hpp"
#endif

namespace d500 {

static std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, static_cast<size_t>(len));
  auto nl = s.find_first_of("\n,");
  return nl == std::string::npos ? s : s.substr(0, nl);
}

const std::vector<BackendInfo>& all_backends() {
  static const std::vector<BackendInfo> list = {
      {"reference", "plain C++ loops: the truth that validation compares against", true, "",
       [] { return std::string("d500 built-in"); }},
      {"blas", "OpenBLAS (cblas_sgemm; convolution through im2col)", true, "", [] { return openblas_version(); }},
      {"mpi", "MPI collectives", true, "", [] { return mpi_library_version(); }},
#ifdef D500_HAVE_ONEDNN
      {"onednn", "oneDNN primitives (matmul, convolution, pooling, batch normalisation, eltwise, softmax)", true, "",
       [] { return onednn_version(); }},
#else
      {"onednn", "oneDNN primitives", false, "d500 was built without oneDNN (Debian: libdnnl-dev)", nullptr},
#endif
#ifdef D500_HAVE_LIBTORCH
      {"libtorch", "LibTorch ATen operators on CPU", true, "", [] { return libtorch_version(); }},
#else
      {"libtorch", "LibTorch ATen operators on CPU", false, "d500 was built without LibTorch (Debian: libtorch-dev)", nullptr},
#endif
      {"custom", "an operator from a user's shared library (include/d500/custom_op.h), set by 'library'", true, "",
       [] { return std::string("C ABI version 1 (dlopen)"); }},
      {"cuda", "cuBLAS and cuDNN", false, "not implemented in this version of d500", nullptr},
      {"nccl", "NCCL collectives", false, "not implemented in this version of d500", nullptr},
  };
  return list;
}

const BackendInfo* find_backend(const std::string& name) {
  for (const auto& b : all_backends())
    if (b.name == name) return &b;
  return nullptr;
}

std::vector<std::string> built_backend_names() {
  std::vector<std::string> out;
  for (const auto& b : all_backends())
    if (b.built) out.push_back(b.name);
  return out;
}

}  // namespace d500
