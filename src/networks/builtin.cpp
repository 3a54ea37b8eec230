// The built-in networks, as ONNX models built with the protobuf API: the ops and layouts PyTorch
// exports (opset 17), a symbolic batch axis "N", weights seeded per network.
#include "networks/builtin.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <variant>

#include "backends/graph_ops.hpp"
#include "common/error.hpp"
#include "common/random.hpp"
#include "networks/executor.hpp"
#include "networks/onnx_proto.hpp"
#include "networks/prepare.hpp"

namespace d500 {
namespace {

constexpr int kOpset = 17;

// Whether the networks built now get their seeded weights (LoadOptions::weights).
thread_local bool t_seeded_weights = true;

using AttrValue = std::variant<std::int64_t, float, std::string, std::vector<std::int64_t>>;

class Builder {
 public:
  Builder(const std::string& name, std::uint64_t seed) : seed_(seed) {
    m_.set_ir_version(8);
    m_.set_producer_name("d500");
    m_.set_producer_version("built-in network");
    auto* op = m_.add_opset_import();
    op->set_domain("");
    op->set_version(kOpset);
    g_ = m_.mutable_graph();
    g_->set_name(name);
  }

  // A graph input; -1 in `dims` is the symbolic batch axis "N".
  std::string input(const std::string& name, int type, const std::vector<std::int64_t>& dims) {
    value_info(g_->add_input(), name, type, dims);
    return name;
  }
  void output(const std::string& name, int type, const std::vector<std::int64_t>& dims) {
    value_info(g_->add_output(), name, type, dims);
  }
  // A float initializer: uniform in [-bound, bound], or all `value` when bound is 0.
  // Names are made unique with a counter ("conv_w_3").
  std::string weight(const std::string& base, const std::vector<std::int64_t>& dims, float bound, float value = 0) {
    const std::string name = fresh(base);
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    std::int64_t n = 1;
    for (auto d : dims) t->add_dims(d), n *= d;
    std::string raw(static_cast<std::size_t>(n) * 4, '\0');
    float* f = reinterpret_cast<float*>(raw.data());
    if (bound > 0) {
      ++weights_;  // the same seeds for the later weights whether or not this one is filled
      if (t_seeded_weights)
        fill_uniform(f, static_cast<std::size_t>(n), seed_ * 0x9e3779b97f4a7c15ull + weights_, -bound, bound);
    } else
      std::fill(f, f + n, value);
    t->set_raw_data(std::move(raw));
    return name;
  }
  // He-uniform for a weight whose fan-in is `fan_in`.
  std::string he(const std::string& name, const std::vector<std::int64_t>& dims, std::int64_t fan_in) {
    return weight(name, dims, std::sqrt(6.0f / static_cast<float>(fan_in)));
  }
  // An int64 initializer: 1-D, or a scalar when `scalar`.
  std::string ints(const std::string& base, const std::vector<std::int64_t>& v, bool scalar = false) {
    const std::string name = fresh(base);
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<std::int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
    return name;
  }
  // A scalar float made by a Constant node (as exporters write them): not a weight.
  std::string scalar(float v) {
    const std::string out = fresh("const");
    auto* n = g_->add_node();
    n->set_op_type("Constant");
    n->set_name(out);
    n->add_output(out);
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    auto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(v);
    return out;
  }
  std::string node(const std::string& op, const std::vector<std::string>& in,
                   const std::map<std::string, AttrValue>& attrs = {}, int outputs = 1) {
    auto* n = g_->add_node();
    n->set_op_type(op);
    const std::string out = fresh(op);
    n->set_name(out);
    for (const auto& i : in) n->add_input(i);
    for (int k = 0; k < outputs; ++k) n->add_output(k == 0 ? out : out + "_" + std::to_string(k));
    for (const auto& [k, v] : attrs) {
      auto* a = n->add_attribute();
      a->set_name(k);
      if (std::holds_alternative<std::int64_t>(v))
        a->set_type(onnx::AttributeProto::INT), a->set_i(std::get<std::int64_t>(v));
      else if (std::holds_alternative<float>(v))
        a->set_type(onnx::AttributeProto::FLOAT), a->set_f(std::get<float>(v));
      else if (std::holds_alternative<std::string>(v))
        a->set_type(onnx::AttributeProto::STRING), a->set_s(std::get<std::string>(v));
      else {
        a->set_type(onnx::AttributeProto::INTS);
        for (auto x : std::get<std::vector<std::int64_t>>(v)) a->add_ints(x);
      }
    }
    return out;
  }
  onnx::ModelProto take() { return std::move(m_); }

