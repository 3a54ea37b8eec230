// Loading networks: the ONNX library's checks, the batch, constant folding, and every refusal
// naming what is wrong (the node, its operator, the opset, what this build runs).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "backends/graph_ops.hpp"
#include "networks/builtin.hpp"
#include "networks/onnx_proto.hpp"
#include "networks/prepare.hpp"

namespace fs = std::filesystem;

namespace d500 {
namespace {

class OnnxFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("d500_onnx_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const onnx::ModelProto& m) {
    const fs::path p = dir_ / name;
    std::ofstream out(p, std::ios::binary);
    m.SerializeToOstream(&out);
    return p.string();
  }
  // A one-node model: x [batch, 4] -> op -> y.
  static onnx::ModelProto one_node(const std::string& op, int opset = 17, const std::string& batch_dim = "N",
                                   std::int64_t batch = -1, const std::string& domain = "") {
    onnx::ModelProto m;
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    if (!domain.empty()) {
      auto* d = m.add_opset_import();
      d->set_domain(domain);
      d->set_version(1);
    }
    auto* g = m.mutable_graph();
    g->set_name("one");
    for (const char* name : {"x", "y"}) {
      auto* v = std::string(name) == "x" ? g->add_input() : g->add_output();
      v->set_name(name);
      auto* t = v->mutable_type()->mutable_tensor_type();
      t->set_elem_type(onnx::TensorProto::FLOAT);
      auto* d0 = t->mutable_shape()->add_dim();
      if (batch > 0)
        d0->set_dim_value(batch);
      else
        d0->set_dim_param(batch_dim);
      t->mutable_shape()->add_dim()->set_dim_value(4);
    }
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name("the_node");
    n->set_domain(domain);
    n->add_input("x");
    n->add_output("y");
    return m;
  }
  fs::path dir_;
};

std::string load_error(const std::string& path, std::int64_t batch = 2) {
  try {
    load_onnx_file(path, LoadOptions{batch, {}});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(OnnxFiles, AnUnsupportedOperatorIsNamedWithItsNodeOpsetAndWhatThisBuildRuns) {
  const std::string e = load_error(write("eyelike.onnx", one_node("EyeLike")));
  EXPECT_NE(e.find("eyelike.onnx"), std::string::npos) << e;
  EXPECT_NE(e.find("EyeLike node 'the_node'"), std::string::npos) << e;
  EXPECT_NE(e.find("opset 17"), std::string::npos) << e;
  EXPECT_NE(e.find("Conv, ConvTranspose"), std::string::npos) << "the list of what runs: " << e;
  EXPECT_EQ(e.find("AddRelu"), std::string::npos) << "d500's own node is no operator a model may name: " << e;
  // ... and a model that names it is refused (by ONNX's checker, or by the loader after it).
  const std::string own = load_error(write("addrelu.onnx", one_node("AddRelu")));
  EXPECT_NE(own.find("AddRelu"), std::string::npos) << own;
}

TEST_F(OnnxFiles, OpsetsOutsideTheRangeAndOtherDomainsAreRefused) {
  EXPECT_NE(load_error(write("new.onnx", one_node("Relu", 18))).find("opset 18"), std::string::npos);
  const std::string e = load_error(write("ms.onnx", one_node("Relu", 17, "N", -1, "com.microsoft")));
  EXPECT_NE(e.find("domain 'com.microsoft'"), std::string::npos) << e;
  // An opset-6 model is upgraded by ONNX's version converter and runs.
  ModelFacts f;
  const Graph g = load_onnx_file(write("old.onnx", one_node("Relu", 6)), LoadOptions{2, {}}, &f);
  EXPECT_EQ(f.converted_from, 6);
  EXPECT_GE(f.opset, kMinOpset);
  EXPECT_EQ(g.nodes.size(), 1u);
}

TEST_F(OnnxFiles, TheBatchReplacesASymbolicOrUnitBatchAndIsRequiredWhenSymbolic) {
  const std::string sym = write("sym.onnx", one_node("Relu"));
  EXPECT_NE(load_error(sym, -1).find("symbolic batch ('N'): set the point's 'batch'"), std::string::npos)
      << load_error(sym, -1);
  const Graph g = load_onnx_file(sym, LoadOptions{5, {}});
  EXPECT_EQ(g.info(g.inputs[0]).shape, (Shape{5, 4}));
  EXPECT_EQ(g.info(g.outputs[0]).shape, (Shape{5, 4}));
  // A model fixed at batch 1 runs at any batch; one fixed at 8 only at 8.
  EXPECT_EQ(load_onnx_file(write("one.onnx", one_node("Relu", 17, "", 1)), LoadOptions{3, {}}).info(0).shape,
            (Shape{3, 4}));
  const std::string e = load_error(write("eight.onnx", one_node("Relu", 17, "", 8)), 3);
  EXPECT_NE(e.find("fixed batch of 8"), std::string::npos) << e;
  EXPECT_EQ(load_onnx_file(write("eight2.onnx", one_node("Relu", 17, "", 8)), LoadOptions{-1, {}}).info(0).shape,
            (Shape{8, 4}));
}

TEST_F(OnnxFiles, NotAModelOrAMissingFileIsSaidSo) {
  std::ofstream(dir_ / "junk.onnx") << "this is not protobuf \x01\x02\x03";
  EXPECT_NE(load_error((dir_ / "junk.onnx").string()).find("not an ONNX model"), std::string::npos);
  EXPECT_NE(load_error((dir_ / "missing.onnx").string()).find("no such ONNX file"), std::string::npos);
}

TEST_F(OnnxFiles, TheOnnxCheckerAndShapeInferenceRejectBrokenModels) {
  onnx::ModelProto m = one_node("Relu");
  m.mutable_graph()->mutable_node(0)->set_input(0, "nowhere");  // an input nothing produces
  EXPECT_NE(load_error(write("dangling.onnx", m)).find("the ONNX checker rejects the model"), std::string::npos)
      << load_error(write("d2.onnx", m));
  onnx::ModelProto gemm = one_node("Gemm");  // Gemm needs two inputs
  EXPECT_NE(load_error(write("gemm.onnx", gemm)).find("ONNX checker"), std::string::npos)
      << load_error(write("g2.onnx", gemm));
}

TEST_F(OnnxFiles, ExternalDataIsReadBesideTheModelAndNeverOutsideIt) {
  // y = x + w, w [4] stored in weights.bin beside the model.
  onnx::ModelProto m = one_node("Add");
  auto* g = m.mutable_graph();
  g->mutable_node(0)->add_input("w");
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = w->add_external_data();
  loc->set_key("location");
  loc->set_value("weights.bin");
  const float values[4] = {1, 2, 3, 4};
  std::ofstream(dir_ / "weights.bin", std::ios::binary).write(reinterpret_cast<const char*>(values), sizeof values);
  const Graph gr = load_onnx_file(write("ext.onnx", m), LoadOptions{2, {}});
  const int wt = gr.find("w");
  ASSERT_GE(wt, 0);
  EXPECT_EQ(std::memcmp(gr.constants.at(wt).data(), values, sizeof values), 0);
  loc->set_value("../../etc/passwd");
  EXPECT_NE(load_error(write("escape.onnx", m)).find("outside the model's directory"), std::string::npos);
}

TEST(OnnxLoad, ShapeSubgraphsFoldAndWeightsStayTrainable) {
  // The transformer computes its reshapes' shapes from the input's shape: nothing of that runs.
  const Graph t = load_builtin_network("transformer-encoder", LoadOptions{3, {}});
  for (const auto& n : t.nodes) {
    EXPECT_NE(n.op, "Shape");
    EXPECT_NE(n.op, "Concat") << "the reshape targets were folded at load time";
    EXPECT_NE(n.op, "Constant");
  }
  bool reshaped = false;
  for (const auto& n : t.nodes)
    if (n.op == "Reshape") {
      EXPECT_TRUE(t.is_const(n.in[1]));
      EXPECT_EQ(t.info(n.out[0]).shape[0], 3) << "the batch reaches the folded shapes";
      reshaped = true;
    }
  EXPECT_TRUE(reshaped);
  // Every weight of a built-in network gets a gradient (trainable), BatchNorm statistics do not.
  Graph r = load_builtin_network("resnet20-cifar", LoadOptions{2, {}});
  const TrainingLoss loss = add_training_loss(r);
  EXPECT_EQ(loss.labels, r.inputs.back());
  const NetworkFacts f = network_facts(load_builtin_network("resnet20-cifar", LoadOptions{1, {}}));
  EXPECT_NEAR(static_cast<double>(f.params), 272474, 2000) << "ResNet-20's ~0.27 M parameters";
}

TEST(OnnxLoad, BuiltInNetworksHaveTheirPublishedSizes) {
  const NetworkFacts r50 = network_facts(load_builtin_network("resnet50", LoadOptions{1, {}}));
  EXPECT_NEAR(static_cast<double>(r50.params), 25.557e6, 0.01e6);  // torchvision's resnet50: 25,557,032
  EXPECT_NEAR(r50.forward_flops, 8.2e9, 0.15e9);                   // 4.1 GMACs
  const NetworkFacts r18 = network_facts(load_builtin_network("resnet18", LoadOptions{1, {}}));
  EXPECT_NEAR(static_cast<double>(r18.params), 11.689e6, 0.01e6);  // 11,689,512
  const NetworkFacts le = network_facts(load_builtin_network("lenet5", LoadOptions{1, {}}));
  EXPECT_EQ(le.params, 61706);
  // Export and reload: the same graph.
  const std::string bytes = builtin_network_onnx("lenet5");
  const Graph back = load_onnx_bytes(bytes, "lenet5.onnx", LoadOptions{4, {}});
  const Graph direct = load_builtin_network("lenet5", LoadOptions{4, {}});
  ASSERT_EQ(back.nodes.size(), direct.nodes.size());
  for (std::size_t i = 0; i < back.nodes.size(); ++i) EXPECT_EQ(back.nodes[i].op, direct.nodes[i].op);
  EXPECT_EQ(back.info(back.outputs[0]).shape, (Shape{4, 10}));
}

// The planner loads built-in networks without their seeded weights (LoadOptions::weights): the
// same graph, tensor for tensor, its float weights 0; and a load with weights afterwards gets
// the seeded values, each weight its own seed as before.
TEST(OnnxLoad, AShapesOnlyLoadIsTheSameGraphWithZeroWeightsAndLeavesTheSeededOnesAlone) {
  const Graph seeded = load_builtin_network("lenet5", LoadOptions{4, {}});
  LoadOptions shapes{4, {}};
  shapes.weights = false;
  const Graph zeros = load_builtin_network("lenet5", shapes);
  const Graph again = load_builtin_network("lenet5", LoadOptions{4, {}});
  ASSERT_EQ(zeros.tensors.size(), seeded.tensors.size());
  ASSERT_EQ(zeros.nodes.size(), seeded.nodes.size());
  for (std::size_t i = 0; i < seeded.nodes.size(); ++i) EXPECT_EQ(zeros.nodes[i].op, seeded.nodes[i].op);
  int filled = 0;
  for (const auto& [t, bytes] : seeded.constants) {
    const auto& info = seeded.info(t);
    EXPECT_EQ(zeros.info(t).shape, info.shape) << info.name;
    ASSERT_EQ(zeros.constants.at(t).size(), bytes.size()) << info.name;
    EXPECT_EQ(again.constants.at(t), bytes) << info.name << ": the seeded values changed after a shapes-only load";
    if (info.dtype != DType::F32 || !seeded.initializers.count(t)) continue;
    const bool any_nonzero = std::any_of(bytes.begin(), bytes.end(), [](std::byte b) { return b != std::byte{0}; });
    if (!any_nonzero) continue;  // a weight set to 0 on purpose (a bias)
    ++filled;
    EXPECT_TRUE(std::all_of(zeros.constants.at(t).begin(), zeros.constants.at(t).end(),
                            [](std::byte b) { return b == std::byte{0}; }))
        << info.name << " was filled in a shapes-only load";
  }
  EXPECT_GE(filled, 5) << "LeNet-5's 5 weight matrices and kernels are seeded";
}

TEST(OnnxLoad, AnUnknownBuiltInNameSuggestsTheNearest) {
  try {
    load_network("resnet-50", LoadOptions{1, {}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'resnet50'"), std::string::npos) << e.what();
  }
}

TEST(OnnxLoad, DropoutRunsAsTheIdentityAndRefusesTrainingMode) {
  Graph g;
  g.opset = 17;
  const int x = g.add_tensor({"x", DType::F32, {2, 3}});
  g.inputs.push_back(x);
  const int mode = g.add_tensor({"mode", DType::Bool, {}});
  g.constants[mode] = {std::byte{1}};
  Node n;
  n.op = "Dropout";
  n.name = "drop";
  n.in = {x, -1, mode};
  n.out = {g.add_tensor({"y", DType::Undefined, {}})};
  g.nodes.push_back(n);
  g.outputs = {n.out[0]};
  try {
    infer_and_fold(g, "t");
    FAIL() << "training_mode true accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training_mode is true"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace d500
