// The one table of level-1 operators (backends/graph_ops.hpp), joined from each family's file,
// and the reference as a NodeKernel.
#include <algorithm>

#include "backends/reference/ops_common.hpp"
#include "common/random.hpp"

namespace d500 {

const Shape& InferCtx::shape(std::size_t i) const {
  if (!has_in(i)) fail("input " + std::to_string(i) + " is missing");
  return in[i]->shape;
}

DType InferCtx::dtype(std::size_t i) const {
  if (!has_in(i)) fail("input " + std::to_string(i) + " is missing");
  return in[i]->dtype;
}

std::vector<std::int64_t> InferCtx::ints(std::size_t i, const char* what) const {
  if (!has_in(i)) fail(std::string("its input '") + what + "' is missing");
  if (!is_const(i))
    fail(std::string("its input '") + what + "' ('" + in[i]->name +
         "') must be known at load time: d500 runs static graphs, and it could not compute this value from "
         "constants and shapes");
  const DType t = in[i]->dtype;
  const std::int64_t n = numel(in[i]->shape);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) {
    if (t == DType::I64)
      v[static_cast<std::size_t>(k)] = reinterpret_cast<const std::int64_t*>(value[i])[k];
    else if (t == DType::I32)
      v[static_cast<std::size_t>(k)] = reinterpret_cast<const std::int32_t*>(value[i])[k];
    else
      fail(std::string("its input '") + what + "' must be int64 or int32");
  }
  return v;
}

void InferCtx::set(std::size_t j, DType t, Shape s) const {
  if (j < out.size() && out[j]) {
    if (s.size() > ref::kMaxRank)
      fail("its output would have " + std::to_string(s.size()) + " axes; d500 supports at most 8");
    out[j]->dtype = t;
    out[j]->shape = std::move(s);
  }
}

void InferCtx::fail(const std::string& why) const { throw Error(node.label() + ": " + why); }

std::int64_t InferCtx::axis(std::int64_t a, std::size_t rank, const char* what) const {
  const auto r = static_cast<std::int64_t>(rank);
  if (a < -r || a >= r)
    fail(std::string(what) + " " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
  return a < 0 ? a + r : a;
}

void InferCtx::require_float(std::size_t first, std::size_t count) const {
  for (std::size_t i = first; i < first + count && i < in.size(); ++i)
    if (in[i] && in[i]->dtype != DType::F32)
      fail("input " + std::to_string(i) + " ('" + in[i]->name + "') is " + dtype_name(in[i]->dtype) +
           "; this operator runs on float32");
}

const std::vector<OpSchema>& op_table() {
  static const std::vector<OpSchema> table = [] {
    std::vector<OpSchema> t;
    ref::add_elementwise_ops(t);
    ref::add_linalg_ops(t);
    ref::add_conv_ops(t);
    ref::add_norm_ops(t);
    ref::add_shape_ops(t);
    ref::add_reduce_ops(t);
    ref::add_index_ops(t);
    ref::add_rnn_ops(t);
    std::sort(t.begin(), t.end(), [](const OpSchema& a, const OpSchema& b) { return std::string(a.op) < b.op; });
    return t;
  }();
  return table;
}

std::uint64_t dropout_key(const Node& n, std::int64_t step, std::int64_t call) {
  std::uint64_t seed = static_cast<std::uint64_t>(n.attr_i("seed", 0));
  if (!n.has("seed")) {
    seed = 0xcbf29ce484222325ull;
    for (unsigned char ch : n.name) seed = (seed ^ ch) * 0x100000001b3ull;  // FNV-1a of its name
  }
  return mix_key(seed, static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(call));
}

const OpSchema* find_op(const std::string& op) {
  for (const auto& s : op_table())
    if (op == s.op) return &s;
  return nullptr;
}

std::string supported_ops_text() {
  std::string s;
  for (const auto& o : op_table())
    if (!o.internal) s += (s.empty() ? "" : ", ") + std::string(o.op);
  return s;
}

template <>
void reference_forward<float>(const OpSchema& op, const NodeProblem& p, float* scratch) {
  op.fwd_f(p, scratch);
}
template <>
void reference_forward<double>(const OpSchema& op, const NodeProblem& p, double* scratch) {
  op.fwd_d(p, scratch);
}
template <>
void reference_backward<float>(const OpSchema& op, const NodeProblem& p, float* scratch) {
  if (!op.bwd_f) throw Error(p.node->label() + ": " + op.op + " has no gradient");
  op.bwd_f(p, scratch);
}
template <>
void reference_backward<double>(const OpSchema& op, const NodeProblem& p, double* scratch) {
  if (!op.bwd_d) throw Error(p.node->label() + ": " + op.op + " has no gradient");
  op.bwd_d(p, scratch);
}

namespace {

template <class T>
class ReferenceNodeKernel final : public NodeKernel {
 public:
  ReferenceNodeKernel(const OpSchema& op, const NodeProblem& p) : op_(op), p_(p) {
    if (op.scratch) scratch_.resize(static_cast<std::size_t>(op.scratch(p)));
  }
  void forward() override { reference_forward<T>(op_, p_, scratch_.data()); }
  void backward() override { reference_backward<T>(op_, p_, scratch_.data()); }
  std::string impl() const override { return sizeof(T) == 8 ? "reference (double)" : "reference"; }

 private:
  const OpSchema& op_;
  NodeProblem p_;
  std::vector<T> scratch_;  // allocated here, untimed
};

}  // namespace

std::unique_ptr<NodeKernel> make_reference_node_kernel(const NodeProblem& p, bool double_precision) {
  const OpSchema* op = find_op(p.node->op);
  if (!op) throw Error(p.node->label() + ": d500 has no " + p.node->op + " (it runs: " + supported_ops_text() + ")");
  if (p.training && op->training) op = op->training;
  if (double_precision) return std::make_unique<ReferenceNodeKernel<double>>(*op, p);
  return std::make_unique<ReferenceNodeKernel<float>>(*op, p);
}

}  // namespace d500
