#pragma once
// The operators of level 1: one table with an entry per ONNX op_type that d500 runs. An entry
// says what the op means for d500 -- its shape inference (which also normalises attributes:
// explicit pads, positive axes), its work, which inputs get gradients, which tensors its
// backward pass reads (so the executor keeps them alive) -- and holds the reference
// implementation, forward and backward, instantiated for float (the `reference` backend, timed)
// and double (the yardstick every executor is validated against). Other backends implement some
// ops with their libraries (NodeKernel) and leave the rest to the reference.
//
// The entries live in backends/reference/ops_*.cpp, one file per family.
#include <cstdint>
#include <string>
#include <vector>

#include "backends/graph.hpp"

namespace d500 {

// What shape inference sees of a node: input types and shapes, the data of constant inputs, and
// the outputs to fill in. Attributes may be rewritten into an explicit, normalised form.
struct InferCtx {
  Node& node;
  int opset = 0;
  std::vector<const TensorInfo*> in;    // nullptr: absent optional input
  std::vector<TensorInfo*> out;         // nullptr: absent optional output
  std::vector<const std::byte*> value;  // data of constant inputs; nullptr when not constant
  bool training = false;                // the graph is run for a training step

  std::size_t n_in() const { return in.size(); }
  bool has_in(std::size_t i) const { return i < in.size() && in[i] != nullptr; }
  const Shape& shape(std::size_t i) const;
  DType dtype(std::size_t i) const;
  // A constant integer input (int64 or int32) as int64 values; throws when it is not known at
  // load time ("input 'shape' of Reshape node 'r' must be a constant ...").
  std::vector<std::int64_t> ints(std::size_t i, const char* what) const;
  bool is_const(std::size_t i) const { return i < value.size() && value[i] != nullptr; }
  void set(std::size_t j, DType t, Shape s) const;  // output j, when present
  [[noreturn]] void fail(const std::string& why) const;
  // An axis attribute or value in [-rank, rank) made positive; fails naming the node otherwise.
  std::int64_t axis(std::int64_t a, std::size_t rank, const char* what) const;
  // Every input must be float32 (the networks' compute type); fails naming the offending input.
  void require_float(std::size_t first = 0, std::size_t count = 1) const;
};

template <class T>
using RefFwd = void (*)(const NodeProblem&, T* scratch);

struct OpSchema {
  const char* op = "";
  int since = 1;  // the oldest opset whose version of the op d500 implements
  void (*infer)(InferCtx&) = nullptr;
  // Reference kernels (fwd always; bwd for differentiable ops). Float tensors hold T.
  RefFwd<float> fwd_f = nullptr;
  RefFwd<double> fwd_d = nullptr;
  RefFwd<float> bwd_f = nullptr;
  RefFwd<double> bwd_d = nullptr;
  // Elements of T of scratch memory the reference kernels need (an im2col buffer), or nullptr.
  std::int64_t (*scratch)(const NodeProblem&) = nullptr;
  // Floating-point operations of the forward and the backward pass (multiply-adds count 2).
  double (*flops)(const NodeProblem&, bool backward) = nullptr;
  // Bit i: input i is differentiable (float, and the op has a gradient for it).
  std::uint32_t diff_in = 0;
  // Bit i: the backward pass reads input i / output i (the executor keeps them alive).
  std::uint32_t saved_in = 0, saved_out = 0;
  // Output 0 is input 0 with another shape (Reshape, Flatten, Squeeze, Unsqueeze, Identity,
  // Dropout): it shares its storage, and no kernel runs.
  bool view = false;
  // The op mixes samples of the batch in training (BatchNormalization): micro-batching changes
  // its result.
  bool batch_coupled_in_training = false;
  // Runs only at load time, on constant inputs (Shape, Constant, ConstantOfShape, Range).
  bool fold_only = false;
  // Not an ONNX operator: one that d500's own graph rewrites make (networks/fuse.hpp: AddRelu, BatchNormRelu), which a
  // model file may not name and the list of operators d500 runs leaves out.
  bool internal = false;
  // The op as a training pass runs it, where that differs (Dropout: drops values, so no view);
  // nullptr: the same in both passes.
  const OpSchema* training = nullptr;
};

// The table, and lookups. `find_op` returns nullptr for an op d500 does not run.
const std::vector<OpSchema>& op_table();
const OpSchema* find_op(const std::string& op);
// BatchNormalization, or the internal BatchNormRelu that ends in a Relu (networks/fuse.hpp): a
// normalisation whose inputs 3 and 4 are the running statistics a training executor keeps.
inline bool is_batch_norm(const std::string& op) { return op == "BatchNormalization" || op == "BatchNormRelu"; }
// "Add, AveragePool, ...": for error messages and `d500 networks`.
std::string supported_ops_text();
// The model opsets d500 accepts for the default domain.
inline constexpr int kMinOpset = 7, kMaxOpset = 17;

// Runs node `p` forward (or backward) with the reference implementation in T, on buffers the
// caller owns (scratch as op.scratch says). Throws for an op without a backward pass.
template <class T>
void reference_forward(const OpSchema& op, const NodeProblem& p, T* scratch);
template <class T>
void reference_backward(const OpSchema& op, const NodeProblem& p, T* scratch);

// The reference as a NodeKernel: in float, what the `reference` backend runs and what every other
// backend falls back to for nodes it has no kernel for; in double, the validation yardstick.
std::unique_ptr<NodeKernel> make_reference_node_kernel(const NodeProblem& p, bool double_precision = false);
// Dropout's mask key in a training pass: from the node's `seed` attribute (else its name), the
// step and the pass's number within the step; every executor draws keep_element(key, i, ratio)
// (common/random.hpp) with it, so all drop the same elements.
std::uint64_t dropout_key(const Node& n, std::int64_t step, std::int64_t call);

}  // namespace d500
