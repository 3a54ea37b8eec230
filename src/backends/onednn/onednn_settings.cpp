// The onednn backend's settings (BackendSetting): the arithmetic of d500's executor's convolutions
// and matrix products, the layout of its activations, and which of the graph's nodes it joins
// before it runs them on oneDNN's primitives. Compiled into every build, with oneDNN or without,
// so that a campaign that sets one is told the backend is missing, not the key unknown.
#include "backends/registry.hpp"
#include "backends/settings.hpp"

namespace d500 {

std::vector<BackendSetting> settings_of_backend_onednn() {
  const std::vector<std::string> networks = {"network", "train", "distributed"};
  // A table: one entry a line, as written.
  // clang-format off
  return {
      {.spec = {"math", ValueType::String, Value{std::string()}, 0, 0, {"fp32", "bf16"},
                "networks (levels 1-3, d500's executor): the arithmetic of convolutions and matrix products, fp32 "
                "(strict float32) or bf16 (mixed precision on oneDNN's bfloat16 primitives, native on CPUs with "
                "AVX512-BF16 or AMX: their inputs rounded to bfloat16 by oneDNN's reorders, sums in float32, a "
                "convolution's result rounded to bfloat16 too; the activations between convolutions, "
                "normalisations, poolings, ReLUs and same-shape additions, and their gradients, are stored in "
                "bfloat16 too, as autocast keeps them, in either memory_format; the weights, their gradients and the "
                "optimizer stay float32, as on cuda; validation holds each tensor to its distance under these "
                "roundings simulated; the point's step table names each node computed so 'bfloat16', and a node "
                "oneDNN does not take runs on the reference in float32, listed in "
                "executor.reference_fallback_ops); default: fp32"},
       .workloads = networks,
       .neutral = "fp32",
       .other_note = kOthersComputeInFloat32,
       .choices_note = "tf32 is the GPUs' tensor-core format; oneDNN computes in fp32 or bf16"},
      {.spec = {"memory_format", ValueType::String, Value{std::string()}, 0, 0, {"nchw", "channels_last"},
                "networks (levels 1-3, d500's executor): nchw, or channels_last (the activations between "
                "convolutions, batch normalisations, poolings, ReLUs and same-shape additions stored NHWC, as "
                "torch.channels_last keeps them: oneDNN's convolutions compute in NHWC where the tensors lie, "
                "where with nchw each reorders its input into its blocked format and its output back at every "
                "pass; the weights stay KCRS, reordered by the convolution, and a graph's input, its outputs and "
                "a tensor a reshape reads stay NCHW, a convolution turning them at the border; the step table "
                "names each node computed so 'NHWC'); default: nchw"},
       .workloads = networks,
       .neutral = "nchw",
       .other_note = kOthersKeepNchw},
      fusion_setting(
          "AddRelu forward as oneDNN's binary add with a ReLU post-op, one pass, backward one OpenMP loop, dy where y > 0 "
          "into both gradients; BatchNormRelu as oneDNN's batch normalization with the ReLU applied in place by an "
          "OpenMP loop, backward the masked gradient written into x's gradient and taken in place by the primitive, so "
          "that the normalised output is never stored",
          "off"),
  };
  // clang-format on
}

}  // namespace d500
