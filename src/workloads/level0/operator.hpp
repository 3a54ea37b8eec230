#pragma once
// Level-0 neural-network operators (conv2d, pool2d, batchnorm, relu, softmax) share one workload:
// an operator definition says what its tensors are for a point's parameters, how to fill its
// inputs, and how the reference computes its outputs; a backend supplies a kernel bound to the
// workload's buffers. The workload validates every backend against the reference computed in
// double precision on the same inputs, then times kernel runs through the Harness.
//
// Adding an operator: one file defining an OperatorDef and a line in builtin.cpp. The kernel
// contract (OpProblem, Tensor, OpKernel) lives in backends/kernel.hpp; a backend offers kernels
// through its BackendInfo (backends/registry.hpp), from its own folder.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/kernel.hpp"
#include "workloads/registry.hpp"

namespace d500 {

template <class T>
using RefFn = std::function<void(const OpProblem&, const std::vector<const T*>& in, const std::vector<T*>& out)>;

struct OperatorDef {
  WorkloadInfo info;  // name, description, rate unit, parameters, normalize, check; backends are added
  // The tensors (no data yet), work and tolerance of a normalised point.
  std::function<OpProblem(const Params&)> problem;
  // Inputs the reference derives from random ones (a softmax output for the backward pass):
  // called after the random fill with the problem in double; may overwrite inputs.
  std::function<void(const OpProblem&, std::vector<std::vector<double>>& in)> derive;
  RefFn<float> ref_float;    // the `reference` backend's timed computation
  RefFn<double> ref_double;  // the yardstick for validation
};

// The operators built into d500 (builtin.cpp), for tests and benchmarks.
const std::vector<OperatorDef>& builtin_operators();
const OperatorDef* find_operator(const std::string& name);

// Registers `def` with the reference backend and every backend that has kernels for it.
void register_operator(WorkloadRegistry& r, OperatorDef def);

// What every operator's WorkloadInfo starts with: level 0, weak scaling (every rank solves its own
// problem of the same size; `what` says what in words).
WorkloadInfo operator_info(std::string name, std::string description, std::string rate_unit, const std::string& what);
// n, c, h, w of an NCHW activation, and the normalize that makes w default to h.
std::vector<ParamSpec> nchw_params();
void width_defaults_to_height(Params& p);

// Parameters every workload that runs on backends takes (levels 0-3): threads, and the
// backends' own settings (backends/settings.hpp: each backend declares its keys in its folder).
std::vector<ParamSpec> operator_common_params();
// "" when the point's backend takes the settings the point sets (check_backend_settings).
std::string operator_common_check(const Params& p);
// A level-0 `dtype` other than float32 (gemm: tf32, bf16, fp16; conv2d: bf16, fp16) needs a
// backend that computes in reduced precision (BackendInfo::reduced_precision): "" when the
// point's backend does, else why not, naming the backends that would.
std::string reduced_precision_check(const Params& p);

// Creates the problem of a point with its inputs filled from `seed` (deterministically: the same
// numbers on every backend), as the workload does; exposed for tests and benchmarks.
OpProblem make_problem(const OperatorDef& def, const Params& p, std::uint64_t seed);

// The bytes a point of this operator allocates per rank (WorkloadInfo::memory_bytes): tensors,
// staging, the validation reference and the backend's workspace bound.
std::int64_t operator_memory_bytes(const OperatorDef& def, const Params& p);

// Compares a kernel's outputs with the double reference (the whole problem, or its first images
// when every tensor is batched and the batch is large). Returns the worst relative error norm.
Validation validate_outputs(const OperatorDef& def, const OpProblem& p);

}  // namespace d500
