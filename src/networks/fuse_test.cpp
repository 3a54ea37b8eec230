// Graph rewrites (networks/fuse.hpp): which pairs join, which stay apart, and that a joined graph
// computes what its model does, bit for bit.
#include "networks/fuse.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "backends/graph_ops.hpp"
#include "networks/builtin.hpp"
#include "networks/executor.hpp"
#include "networks/graph_builder_test.hpp"
#include "networks/prepare.hpp"

namespace d500 {
namespace {

using test::GraphBuilder;

// How many `op` nodes have an output 0 that one Relu alone reads: what fuse_add_relu (Add) and
// fuse_bn_relu (BatchNormalization) should join.
int followed_by_relu(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& first : g.nodes) {
    if (first.op != op) continue;
    int readers = 0, relus = 0;
    for (const Node& r : g.nodes)
      for (int t : r.in)
        if (t == first.out[0]) ++readers, relus += r.op == "Relu";
    n += readers == 1 && relus == 1;
  }
  return n;
}
int residual_joins(const Graph& g) { return followed_by_relu(g, "Add"); }
int bn_relus(const Graph& g) { return followed_by_relu(g, "BatchNormalization"); }

// A built-in network's training graph (weights 0: shapes only), as a point's rewrite sees it.
Graph training_graph(const std::string& net) {
  Graph g = load_builtin_network(net, LoadOptions{2, {}, false});
  add_training_loss(g);
  return g;
}

// A rewrite joined `joined` pairs of `before` into `after`: one node fewer each, every tensor, input,
// output and initializer where it was.
void expect_ids_kept(const Graph& before, const Graph& after, int joined) {
  EXPECT_EQ(after.nodes.size(), before.nodes.size() - static_cast<std::size_t>(joined));
  EXPECT_EQ(after.tensors.size(), before.tensors.size());
  EXPECT_EQ(after.inputs, before.inputs);
  EXPECT_EQ(after.outputs, before.outputs);
  EXPECT_EQ(after.initializers, before.initializers);
}

TEST(Fuse, EachResidualJoinOfTheResNetsBecomesOneNodeAndEveryTensorKeepsItsId) {
  for (const auto& [net, joins] : {std::pair<std::string, int>{"resnet50", 16}, {"resnet20-cifar", 9}}) {
    SCOPED_TRACE(net);
    Graph g = training_graph(net);
    ASSERT_EQ(residual_joins(g), joins) << "the model's own count, before the rewrite";
    const Graph before = g;
    EXPECT_EQ(fuse_add_relu(g), joins);
    expect_ids_kept(before, g, joins);
    int fused = 0;
    std::set<int> written;
    for (const Node& n : g.nodes) {
      for (int t : n.in) {
        if (t < 0 || g.is_const(t) || std::find(g.inputs.begin(), g.inputs.end(), t) != g.inputs.end()) continue;
        EXPECT_TRUE(written.count(t)) << n.label() << " reads '" << g.info(t).name << "' before anything writes it";
      }
      written.insert(n.out.begin(), n.out.end());
      if (n.op != "AddRelu") continue;
      ++fused;
      EXPECT_NE(n.name.find('+'), std::string::npos) << n.name << " names both nodes it joins";
      EXPECT_EQ(g.info(n.in[0]).shape, g.info(n.out[0]).shape);
      EXPECT_EQ(g.info(n.in[1]).shape, g.info(n.out[0]).shape);
    }
    EXPECT_EQ(fused, joins);
    EXPECT_EQ(residual_joins(g), 0);
    EXPECT_EQ(fuse_add_relu(g), 0) << "a second rewrite finds nothing left";
  }
}

TEST(Fuse, AnAddWhoseSumAnythingElseReadsOrThatBroadcastsStaysApart) {
  GraphBuilder b;
  const Shape s = {2, 3};
  const int x = b.weight("x", s), y = b.weight("y", s);
  const int shared = b.node("Add", {x, y});
  const int shared_relu = b.node("Relu", {shared});
  const int other = b.node("Tanh", {shared});  // a second reader of the sum
  const int broadcast = b.node("Relu", {b.node("Add", {x, b.weight("row", {3})})});
  const int kept = b.node("Add", {x, y});  // a graph output as well as the Relu's input
  const int kept_relu = b.node("Relu", {kept});
  const int joined = b.node("Relu", {b.node("Add", {y, x})});
  const int plain = b.node("Relu", {b.node("Mul", {x, y})});
  b.g.outputs = {shared_relu, other, broadcast, kept, kept_relu, joined, plain};
  infer_and_fold(b.g, "test graph");
  EXPECT_EQ(fuse_add_relu(b.g), 1);
  int fused = 0;
  for (const Node& n : b.g.nodes)
    if (n.op == "AddRelu") {
      ++fused;
      EXPECT_EQ(n.out[0], joined);
      EXPECT_EQ(n.in, (std::vector<int>{y, x}));
    }
  EXPECT_EQ(fused, 1);
}

TEST(Fuse, EachConvBnReluOfTheResNetsBecomesOneNormalisationWithItsInputsAttributesAndOutputs) {
  for (const auto& [net, pairs] : {std::pair<std::string, int>{"resnet50", 33}, {"resnet20-cifar", 10}}) {
    SCOPED_TRACE(net);
    Graph g = training_graph(net);
    ASSERT_EQ(bn_relus(g), pairs) << "the model's own count, before the rewrite";
    const Graph before = g;
    EXPECT_EQ(fuse_bn_relu(g), pairs);
    expect_ids_kept(before, g, pairs);
    int fused = 0;
    for (const Node& n : g.nodes) {
      if (n.op != "BatchNormRelu") continue;
      ++fused;
      // The normalisation it was, found by its inputs: the same attributes, the Relu's output.
      const auto was = std::find_if(before.nodes.begin(), before.nodes.end(),
                                    [&](const Node& b) { return b.op == "BatchNormalization" && b.in == n.in; });
      ASSERT_NE(was, before.nodes.end()) << n.name;
      EXPECT_EQ(n.name.rfind(was->name + "+", 0), 0u) << n.name;
      EXPECT_EQ(n.attrs.size(), was->attrs.size());
      EXPECT_EQ(n.out.size(), was->out.size());
      EXPECT_NE(n.out[0], was->out[0]) << "output 0 is the Relu's";
      EXPECT_EQ(g.info(n.out[0]).shape, g.info(n.in[0]).shape);
    }
    EXPECT_EQ(fused, pairs);
    EXPECT_EQ(bn_relus(g), 0);
    // The residual joins are other pairs: both rewrites together leave the model's Relus that
    // follow neither (none in a ResNet).
    EXPECT_EQ(fuse_add_relu(g), net == "resnet50" ? 16 : 9);
    EXPECT_EQ(std::count_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op == "Relu"; }), 0);
  }
}

