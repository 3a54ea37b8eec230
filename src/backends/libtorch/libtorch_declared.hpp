#pragma once
// What the core knows of the libtorch backends without loading LibTorch (their module,
// libd500-libtorch.so, is loaded at first use; see backends/registry.hpp): names, descriptions,
// operators and flags, and the functions that need no LibTorch. The module starts from the same
// declarations (libtorch_backend.cpp), so the two cannot say different things.
#include <cstdint>
#include <string>

#include "backends/registry.hpp"

namespace d500 {

inline BackendInfo libtorch_declared() {
  return {.name = "libtorch",
          .description = "LibTorch ATen operators on CPU",
          .supports = [](const std::string&) { return true; },
          // Convolutions and batch normalisation allocate their results on every call (see
          // keep_freed_memory), plus ATen's own buffers: bounded by twice the outputs.
          .workspace_bytes = [](const OpProblem& p) -> std::int64_t {
            std::int64_t n = 0;
            for (const auto& t : p.out) n += t.numel();
            return p.op == "conv2d" || p.op == "batchnorm" ? 2 * 4 * n : 0;
          }};
}

inline BackendInfo libtorch_native_declared() {
  return {.name = "libtorch-native",
          .description = "LibTorch executing whole networks itself: its operators and its autograd (level 1)",
          .native_optimizer = true};
}

inline BackendInfo libtorch_cuda_declared() {
  return {.name = "libtorch-cuda",
          .description =
              "libtorch-native on the GPU: LibTorch's operators and autograd on one device per rank (by local rank), "
              "each pass ending with a wait for the device (levels 1 and 2)",
          .native_optimizer = true};
}

}  // namespace d500
