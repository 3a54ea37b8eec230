// The libtorch backends as the core declares them (in the core; no LibTorch here): each function
// named below is the module's, loaded at its first call.
#include "backends/libtorch/libtorch_declared.hpp"

namespace d500 {

namespace {
constexpr const char* kLibtorchModule = "libd500-libtorch.so";
}

void register_backend_libtorch(BackendRegistry& r) {
  r.declare(kLibtorchModule, libtorch_declared(), &BackendInfo::version, &BackendInfo::make_kernel,
            &BackendInfo::make_node_kernel);
}

void register_backend_libtorch_native(BackendRegistry& r) {
  r.declare(kLibtorchModule, libtorch_native_declared(), &BackendInfo::version, &BackendInfo::make_graph_runner,
            &BackendInfo::check_graph);
}

void register_backend_libtorch_cuda(BackendRegistry& r) {
  r.declare(kLibtorchModule, libtorch_cuda_declared(), &BackendInfo::version, &BackendInfo::make_graph_runner,
            &BackendInfo::check_graph, &BackendInfo::no_device, &BackendInfo::rank_device, &BackendInfo::device_facts);
}

}  // namespace d500
