#include "networks/prepare.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "common/random.hpp"
#include "networks/onnx.hpp"

namespace d500 {
namespace {

int add_node(Graph& g, const std::string& op, std::vector<int> in, std::map<std::string, Attr> attrs,
             const std::string& out_name) {
  Node n;
  n.op = op;
  n.name = out_name;
  n.in = std::move(in);
  n.attrs = std::move(attrs);
  const int out = g.add_tensor({out_name, DType::Undefined, {}});
  n.out = {out};
  g.nodes.push_back(std::move(n));
  return out;
}

}  // namespace

TrainingLoss add_training_loss(Graph& g) {
  TrainingLoss r;
  for (int t : g.outputs)
    if (g.info(t).dtype == DType::F32 && g.info(t).shape.empty()) {
      r.loss = t;
      r.description = "the model's own loss, output '" + g.info(t).name + "'";
      return r;
    }
  if (g.outputs.empty() || g.info(g.outputs[0]).dtype != DType::F32)
    throw Error(g.name + ": its first output is not float32, so d500 cannot append a loss for a training step");
  const int y = g.outputs[0];
  const Shape ys = g.info(y).shape;
  const Attr zero = int_attr(0);
  if (ys.size() == 2 && ys[1] >= 2) {
    r.labels = g.add_tensor({"d500_labels", DType::I64, {ys[0]}});
    g.inputs.push_back(r.labels);
    r.loss = add_node(g, "SoftmaxCrossEntropyLoss", {y, r.labels}, {}, "d500_loss");
    r.description = "softmax cross-entropy (mean over the batch) of output '" + g.info(y).name + "' " + shape_str(ys) +
                    " against seeded labels in [0, " + std::to_string(ys[1]) + ")";
  } else {
    r.target = g.add_tensor({"d500_target", DType::F32, ys});
    g.inputs.push_back(r.target);
    const int d = add_node(g, "Sub", {y, r.target}, {}, "d500_error");
    const int sq = add_node(g, "Mul", {d, d}, {}, "d500_squared_error");
    r.loss = add_node(g, "ReduceMean", {sq}, {{"keepdims", zero}}, "d500_loss");
    r.description =
        "mean squared error of output '" + g.info(y).name + "' " + shape_str(ys) + " against a seeded target";
  }
  g.outputs.push_back(r.loss);
  infer_and_fold(g, g.name + " with the training loss");
  return r;
}

std::vector<const void*> InputData::pointers() const {
  std::vector<const void*> p;
  for (const auto& b : bytes) p.push_back(b.data());
  return p;
}

InputData make_inputs(const Graph& g, int micro_batches, std::uint64_t seed) {
  InputData d;
  for (std::size_t k = 0; k < g.inputs.size(); ++k) {
    const int t = g.inputs[k];
    const TensorInfo& info = g.info(t);
    const std::size_t n = static_cast<std::size_t>(numel(info.shape)) * static_cast<std::size_t>(micro_batches);
    const std::uint64_t s = seed * 0x9e3779b97f4a7c15ull + k + 1;  // one stream per input
    std::vector<std::byte> b(n * dtype_size(info.dtype));
    if (info.dtype == DType::F32) {
      fill_uniform(reinterpret_cast<float*>(b.data()), n, s);
      d.descriptions.push_back(info.name + " " + shape_str(info.shape) + " float32 uniform in [-1, 1)");
    } else if (info.dtype == DType::I64 || info.dtype == DType::I32) {
      // The valid range: the axis a Gather indexes, or a loss's classes.
      std::int64_t range = 0;
      std::string use;
      for (const auto& node : g.nodes)
        for (std::size_t i = 0; i < node.in.size(); ++i) {
          if (node.in[i] != t || i != 1) continue;
          if (node.op == "Gather") {
            const Shape& data = g.info(node.in[0]).shape;
            range = data[static_cast<std::size_t>(node.attr_i("axis", 0))];
            use = "indices of " + node.label();
          } else if (node.op == "SoftmaxCrossEntropyLoss") {
            range = g.info(node.in[0]).shape[1];
            use = "labels of " + node.label();
          }
        }
      if (range <= 0)
        throw Error(g.name + ": d500 cannot make data for input '" + info.name + "' (" + dtype_name(info.dtype) +
                    "): it makes float inputs, Gather indices and a loss's labels");
      std::vector<std::int64_t> v(n);
      fill_uniform_index(v.data(), n, s, range);
      if (info.dtype == DType::I64) {
        std::memcpy(b.data(), v.data(), b.size());
      } else {
        auto* p = reinterpret_cast<std::int32_t*>(b.data());
        for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::int32_t>(v[i]);
      }
      d.descriptions.push_back(info.name + " " + shape_str(info.shape) + " " + dtype_name(info.dtype) +
                               " uniform in [0, " + std::to_string(range) + ") (" + use + ")");
    } else {
      throw Error(g.name + ": d500 cannot make data for input '" + info.name + "' (" + dtype_name(info.dtype) + ")");
    }
    d.bytes.push_back(std::move(b));
  }
  return d;
}

std::string seeded_weights(Graph& g, const std::vector<int>& params, std::uint64_t seed) {
  int drawn = 0;
  for (std::size_t k = 0; k < params.size(); ++k) {
    const int t = params[k];
    const Shape& s = g.info(t).shape;
    if (s.size() < 2 || g.info(t).dtype != DType::F32) continue;
    std::int64_t fan_in = numel(s) / s[0];
    for (const Node& n : g.nodes) {  // stored [in, out]: MatMul's B, Gemm's B without transB
      if (n.in.size() > 1 && n.in[1] == t && s.size() == 2 &&
          (n.op == "MatMul" || (n.op == "Gemm" && n.attr_i("transB", 0) == 0)))
        fan_in = s[0];
    }
    auto& bytes = g.constants.at(t);
    const float bound = static_cast<float>(std::sqrt(6.0 / static_cast<double>(std::max<std::int64_t>(1, fan_in))));
    fill_uniform(reinterpret_cast<float*>(bytes.data()), static_cast<std::size_t>(numel(s)),
                 seed * 0x9e3779b97f4a7c15ull + k + 1, -bound, bound);
    ++drawn;
  }
  return std::to_string(drawn) +
         " weight tensors drawn He-uniform U(-sqrt(6/fan_in), sqrt(6/fan_in)) from the point's seed; "
         "one-dimensional parameters (biases, normalisation) as in the model";
}

}  // namespace d500