  // Layers, as PyTorch exports them.
  std::string conv(const std::string& x, std::int64_t cin, std::int64_t cout, std::int64_t k, std::int64_t stride,
                   std::int64_t pad, bool bias) {
    const std::string w = he("conv_w", {cout, cin, k, k}, cin * k * k);
    std::vector<std::string> in{x, w};
    if (bias) in.push_back(weight("conv_b", {cout}, 0));
    return node("Conv", in,
                {{"kernel_shape", std::vector<std::int64_t>{k, k}},
                 {"strides", std::vector<std::int64_t>{stride, stride}},
                 {"pads", std::vector<std::int64_t>{pad, pad, pad, pad}}});
  }
  std::string bn(const std::string& x, std::int64_t c, float gamma = 1.0f) {
    return node("BatchNormalization",
                {x, weight("bn_scale", {c}, 0, gamma), weight("bn_bias", {c}, 0), weight("bn_mean", {c}, 0),
                 weight("bn_var", {c}, 0, 1.0f)},
                {{"epsilon", 1e-5f}, {"momentum", 0.9f}});
  }
  // PyTorch's Linear: Gemm with W [out, in] transposed.
  std::string linear(const std::string& x, std::int64_t in, std::int64_t out) {
    return node("Gemm", {x, he("fc_w", {out, in}, in), weight("fc_b", {out}, 0)}, {{"transB", std::int64_t{1}}});
  }
  std::string relu(const std::string& x) { return node("Relu", {x}); }

 private:
  void value_info(onnx::ValueInfoProto* v, const std::string& name, int type, const std::vector<std::int64_t>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (auto d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
    }
  }
  std::string fresh(const std::string& base) { return base + "_" + std::to_string(counter_[base]++); }