TEST(Fuse, ANormalisationWhoseOutputAnythingElseReadsOrThatIsAGraphOutputStaysApart) {
  GraphBuilder b;
  auto bn = [&](int x) {
    return b.node("BatchNormalization", {x, b.weight("s", {3}, 0.5, 1.5), b.weight("b", {3}), b.constant_f("m", {3}),
                                         b.constant_f("v", {3}, 0.5, 1)});
  };
  const int x = b.weight("x", {2, 3, 4});
  const int shared = bn(x);
  const int shared_relu = b.node("Relu", {shared});
  const int other = b.node("Tanh", {shared});
  const int kept = bn(x);
  const int kept_relu = b.node("Relu", {kept});
  const int joined = b.node("Relu", {bn(x)});
  const int plain = b.node("Sigmoid", {bn(x)});
  b.g.outputs = {shared_relu, other, kept, kept_relu, joined, plain};
  infer_and_fold(b.g, "test graph");
  EXPECT_EQ(fuse_bn_relu(b.g), 1);
  const auto it =
      std::find_if(b.g.nodes.begin(), b.g.nodes.end(), [](const Node& n) { return n.op == "BatchNormRelu"; });
  ASSERT_NE(it, b.g.nodes.end());
  EXPECT_EQ(it->out[0], joined);
  EXPECT_EQ(it->in[0], x);
}

