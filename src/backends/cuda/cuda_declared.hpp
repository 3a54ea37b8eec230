#pragma once
// What the core knows of the cuda and nccl backends without loading CUDA's libraries (their
// module, libd500-cuda.so, is loaded at first use; see backends/registry.hpp): names,
// descriptions, operators and flags. The module starts from the same declarations
// (cuda_backend.cpp, nccl_backend.cpp), so the two cannot say different things.
#include <string>

#include "backends/registry.hpp"

namespace d500 {

inline BackendInfo cuda_declared() {
  return {
      .name = "cuda",
#ifdef D500_HAVE_CUDNN
      .description =
          "cuBLAS and cuDNN on the GPU (GEMM in fp32, tf32, bf16, fp16; convolutions in fp32, tf32, bf16, fp16; pooling, "
          "batch normalisation, ReLU, softmax; level 1: d500's executor with the network in device memory), one device "
          "per rank by local rank, timed by CUDA events",
      .supports =
          [](const std::string& op) {
            return op == "gemm" || op == "conv2d" || op == "pool2d" || op == "batchnorm" || op == "relu" ||
                   op == "softmax";
          },
#else
      .description =
          "cuBLAS on the GPU (GEMM in fp32, tf32, bf16, fp16; level 1: d500's executor with the network in device "
          "memory), one device per rank by local rank, timed by CUDA events",
      .supports = [](const std::string& op) { return op == "gemm"; },
#endif
      .native_optimizer = true,
      .reduced_precision = true,
      .bf16_bias_after_rounding = true};
}

inline BackendInfo nccl_declared() {
  return {.name = "nccl", .description = "NCCL collectives on one GPU per rank (by local rank), timed by CUDA events"};
}

}  // namespace d500
