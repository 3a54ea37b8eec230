#pragma once
// Test helper: builds small graphs directly in d500's IR (as the ONNX loader would leave them),
// with seeded weights, and runs them through d500's executor.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends/graph.hpp"
#include "backends/registry.hpp"
#include "common/random.hpp"
#include "common/text.hpp"
#include "networks/executor.hpp"
#include "networks/onnx.hpp"
#include "networks/validate.hpp"

namespace d500::test {

// Why this CPU does not compute in bfloat16 as the tests of math = "bf16" on it need ("" when it
// does): oneDNN 2.6 has bfloat16 kernels from AVX-512 on (its backend's version names the kernels
// it runs), and LibTorch's CPU autocast, on its own oneDNN, was seen to err 0.35 in a ResidualBlock's
// loss on an AVX2 EPYC where the bfloat16 model allows 0.13 (2.7 times its simulated distance).
inline std::string no_cpu_bf16_here(const BackendInfo& b) {
  const std::string v = b.version ? b.version() : "";
  if (v.find("avx512") != std::string::npos || v.find("other kernels") != std::string::npos) return "";
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  if (v.find("kernels") == std::string::npos && __builtin_cpu_supports("avx512bw")) return "";  // not oneDNN's
#endif
  return "this CPU has no AVX-512 (" + (v.empty() ? b.name : v) +
         "): oneDNN 2.6 computes bfloat16 from AVX-512 on, and LibTorch's bfloat16 autocast was seen to err beyond "
         "the bfloat16 model without it";
}

struct GraphBuilder {
  Graph g;
  std::uint64_t seed = 1;
  GraphBuilder() { g.opset = 17; }

  static std::vector<std::byte> bytes_of(const std::vector<float>& v) {
    std::vector<std::byte> b(v.size() * 4);
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
  }
  // A float weight (an initializer: trainable) filled uniformly in [lo, hi] from the seed.
  int weight(const std::string& name, Shape s, float lo = -1, float hi = 1) {
    std::vector<float> v(static_cast<std::size_t>(numel(s)));
    fill_uniform(v.data(), v.size(), seed++, lo, hi);
    const int t = g.add_tensor({name, DType::F32, std::move(s)});
    g.constants[t] = bytes_of(v);
    g.initializers.insert(t);
    return t;
  }
  // A constant that is not a weight (never trainable).
  int constant(const std::string& name, DType d, Shape s, const std::vector<std::byte>& data) {
    const int t = g.add_tensor({name, d, std::move(s)});
    g.constants[t] = data;
    return t;
  }
  int constant_f(const std::string& name, Shape s, float lo = -1, float hi = 1) {
    std::vector<float> v(static_cast<std::size_t>(numel(s)));
    fill_uniform(v.data(), v.size(), seed++, lo, hi);
    return constant(name, DType::F32, std::move(s), bytes_of(v));
  }
  int constant_i64(const std::string& name, std::vector<std::int64_t> v, Shape s = {}) {
    if (s.empty() && v.size() != 1) s = {static_cast<std::int64_t>(v.size())};
    std::vector<std::byte> b(v.size() * 8);
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return constant(name, DType::I64, s, b);
  }
  int input(const std::string& name, DType d, Shape s) {
    const int t = g.add_tensor({name, d, std::move(s)});
    g.inputs.push_back(t);
    return t;
  }
  // A node with `outs` outputs; returns the id of its first output.
  int node(const std::string& op, std::vector<int> in, std::map<std::string, Attr> attrs = {}, int outs = 1) {
    Node n;
    n.op = op;
    n.name = op + "_" + std::to_string(g.nodes.size());
    n.in = std::move(in);
    n.attrs = std::move(attrs);
    int first = -1;
    for (int j = 0; j < outs; ++j) {
      TensorInfo t{n.name + "_out" + std::to_string(j), DType::Undefined, {}};
      const int id = g.add_tensor(t);
      if (first < 0) first = id;
      n.out.push_back(id);
    }
    g.nodes.push_back(std::move(n));
    return first;
  }
  // Appends loss = sum_j sum(y_j * R_j) with random constant R_j, sets the outputs, infers.
  int finish_with_projection_loss(const std::vector<int>& ys) {
    g.outputs = ys;
    infer_and_fold(g, "test graph");  // shapes of ys first
    int loss = -1;
    for (int y : ys) {
      const int r = constant_f("R" + std::to_string(y), g.info(y).shape);
      const int prod = node("Mul", {y, r});
      const int s = node("ReduceSum", {prod}, {{"keepdims", int_attr(0)}});
      loss = loss < 0 ? s : node("Add", {loss, s});
    }
    g.outputs = {loss};
    infer_and_fold(g, "test graph");
    return loss;
  }
  std::vector<int> params() const { return std::vector<int>(g.initializers.begin(), g.initializers.end()); }
};

// Runs one training step of `g` in double (the yardstick) and returns the executor, whose
// param_data can be perturbed for finite differences.
inline std::unique_ptr<GraphExecutor> run_double(const Graph& g, int loss, const std::vector<int>& params,
                                                 const std::vector<const void*>& inputs = {}, int micros = 1) {
  return run_yardstick(g, true, loss, params, inputs, micros);
}

// Runs one float32 training step of `g` on `backend` (nullptr: the reference's kernels) with the
// point's parameters and returns the executor.
inline std::unique_ptr<GraphExecutor> run_float(const Graph& g, int loss, const std::vector<int>& params,
                                                const std::vector<const void*>& inputs = {},
                                                const BackendInfo* backend = nullptr, const Params* point = nullptr,
                                                int threads = 1) {
  ExecutorSpec s;
  s.graph = &g;
  s.backend = backend;
  s.training = true;
  s.loss = loss;
  s.params = params;
  s.inputs = inputs;
  s.point = point;
  s.threads = threads;
  auto e = std::make_unique<GraphExecutor>(s);
  e->forward(0);
  e->backward(0);
  return e;
}

}  // namespace d500::test
