// The cuda and nccl backends as the core declares them (in the core; no CUDA here): each function
// named below is the module's, loaded at its first call.
#include "backends/cuda/cuda_declared.hpp"

namespace d500 {

namespace {
constexpr const char* kCudaModule = "libd500-cuda.so";
}

void register_backend_cuda(BackendRegistry& r) {
  r.declare(kCudaModule, cuda_declared(), &BackendInfo::version, &BackendInfo::make_kernel, &BackendInfo::check_point,
            &BackendInfo::make_node_kernel, &BackendInfo::make_device_memory, &BackendInfo::channels_last,
            &BackendInfo::bf16_storage, &BackendInfo::no_device, &BackendInfo::rank_device, &BackendInfo::device_facts,
            &BackendInfo::device_reading, &BackendInfo::device_peak);
}

void register_backend_nccl(BackendRegistry& r) {
  r.declare(kCudaModule, nccl_declared(), &BackendInfo::version, &BackendInfo::make_collective,
            &BackendInfo::make_device_collective, &BackendInfo::no_device, &BackendInfo::rank_device,
            &BackendInfo::device_facts, &BackendInfo::device_reading);
}

}  // namespace d500