  onnx::ModelProto m_;
  onnx::GraphProto* g_;
  std::uint64_t seed_, weights_ = 0;
  std::map<std::string, int> counter_;
};

using I = std::int64_t;
using Ints = std::vector<std::int64_t>;

onnx::ModelProto mlp() {
  Builder b("mlp", 1);
  std::string x = b.input("image", onnx::TensorProto::FLOAT, {-1, 1, 28, 28});
  x = b.node("Flatten", {x}, {{"axis", I{1}}});
  x = b.relu(b.linear(x, 784, 512));
  x = b.relu(b.linear(x, 512, 256));
  b.output(b.linear(x, 256, 10), onnx::TensorProto::FLOAT, {-1, 10});
  return b.take();
}

onnx::ModelProto lenet5() {
  Builder b("lenet5", 2);
  std::string x = b.input("image", onnx::TensorProto::FLOAT, {-1, 1, 28, 28});
  auto pool = [&](const std::string& v) {
    return b.node("MaxPool", {v}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  };
  x = pool(b.relu(b.conv(x, 1, 6, 5, 1, 2, true)));
  x = pool(b.relu(b.conv(x, 6, 16, 5, 1, 0, true)));
  x = b.node("Flatten", {x}, {{"axis", I{1}}});
  x = b.relu(b.linear(x, 400, 120));
  x = b.relu(b.linear(x, 120, 84));
  b.output(b.linear(x, 84, 10), onnx::TensorProto::FLOAT, {-1, 10});
  return b.take();
}

// A wider CNN for Fashion-MNIST (as in Keras's and PyTorch's Fashion-MNIST examples): two 3x3
// convolutions (32, 64 channels) each with ReLU and 2x2 max pooling, then 128 and 10 units.
onnx::ModelProto fashion_cnn() {
  Builder b("fashion-cnn", 7);
  std::string x = b.input("image", onnx::TensorProto::FLOAT, {-1, 1, 28, 28});
  auto pool = [&](const std::string& v) {
    return b.node("MaxPool", {v}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  };
  x = pool(b.relu(b.conv(x, 1, 32, 3, 1, 1, true)));
  x = pool(b.relu(b.conv(x, 32, 64, 3, 1, 1, true)));
  x = b.node("Flatten", {x}, {{"axis", I{1}}});
  x = b.relu(b.linear(x, 64 * 7 * 7, 128));
  b.output(b.linear(x, 128, 10), onnx::TensorProto::FLOAT, {-1, 10});
  return b.take();
}

// The same with BatchNormalization after each convolution (which then has no bias), as the
// PyTorch examples add it: the Fashion-MNIST network whose evaluation depends on the running
// statistics.
onnx::ModelProto fashion_cnn_bn() {
  Builder b("fashion-cnn-bn", 8);
  std::string x = b.input("image", onnx::TensorProto::FLOAT, {-1, 1, 28, 28});
  auto pool = [&](const std::string& v) {
    return b.node("MaxPool", {v}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  };
  x = pool(b.relu(b.bn(b.conv(x, 1, 32, 3, 1, 1, false), 32)));
  x = pool(b.relu(b.bn(b.conv(x, 32, 64, 3, 1, 1, false), 64)));
  x = b.node("Flatten", {x}, {{"axis", I{1}}});
  x = b.relu(b.linear(x, 64 * 7 * 7, 128));
  b.output(b.linear(x, 128, 10), onnx::TensorProto::FLOAT, {-1, 10});
  return b.take();
}

// A GRU sequence classifier (as torch.nn.GRU(batch_first=True) feeding a Linear on the last
// hidden state exports): sequences [N, 16, 8] through a GRU of 64 units (linear_before_reset,
// PyTorch's cell; batch-first layout), its final hidden state classified into 8 classes. Weights
// uniform in +-1/sqrt(hidden), as PyTorch initialises them. Trains on dataset = "sequences".
onnx::ModelProto gru_classifier() {
  constexpr std::int64_t T = 16, F = 8, H = 64, C = 8;
  Builder b("gru-classifier", 9);
  const std::string x = b.input("sequence", onnx::TensorProto::FLOAT, {-1, T, F});
  const float bound = 1.0f / std::sqrt(static_cast<float>(H));
  const std::string y =
      b.node("GRU",
             {x, b.weight("gru_w", {1, 3 * H, F}, bound), b.weight("gru_r", {1, 3 * H, H}, bound),
              b.weight("gru_b", {1, 6 * H}, bound)},
             {{"hidden_size", H}, {"linear_before_reset", std::int64_t{1}}, {"layout", std::int64_t{1}}}, 2);
  const std::string last = b.node("Flatten", {y + "_1"}, {{"axis", I{1}}});  // Y_h [N, 1, H] -> [N, H]
  b.output(b.linear(last, H, C), onnx::TensorProto::FLOAT, {-1, C});
  return b.take();
}

// ResNets (He et al. 2016). The last BatchNormalization of each residual branch starts at gamma
// 0.5 so that activations stay bounded through depth with seeded weights.
std::string basic_block(Builder& b, const std::string& x, I cin, I cout, I stride) {
  std::string y = b.relu(b.bn(b.conv(x, cin, cout, 3, stride, 1, false), cout));
  y = b.bn(b.conv(y, cout, cout, 3, 1, 1, false), cout, 0.5f);
  std::string shortcut = x;
  if (stride != 1 || cin != cout) shortcut = b.bn(b.conv(x, cin, cout, 1, stride, 0, false), cout);
  return b.relu(b.node("Add", {y, shortcut}));
}

// v1.5: the stride is on the 3x3 convolution.
std::string bottleneck(Builder& b, const std::string& x, I cin, I width, I stride) {
  const I cout = width * 4;
  std::string y = b.relu(b.bn(b.conv(x, cin, width, 1, 1, 0, false), width));
  y = b.relu(b.bn(b.conv(y, width, width, 3, stride, 1, false), width));
  y = b.bn(b.conv(y, width, cout, 1, 1, 0, false), cout, 0.5f);
  std::string shortcut = x;
  if (stride != 1 || cin != cout) shortcut = b.bn(b.conv(x, cin, cout, 1, stride, 0, false), cout);
  return b.relu(b.node("Add", {y, shortcut}));
}

onnx::ModelProto imagenet_resnet(const std::string& name, const std::vector<int>& blocks, bool bottle) {
  Builder b(name, bottle ? 50 : 18);
  std::string x = b.input("image", onnx::TensorProto::FLOAT, {-1, 3, 224, 224});
  x = b.relu(b.bn(b.conv(x, 3, 64, 7, 2, 3, false), 64));
  x = b.node("MaxPool", {x}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  I cin = 64;
  const I widths[4] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s)
    for (int k = 0; k < blocks[static_cast<std::size_t>(s)]; ++k) {
      const I stride = s > 0 && k == 0 ? 2 : 1;
      if (bottle) {
        x = bottleneck(b, x, cin, widths[s], stride);
        cin = widths[s] * 4;
      } else {
        x = basic_block(b, x, cin, widths[s], stride);
        cin = widths[s];
      }
    }
  x = b.node("Flatten", {b.node("GlobalAveragePool", {x})}, {{"axis", I{1}}});
  b.output(b.linear(x, cin, 1000), onnx::TensorProto::FLOAT, {-1, 1000});
  return b.take();
}

// ResNet-20 for CIFAR-10 (He et al. 2016, section 4.2): 3 stages of 3 basic blocks, 16/32/64
// channels; projection shortcuts (1x1 convolution) where the shape changes.
onnx::ModelProto resnet20_cifar() {
  Builder b("resnet20-cifar", 20);
  std::string x = b.input("image", onnx::TensorProto::FLOAT, {-1, 3, 32, 32});
  x = b.relu(b.bn(b.conv(x, 3, 16, 3, 1, 1, false), 16));
  I cin = 16;
  for (I width : {16, 32, 64})
    for (int k = 0; k < 3; ++k) {
      x = basic_block(b, x, cin, width, k == 0 && width != 16 ? 2 : 1);
      cin = width;
    }
  x = b.node("Flatten", {b.node("GlobalAveragePool", {x})}, {{"axis", I{1}}});
  b.output(b.linear(x, 64, 10), onnx::TensorProto::FLOAT, {-1, 10});
  return b.take();
}

// A BERT-style encoder (post-LayerNorm): token and position embeddings, 4 layers of multi-head
// self-attention and a GELU feed-forward block, mean pooling and a classifier. The attention
// reshapes compute their target shapes from the input's shape (Shape, Gather, Unsqueeze, Concat)
// as PyTorch exports them: d500 folds them at load time. GELU is its Erf expansion.
onnx::ModelProto transformer_encoder() {
  constexpr I S = 128, D = 256, H = 4, Dh = D / H, F = 1024, V = 8192, L = 4, C = 10;
  Builder b("transformer-encoder", 7);
  const std::string tokens = b.input("tokens", onnx::TensorProto::INT64, {-1, S});
  std::string x = b.node("Gather", {b.weight("token_embedding", {V, D}, 0.1f), tokens});
  x = b.node("Add", {x, b.weight("position_embedding", {S, D}, 0.1f)});
  // [N, S, H, Dh] and [N, S, D] from the input's own shape, as PyTorch exports x.view(n, s, h, dh):
  // Shape, Gather of a scalar index (a scalar), Unsqueeze to [1], Concat.
  const std::string shape = b.node("Shape", {tokens});
  auto dim = [&](I i) {
    return b.node("Unsqueeze", {b.node("Gather", {shape, b.ints("index", {i}, true)}), b.ints("axes", {0})});
  };
  const std::string n = dim(0), s = dim(1);
  const std::string heads_shape = b.node("Concat", {n, s, b.ints("h_dh", {H, Dh})}, {{"axis", I{0}}});
  const std::string model_shape = b.node("Concat", {n, s, b.ints("d", {D})}, {{"axis", I{0}}});
  const std::string inv_sqrt_dh = b.scalar(1.0f / std::sqrt(static_cast<float>(Dh)));
  const std::string half = b.scalar(0.5f), one = b.scalar(1.0f), sqrt2 = b.scalar(std::sqrt(2.0f));
  auto dense = [&](const std::string& v, I in, I out) {
    return b.node("Add", {b.node("MatMul", {v, b.he("w", {in, out}, in)}), b.weight("b", {out}, 0)});
  };
  auto layer_norm = [&](const std::string& v) {
    return b.node("LayerNormalization", {v, b.weight("ln_scale", {D}, 0, 1.0f), b.weight("ln_bias", {D}, 0)},
                  {{"axis", I{-1}}, {"epsilon", 1e-5f}});
  };
  for (I l = 0; l < L; ++l) {
    auto heads = [&](const std::string& v, const Ints& perm) {
      return b.node("Transpose", {b.node("Reshape", {v, heads_shape})}, {{"perm", perm}});
    };
    const std::string q = heads(dense(x, D, D), {0, 2, 1, 3});  // [N, H, S, Dh]
    const std::string k = heads(dense(x, D, D), {0, 2, 3, 1});  // [N, H, Dh, S]
    const std::string v = heads(dense(x, D, D), {0, 2, 1, 3});  // [N, H, S, Dh]
    const std::string scores = b.node("Mul", {b.node("MatMul", {q, k}), inv_sqrt_dh});
    const std::string attn = b.node("MatMul", {b.node("Softmax", {scores}, {{"axis", I{-1}}}), v});
    const std::string ctx = b.node("Reshape", {b.node("Transpose", {attn}, {{"perm", Ints{0, 2, 1, 3}}}), model_shape});
    x = layer_norm(b.node("Add", {x, dense(ctx, D, D)}));
    const std::string h = dense(x, D, F);
    const std::string gelu =
        b.node("Mul", {b.node("Mul", {h, half}), b.node("Add", {b.node("Erf", {b.node("Div", {h, sqrt2})}), one})});
    x = layer_norm(b.node("Add", {x, dense(gelu, F, D)}));
  }
  x = b.node("ReduceMean", {x}, {{"axes", Ints{1}}, {"keepdims", I{0}}});
  b.output(b.linear(x, D, C), onnx::TensorProto::FLOAT, {-1, C});
  return b.take();
}

onnx::ModelProto build(const std::string& name) {
  if (name == "mlp") return mlp();
  if (name == "lenet5") return lenet5();
  if (name == "fashion-cnn") return fashion_cnn();
  if (name == "fashion-cnn-bn") return fashion_cnn_bn();
  if (name == "gru-classifier") return gru_classifier();
  if (name == "resnet18") return imagenet_resnet("resnet18", {2, 2, 2, 2}, false);
  if (name == "resnet50") return imagenet_resnet("resnet50", {3, 4, 6, 3}, true);
  if (name == "resnet20-cifar") return resnet20_cifar();
  if (name == "transformer-encoder") return transformer_encoder();
  std::vector<std::string> names;
  for (const auto& n : builtin_networks()) names.push_back(n.name);
  throw Error("no built-in network '" + name + "'" + did_you_mean(name, names) + " (built in: " + [&] {
    std::string s;
    for (const auto& x : names) s += (s.empty() ? "" : ", ") + x;
    return s;
  }() + "; or give the path of an .onnx file)");
}

}  // namespace

const std::vector<BuiltinNetwork>& builtin_networks() {
  static const std::vector<BuiltinNetwork> list = {
      {"lenet5", "LeNet-5 (ReLU, max pooling): 2 convolutions 5x5 (6, 16 channels), 3 fully connected (120, 84, 10)",
       "[N,1,28,28] float32 images (Fashion-MNIST's shape)", 10},
      {"mlp", "multilayer perceptron: 784-512-256-10, ReLU", "[N,1,28,28] float32 images (flattened)", 10},
      {"fashion-cnn", "a wider CNN: 2 convolutions 3x3 (32, 64 channels) with max pooling, fully connected 3136-128-10",
       "[N,1,28,28] float32 images (Fashion-MNIST's shape)", 10},
      {"fashion-cnn-bn",
       "fashion-cnn with BatchNormalization after each convolution (running statistics kept in training, used in evaluation)",
       "[N,1,28,28] float32 images (Fashion-MNIST's shape)", 10},
      {"resnet18", "ResNet-18 (basic blocks 2-2-2-2, 64-512 channels, BatchNormalization)",
       "[N,3,224,224] float32 images", 1000},
      {"resnet50", "ResNet-50 v1.5 (bottlenecks 3-4-6-3, stride on the 3x3 convolution, BatchNormalization)",
       "[N,3,224,224] float32 images", 1000},
      {"resnet20-cifar", "ResNet-20 for CIFAR-10 (3 stages of 3 basic blocks, 16-32-64 channels, projection shortcuts)",
       "[N,3,32,32] float32 images", 10},
      {"gru-classifier",
       "GRU sequence classifier: a 64-unit GRU (PyTorch's cell, batch first) over 16 steps of 8 features, its last hidden "
       "state into 8 classes (dataset = \"sequences\")",
       "[N,16,8] float32 sequences", 8},
      {"transformer-encoder",
       "BERT-style encoder: 4 post-LayerNorm layers, d_model 256, 4 heads, feed-forward 1024 with GELU (Erf), vocabulary 8192, "
       "mean pooling, 10 classes",
       "[N,128] int64 token ids", 10},
  };
  return list;
}

const BuiltinNetwork* find_builtin_network(const std::string& name) {
  for (const auto& n : builtin_networks())
    if (n.name == name) return &n;
  return nullptr;
}

std::string builtin_network_onnx(const std::string& name) {
  std::string out;
  if (!build(name).SerializeToString(&out)) throw Error("serializing the built-in network " + name + " failed");
  return out;
}

Graph load_builtin_network(const std::string& name, const LoadOptions& opt, ModelFacts* facts) {
  struct Seeded {
    bool before = t_seeded_weights;
    explicit Seeded(bool on) { t_seeded_weights = on; }
    ~Seeded() { t_seeded_weights = before; }
  } seeded(opt.weights);
  onnx::ModelProto m = build(name);
  return load_onnx_model(m, "built-in network " + name, opt, facts);
}

Graph load_network(const std::string& network, const LoadOptions& opt, ModelFacts* facts) {
  if (find_builtin_network(network)) return load_builtin_network(network, opt, facts);
  if (network.find('/') == std::string::npos && network.find(".onnx") == std::string::npos)
    build(network);  // "no built-in network ..."
  return load_onnx_file(network, opt, facts);
}

GraphWork graph_work(const Graph& g, int loss) {
  GraphWork w;
  const std::vector<bool> need = loss >= 0 ? tensors_needing_gradients(g, loss, trainable_params(g, loss))
                                           : std::vector<bool>(g.tensors.size(), false);
  for (const auto& n : g.nodes) {
    const OpSchema* s = find_op(n.op);
    if (!s || !s->flops) continue;
    const NodeProblem p = node_shapes(g, n, loss >= 0);
    const double fwd = s->flops(p, false);
    w.forward_flops += fwd;
    w.training_flops += fwd;
    bool backward = false;
    for (std::size_t k = 0; k < n.in.size(); ++k)
      backward = backward || (n.in[k] >= 0 && need[static_cast<std::size_t>(n.in[k])] && (s->diff_in >> k & 1u));
    if (backward) w.training_flops += s->flops(p, true);
  }
  return w;
}

NetworkFacts network_facts(const Graph& g1) {
  NetworkFacts f;
  Graph g = g1;
  const TrainingLoss loss = add_training_loss(g);
  for (int t : trainable_params(g, loss.loss)) f.params += numel(g.info(t).shape);
  for (const auto& [t, bytes] : g1.constants) f.weight_bytes += static_cast<std::int64_t>(bytes.size());
  std::set<std::string> ops;
  for (const auto& n : g1.nodes) ops.insert(n.op), ++f.nodes;
  f.ops.assign(ops.begin(), ops.end());
  f.forward_flops = graph_work(g1, -1).forward_flops;
  f.training_flops = graph_work(g, loss.loss).training_flops;
  return f;
}

}  // namespace d500
