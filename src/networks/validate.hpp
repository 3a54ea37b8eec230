#pragma once
// Level 1's validation: an executor's graph outputs (inference) or loss and parameter gradients
// (training) against the yardstick -- d500's reference executor in double precision, on the same
// float32 weights and inputs, with the same micro-batches -- with a tolerance that scales with
// the graph's depth and its longest reduction.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/graph.hpp"
#include "backends/registry.hpp"
#include "metrics/metrics.hpp"
#include "networks/executor.hpp"

namespace d500 {

struct ToleranceBasis {
  int depth = 0;         // computing nodes on the longest chain from an input to an output (twice, training)
  double terms = 1;      // the longest sum a float32 result is made of
  double tolerance = 0;  // the formula at `terms` and `depth`: no tensor's own is larger
  std::string words;     // the formula with its numbers, for the point's validation method
  // Each tensor's own formula, by graph tensor id: for what a step reports of it (an output's or
  // the loss's value, a weight's gradient), K the longest float32 sum and D the computing nodes on
  // the longest chain it is computed through (a weight's gradient: the forward pass to the loss,
  // then back to the weight's node), and 1e-6 max(10, 4 sqrt(K)) sqrt(D). A tensor not listed
  // (depth 0) is held to `tolerance`'s float32 formula.
  struct Own {
    double terms = 1;
    int depth = 0;
    double tolerance = 0;
  };
  std::vector<Own> own;
  // math = "tf32": 10, "bf16": 7, the mantissa bits its products' inputs keep (judge_step then
  // allows each tensor what that rounding, simulated, moves it, and float32's tolerance below
  // that); 0 otherwise.
  int reduced_mantissa = 0;
  // With reduced_mantissa: the tensors the step stores in that precision (GraphExecutor::
  // bf16_plan(): math = "bf16" on a backend that keeps activations in bfloat16), whose stores the
  // simulation rounds too (ExecutorSpec::reduced_storage); empty: none.
  std::vector<bool> reduced_storage;
  // With reduced_mantissa: a convolution's bias added after its result is rounded, as the step's
  // backend does (ExecutorSpec::bias_after_rounding).
  bool bias_after_rounding = false;
  double float_tolerance = 0;  // the formula for float32 arithmetic (`tolerance` before the math's terms)
};
// loss < 0: inference.
ToleranceBasis network_tolerance(const Graph& g, int loss);
// The float32 formula of each of a step's tensors (step_values' order: the outputs, or the loss
// and the gradient of each of `params`): its own where `b` has it, else b.float_tolerance.
std::vector<ToleranceBasis::Own> step_formulas(const ToleranceBasis& b, const Graph& g, bool training, int loss,
                                               const std::vector<int>& params);
// `b` for a point whose math is "tf32" (tf32_math): each convolution and matrix product may round
// its float32 inputs to TF32, which adds rounded_inputs_tolerance(10) (8u, u = 2^-11) per node on
// the longest chain, grown as the float32 term grows (sqrt(D)); with "bf16" (bf16_math), inputs
// rounded to bfloat16 (rounded_inputs_tolerance(7), 8u, u = 2^-8) and a convolution's result too
// (u): 9u sqrt(D); `b` itself otherwise. It also sets reduced_mantissa (10, 7). That formula is
// the words' bound only: it is no allowance (bf16's is 0.4 on ResNet-20, where a gradient 2% off
// would pass), judge_step allows each tensor its simulated distance instead. With a reduced math
// and `runner` d500's executor, reduced_storage is what that executor stores in bfloat16.
ToleranceBasis with_point_math(ToleranceBasis b, const Params& point, const GraphRunner* runner = nullptr);

// What a step computed: named tensors as doubles.
struct StepValues {
  std::vector<std::string> names;
  std::vector<std::vector<double>> values;
};
// Inference: every graph output; training: the loss and every parameter's gradient.
StepValues step_values(GraphRunner& r, const Graph& g, const std::vector<int>& params, bool training);
// Runs one step of the yardstick (every micro-batch's forward and, training, backward pass) and
// returns it, its tensors and gradients to be read (or its weights perturbed, in tests);
// `rounding_noise`, `reduced_mantissa`, `reduced_storage`, `kinks`: ExecutorSpec's (0, empty, nullptr: exact).
std::unique_ptr<GraphExecutor> run_yardstick(const Graph& g, bool training, int loss, const std::vector<int>& params,
                                             const std::vector<const void*>& inputs, int micro_batches,
                                             std::uint64_t rounding_noise = 0, int reduced_mantissa = 0,
                                             const std::vector<bool>& reduced_storage = {},
                                             bool bias_after_rounding = false, KinkBranches* kinks = nullptr);
// One step of the yardstick (all micro-batches): what step_values reads from run_yardstick's.
StepValues yardstick_step(const Graph& g, bool training, int loss, const std::vector<int>& params,
                          const std::vector<const void*>& inputs, int micro_batches);

// Where a failed validation starts: the forward pass run again keeping every tensor, on the
// backend and on the yardstick, compared node by node; the first node whose output is off by
// more than `tolerance` ("" when the forward pass agrees everywhere). Costs a forward pass of
// each with no buffer reuse: only for points that failed.
std::string first_divergence(const Graph& g, const BackendInfo& backend, const Params* point,
                             const std::vector<const void*>& inputs, int micro_batches, int threads, double tolerance);

// The worst relative L2 error over the tensors, each against max(|ref|, 1e-4 x the RMS of the
// reference tensors' norms), so that a gradient that is zero in exact arithmetic (float noise
// only) is measured against a typical tensor's scale.
struct Discrepancy {
  double worst = 0;
  std::string where;
};
Discrepancy compare_steps(const StepValues& got, const StepValues& ref);
// Each tensor's relative L2 error, as compare_steps measures it.
std::vector<double> step_errors(const StepValues& got, const StepValues& ref);

// How far float32's rounding alone moves the yardstick's step: the yardstick run `runs` times
// more with float32's rounding simulated on every value a node writes (ExecutorSpec::
// rounding_noise, seeds 1 to runs: Monte Carlo arithmetic), each tensor's largest relative L2
// distance from `exact` (as step_errors measures it). Large where the step is ill-conditioned: a
// gradient that is a small sum of large terms of both signs (a batch normalisation's at batch 1).
// `kinks`: its runs' kinks reported there too (kink_distance's Measure runs).
std::vector<double> rounding_spread(const Graph& g, bool training, int loss, const std::vector<int>& params,
                                    const std::vector<const void*>& inputs, int micro_batches, const StepValues& exact,
                                    int runs = 2, KinkBranches* kinks = nullptr);
// How far the reduced precision of a point's products alone moves the yardstick's step: the
// yardstick run twice more (without and with float32's noise: the largest distance of the two) with every Conv,
// ConvTranspose, Gemm and MatMul input (and, backward, the output gradient it reads) rounded to `bits` mantissa bits,
// to nearest even (ExecutorSpec:: reduced_mantissa; 10: TF32), and with `storage` every store into the tensors it
// marks too (ExecutorSpec::reduced_storage), each tensor's relative L2 distance from `exact`. A
// training step through batch normalisations is ill-conditioned for these roundings: ResNet-20's gradients move by
// 6-10% under TF32's, far beyond 8u sqrt(D).
std::vector<double> reduced_precision_distance(const Graph& g, bool training, int loss, const std::vector<int>& params,
                                               const std::vector<const void*>& inputs, int micro_batches,
                                               const StepValues& exact, int bits, const std::vector<bool>& storage = {},
                                               bool bias_after_rounding = false);
// How far the branches float32 may take at Relu kinks move a training step (networks/kinks.hpp):
// the yardstick's forward pass run once exact, recording each Relu, AddRelu and BatchNormRelu
// input near zero, then rounding_spread's `runs` runs (whose spread it returns too), measuring
// each node's largest move of those; an input is within float32's reach of its kink
// when |v| <= kKinkReach x its node's move (Monte Carlo arithmetic moves v by its stored values'
// rounding; a float32 step's own sums move it 3-5 times as far, measured on ResNet-20 against
// PyTorch's float32 step). Where any is, the step is run twice more with them taking the other
// branch (all of them, then a seeded half where that is fewer), each tensor's largest relative
// L2 distance from `exact` (as step_errors measures it); zeros where none is. 5: the largest
// move of a node's candidates is about 3 standard deviations of the simulation's, float32's is
// 3-5 times that, and an input beyond 3 of float32's rarely crosses; at 10, ResNet-20 at batch 32
// had 48 inputs within reach, whose flips let a 2% error pass in 51 of its 66 tensors.
constexpr double kKinkReach = 5;
struct KinkDistance {
  std::vector<double> distance;     // per tensor of `exact`
  std::vector<double> spread;       // rounding_spread's, of the same runs
  std::int64_t ambiguous = 0;       // inputs within reach, all micro-batches
  std::int64_t elements = 0;        // inputs of kinks, all micro-batches
  double move_lo = 0, move_hi = 0;  // the nodes' moves relative to their inputs' RMS
};
KinkDistance kink_distance(const Graph& g, int loss, const std::vector<int>& params,
                           const std::vector<const void*>& inputs, int micro_batches, const StepValues& exact,
                           int runs = 2);
// A step that took the other branch at some of those inputs is allowed kKinkFactor x that
// distance: the step's set of branches is one of many, and its own rounding comes on top.
constexpr double kKinkFactor = 2;

// The second opinion on a step that failed the formula's tolerance: each tensor t is allowed
// max(tolerance[t] (its formula), kSpreadFactor x its rounding spread, kReducedFactor x its reduced-precision
// distance, kKinkFactor x its kink distance (none: zero)). Returns the tensor whose error is the
// largest share of its allowance (its error and name) and that allowance in `allowed`: the step
// passes when worst <= allowed.
constexpr double kSpreadFactor = 10;
// A backend's TF32 products round the same inputs, but in its own order of sums, with its own
// algorithms (a Winograd or FFT convolution rounds transformed values) and perhaps not to
// nearest: its distance from the exact step is allowed three times the simulated one.
constexpr double kReducedFactor = 3;
Discrepancy judge_with_spread(const StepValues& got, const StepValues& ref, const std::vector<double>& tolerance,
                              const std::vector<double>& spread, double& allowed,
                              const std::vector<double>& reduced = {}, const std::vector<double>& kinks = {});

// A step's validation: every tensor against its own formula (`basis`, step_formulas; with reduced
// math, float32's); where one exceeds it, the second opinion (rounding_spread over the yardstick's run of
// `g`, twice; in a float32 training step kink_distance too; with basis.reduced_mantissa
// reduced_precision_distance and no kink_distance; then judge_with_spread). `error` is the decisive
// tensor's (`where`), `tolerance` its allowance: the step passes when error <= tolerance. `words`
// says how the tolerance was set.
struct StepJudgement {
  double error = 0, tolerance = 0;
  std::string where, words;
  // The judgement's power: of `tensors`, those in which the same step with that one tensor 2%
  // larger (a gradient scaled by 1.02, as a wrong factor would) fails.
  int tensors = 0, caught_2pct = 0;
  // What the results file records of it.
  StepVerdict verdict() const { return {where, error, tolerance, tensors, caught_2pct}; }
};
// `share`, when not empty, names the graph, its weights and inputs and `ref` (a job's points on
// one network): the second opinion's yardstick runs are kept for later judgements of that name.
StepJudgement judge_step(const StepValues& got, const StepValues& ref, const ToleranceBasis& basis, const Graph& g,
                         bool training, int loss, const std::vector<int>& params,
                         const std::vector<const void*>& inputs, int micro_batches, const std::string& share = "");

}  // namespace d500
