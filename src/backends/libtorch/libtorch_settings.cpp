// The libtorch-cuda and libtorch-native backends' settings (BackendSetting): PyTorch's own switches
// for cuDNN, the arithmetic and the memory layout, as PyTorch users set them on a GPU and on the
// CPU. Compiled into every build.
#include "backends/registry.hpp"
#include "backends/settings.hpp"

namespace d500 {

std::vector<BackendSetting> settings_of_backend_libtorch_cuda() {
  const std::vector<std::string> networks = {"network", "train", "distributed"};
  // A table: one entry a line, as written.
  // clang-format off
  return {
      {.spec = {"cudnn_algorithms", ValueType::String, Value{std::string()}, 0, 0, {"heuristic", "deterministic", "find"},
                "levels 1-2: cudnn.deterministic (deterministic), LibTorch's own default (heuristic) or cudnn.benchmark "
                "(find); default: deterministic"},
       .workloads = networks,
       .neutral = "deterministic"},
      {.spec = {"math", ValueType::String, Value{std::string()}, 0, 0, {"fp32", "tf32", "bf16"},
                "levels 1-2: fp32 (strict: TF32 off in cuDNN and cuBLAS, which LibTorch otherwise allows in "
                "convolutions), tf32 (allowed in both) or bf16 (LibTorch's autocast to bfloat16 around the forward "
                "pass, as torch.autocast: activations in bfloat16, weights and optimizer float32); default: fp32"},
       .workloads = networks,
       .neutral = "fp32",
       .other_note = kOthersComputeInFloat32},
      {.spec = {"memory_format", ValueType::String, Value{std::string()}, 0, 0, {"nchw", "channels_last"},
                "levels 1-2: the layout of 4-D weights and inputs, nchw (contiguous) or channels_last (NHWC strides, "
                "as torch.channels_last: cuDNN's tensor-core convolutions need no transposes); default: nchw"},
       .neutral = "nchw",
       .other_note = kOthersKeepNchw},
  };
  // clang-format on
}

std::vector<BackendSetting> settings_of_backend_libtorch_native() {
  const std::vector<std::string> networks = {"network", "train", "distributed"};
  // clang-format off
  return {
      {.spec = {"math", ValueType::String, Value{std::string()}, 0, 0, {"fp32", "bf16"},
                "levels 1-3, on the CPU: fp32 (strict float32) or bf16 (LibTorch's CPU autocast to bfloat16 around "
                "the forward pass, as torch.autocast(\"cpu\", dtype=torch.bfloat16): the operators on autocast's "
                "list, convolutions and matrix products, compute in bfloat16 (oneDNN's kernels) and return bfloat16 "
                "activations, which the next operators take as they come; weights and optimizer float32); "
                "default: fp32"},
       .workloads = networks,
       .neutral = "fp32",
       .other_note = kOthersComputeInFloat32,
       .choices_note = "tf32 is the GPUs' tensor-core format; LibTorch on the CPU computes in fp32 or bf16"},
      {.spec = {"memory_format", ValueType::String, Value{std::string()}, 0, 0, {"nchw", "channels_last"},
                "levels 1-3, on the CPU: the layout of 4-D weights and inputs, nchw (contiguous) or channels_last "
                "(NHWC strides, as torch.channels_last, which LibTorch's oneDNN convolutions keep: the activations "
                "follow; each input turned into it in the data phase, as a PyTorch loop's "
                "x.to(memory_format=torch.channels_last)); default: nchw"},
       .workloads = networks,
       .neutral = "nchw",
       .other_note = kOthersKeepNchw},
  };
  // clang-format on
}

}  // namespace d500