TEST(Fuse, EachFusionSettingJoinsWhatItNames) {
  EXPECT_TRUE(fuses_add_relu("add_relu"));
  EXPECT_FALSE(fuses_bn_relu("add_relu"));
  EXPECT_TRUE(fuses_bn_relu("bn_relu"));
  EXPECT_FALSE(fuses_add_relu("bn_relu"));
  EXPECT_TRUE(fuses_add_relu("add_relu+bn_relu"));
  EXPECT_TRUE(fuses_bn_relu("add_relu+bn_relu"));
  for (const char* other : {"", "off", "add-relu", "ADD_RELU", "bn_relu+add_relu", "all"}) {
    EXPECT_FALSE(fuses_add_relu(other)) << other;
    EXPECT_FALSE(fuses_bn_relu(other)) << other;
  }
}

TEST(Fuse, TheJoinedNodesAreNoOperatorsAModelMayName) {
  for (const char* name : {"AddRelu", "BatchNormRelu"}) {
    const OpSchema* op = find_op(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_TRUE(op->internal) << name;
    EXPECT_EQ(supported_ops_text().find(name), std::string::npos) << supported_ops_text();
  }
  EXPECT_NE(supported_ops_text().find("Relu"), std::string::npos);
  EXPECT_NE(supported_ops_text().find("BatchNormalization"), std::string::npos);
  EXPECT_TRUE(is_batch_norm("BatchNormRelu")) << "its running statistics are kept as BatchNormalization's are";
}

// The joined ResNet-20 trains and infers as its model does on the reference, bit for bit: every
// value is rounded where the model rounds it, and the gradients are summed in the same order; it
// runs fewer steps and, in training, plans less memory (the sums are never stored).
TEST(Fuse, AJoinedResNetComputesItsModelsStepBitForBit) {
  Graph model = load_builtin_network("resnet20-cifar", LoadOptions{2, {}});
  const int loss = add_training_loss(model).loss;
  const std::vector<int> params = trainable_params(model, loss);
  Graph joined = model;
  ASSERT_EQ(fuse_add_relu(joined), 9);
  ASSERT_EQ(fuse_bn_relu(joined), 10);
  const InputData inputs = make_inputs(model, 1, 7);
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    auto run = [&](const Graph& g) {
      ExecutorSpec s;
      s.graph = &g;
      s.training = training;
      s.loss = loss;
      s.params = params;
      s.inputs = inputs.pointers();
      auto e = std::make_unique<GraphExecutor>(s);
      e->forward(0);
      if (training) e->backward(0);
      return e;
    };
    const auto a = run(model), f = run(joined);
    for (std::size_t i = 0; i < model.outputs.size(); ++i) EXPECT_EQ(a->output(i), f->output(i)) << "output " << i;
    for (std::size_t k = 0; training && k < params.size(); ++k)
      EXPECT_EQ(a->gradient(k), f->gradient(k)) << model.info(params[k]).name;
    EXPECT_LT(f->steps().size(), a->steps().size());
    // Training kept each sum for Relu's backward pass besides the Relu's result; inference's
    // largest moment (an Add's two operands and its result) is the same either way.
    if (training)
      EXPECT_LT(f->arena_bytes(), a->arena_bytes());
    else
      EXPECT_LE(f->arena_bytes(), a->arena_bytes());
    std::map<std::string, int> fused_steps;
    for (const auto& st : f->steps())
      if (const std::string& op = st.node >= 0 ? joined.nodes[static_cast<std::size_t>(st.node)].op : "";
          op == "AddRelu" || op == "BatchNormRelu") {
        ++fused_steps[op];
        EXPECT_EQ(st.impl, "reference");
      }
    // A forward step each, and a backward step in training.
    EXPECT_EQ(fused_steps["AddRelu"], training ? 18 : 9);
    EXPECT_EQ(fused_steps["BatchNormRelu"], training ? 20 : 10);
  }
}

}  // namespace
}  // namespace d500
