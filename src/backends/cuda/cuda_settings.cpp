// The cuda backend's settings (BackendSetting): how cuDNN's convolutions are chosen and called,
// and the arithmetic of convolutions and matrix products. Compiled into every build, with CUDA or
// without, so that a campaign that sets them is told the backend is missing, not the key unknown.
#include "backends/registry.hpp"
#include "backends/settings.hpp"

namespace d500 {

std::vector<BackendSetting> settings_of_backend_cuda() {
  const std::vector<std::string> convolutions = {"conv2d", "network", "train", "distributed"};
  // A table: one entry a line, as written.
  // clang-format off
  return {
      {.spec = {"cudnn_algorithms", ValueType::String, Value{std::string()}, 0, 0, {"heuristic", "deterministic", "find"},
                "conv2d and networks (levels 1-3): cuDNN's convolution algorithms, heuristic (cuDNN's first choice, which "
                "may add with atomics: PyTorch's default), deterministic (the first choice that repeats bit for bit; max "
                "pooling in its deterministic mode) or find (the fastest of every algorithm cuDNN times at setup: "
                "PyTorch's cudnn.benchmark); default: heuristic for a level-0 operator, deterministic in d500's executor "
                "(levels 1-3)"},
       .workloads = convolutions,
       .neutral = "deterministic",
       .neutral_for = {{"conv2d", "heuristic"}}},
      {.spec = {"cudnn_api", ValueType::String, Value{std::string()}, 0, 0, {"legacy", "graph"},
                "conv2d and networks (levels 1-3): how cuDNN's convolutions are called, legacy (cudnnConvolution*, "
                "cudnnGet*_v7, cudnnFind*Ex) or graph (cuDNN's graph API: operation graph, heuristics' engine "
                "configurations, execution plan, as PyTorch calls it); default: graph (on the H100 and the H200 as "
                "fast as PyTorch's convolutions where the legacy calls take up to 3.5x their time: docs/performance.md); "
                "a point that leaves it unset is planned with cudnn_api = graph in its id, and legacy, the default "
                "until 2026-11, keeps the ids it had"},
       .workloads = convolutions,
       .neutral = "legacy",
       .planned = "graph"},
      {.spec = {"math", ValueType::String, Value{std::string()}, 0, 0, {"fp32", "tf32", "bf16"},
                "conv2d and networks (levels 1-3): the arithmetic of convolutions and matrix products, fp32 (strict "
                "float32: no tensor cores), tf32 (tensor cores round each float32 input to TF32's 10 mantissa bits and "
                "sum in float32: PyTorch's torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32; "
                "validation allows 8u more, u = 2^-11) or, for networks only, bf16 (mixed precision: their inputs "
                "rounded to bfloat16, sums in float32, a convolution's result rounded to bfloat16 too; the "
                "activations between convolutions, batch normalisations, poolings, ReLUs and same-shape additions, "
                "and their gradients, are stored in bfloat16 as PyTorch's autocast keeps them, in either "
                "memory_format (the normalisations on cuDNN where the GPU's cuDNN takes bfloat16, else on d500's "
                "kernels, and the tensors around a pooling float32 where it pools no bfloat16: the job's log says "
                "so); the weights, their gradients and the optimizer stay float32; "
                "validation allows 9u more, u = 2^-8, and simulates the stores); default: fp32 (gemm: its dtype)"},
       .workloads = {"conv2d", "gemm", "network", "train", "distributed"},
       .neutral = "fp32",
       .unset_follows = {"conv2d", "gemm"},
       .other_note = kOthersComputeInFloat32},
      {.spec = {"memory_format", ValueType::String, Value{std::string()}, 0, 0, {"nchw", "channels_last"},
                "networks (levels 1-3, d500's executor): nchw, or channels_last (the activations between cuDNN's "
                "convolutions, batch normalisations and poolings, ReLUs and same-shape additions stored NHWC, as "
                "torch.channels_last keeps them: a convolution's tensor-core kernels need no transposes; the weights "
                "stay KCRS and each convolution turns them into KRSC at each pass, and a graph's input, its outputs and "
                "a tensor a reshape reads stay NCHW, a convolution turning them at the border); default: nchw"},
       .workloads = {"network", "train", "distributed"},
       .neutral = "nchw",
       .other_note = kOthersKeepNchw},
      fusion_setting("AddRelu in one pass of d500's kernel forward, y = max(a + b, 0), and one backward, dy where y > 0 "
                     "into both gradients: two fewer passes over the sum each way than the two nodes make; "
                     "BatchNormRelu in training over channels-last activations as cuDNN's one call for the two each "
                     "way (cudnnBatchNormalizationForwardTrainingEx and BackwardEx with "
                     "CUDNN_BATCHNORM_OPS_BN_ACTIVATION, persistent mode), where this GPU's cuDNN takes it for the "
                     "activations' type (probed once per process, values checked; the job's log says where not), "
                     "otherwise on d500's normalisation kernels, which apply the ReLU as they write y and mask the "
                     "gradient by y as they read dy: either way no pass of a Relu node's own, and the normalised "
                     "values before the ReLU never stored",
                     "add_relu"),
      {.spec = {"cuda_graph", ValueType::String, Value{std::string()}, 0, 0, {"off", "step"},
                "training (level 2): step (the training step -- forward, backward and d500's device optimizer -- "
                "captured once as a CUDA Graph, at the second step, and replayed at every later one: one launch instead "
                "of one per kernel; the data phase stays outside; the step's device time is one 'device' row, not "
                "forward, backward and update) or off; needs optimizer_impl = \"native\", a constant learning rate, "
                "no adam or adamw, every node on the GPU and no Dropout; default: off"},
       .workloads = {"train", "distributed"},
       .neutral = "off",
       .other_note = "only d500's executor on the GPU records its steps"},
  };
  // clang-format on
}

}  // namespace d500
