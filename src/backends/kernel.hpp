#pragma once
// The kernel contract between the level-0 operator workloads and the backends: a problem (the
// tensors of one point, with their data), and a kernel (one backend's implementation of it,
// created untimed over the problem's buffers). Backends include this and nothing above it;
// workloads/level0/operator.hpp builds the problems and times the kernels.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/op_shapes.hpp"
#include "common/value.hpp"
#include "metrics/metrics.hpp"

namespace d500 {

struct Tensor {
  std::string name;
  std::vector<std::int64_t> dims;
  // dims[0] is the batch, and the operator is independent across it (image i of an output
  // depends on image i of the inputs only), so validation may compare a few images alone.
  bool batched = false;
  std::vector<float> data;
  std::int64_t numel() const;
};

struct OpProblem {
  std::string op;    // the workload: gemm, conv2d, pool2d, ...
  std::string pass;  // forward, backward, backward_data, backward_filter
  Params params;     // the point's parameters (normalised)
  std::vector<Tensor> in, out;
  Work work;
  double tolerance = 0;   // largest relative error norm accepted in float32
  std::string reduction;  // in words, for the report: what the tolerance scales with
  // The parameter that is the batch of the batched tensors ("n" for images, "m" for GEMM rows),
  // and how many of its entries validation compares when the batch is larger (evenly spread,
  // first and last always among them). `batch_word` names one entry in the method text.
  std::string batch = "n";
  std::int64_t validate_entries = 2;
  std::string batch_word = "images";

  std::int64_t i(const std::string& name) const { return std::get<std::int64_t>(params.at(name)); }
  const std::string& s(const std::string& name) const { return std::get<std::string>(params.at(name)); }
  const Tensor& input(const std::string& name) const;
  Tensor& output(const std::string& name);
};

// One backend's implementation of one problem, created (untimed) over the problem's buffers.
class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual void run() = 0;  // the timed call: computes the outputs from the inputs, and waits
  // Untimed, after a run: brings outputs into the problem's layout (e.g. from oneDNN's blocked
  // formats) so that they can be compared with the reference.
  virtual void finish() {}
  // A device kernel: the last run()'s duration on the device, from events recorded around the
  // work on its stream (nanoseconds); -1 for a host kernel, whose run() is its own duration.
  virtual std::int64_t device_ns() const { return -1; }
  // A device kernel: the most device memory it has held so far (bytes, this rank); -1 on the host.
  virtual std::int64_t device_memory_bytes() const { return -1; }
  // What the kernel chose at setup that a reader of the results needs (an algorithm, its
  // workspace), stored as the point's attributes. Every rank writes them, so they must be the
  // same on every rank: derived from the problem and the library's deterministic choices.
  virtual std::vector<std::pair<std::string, Value>> facts() const { return {}; }
};

// Tolerance for float32 results of sums of `terms` products of O(1) values: the rounding error
// of a float sum grows about like sqrt(terms) * 2^-24 when errors are random, with room for
// reassociation (blocking, Winograd-free direct algorithms). Levels 0 and 1 validate with it.
double float_tolerance(double terms);
// What rounding each input of a product to `mantissa_bits` bits (TF32: 10, bfloat16: 7, half: 10)
// adds, relative to the result's norm, when the products are summed in float32: 8u, u = 2^-(bits+1).
// It does not grow with the sum's length; it is added to float_tolerance's.
double rounded_inputs_tolerance(int mantissa_bits);
// The same with the result rounded to that type too (a bfloat16 or half convolution's output): 9u.
double rounded_inputs_and_result_tolerance(int mantissa_bits);
// The point's `math`: "fp32" (unset or "fp32": strict float32), "tf32" (cuda: tensor cores round
// float32 inputs of convolutions and matrix products to TF32) or "bf16" (cuda, levels 1-3: they
// compute in bfloat16 with float32 sums, every tensor the executor keeps staying float32).
std::string point_math(const Params& p);
bool tf32_math(const Params& p);
bool bf16_math(const Params& p);

// The shapes of a problem of each operator, read from its parameters (one meaning for all).
ConvShape conv_shape(const OpProblem& p);
PoolShape pool_shape(const OpProblem& p);
Nchw nchw_shape(const OpProblem& p);

}  // namespace d500
