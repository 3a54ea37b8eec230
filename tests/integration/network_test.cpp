// Level 1 end to end: network campaigns planned, run with 2 MPI ranks under mpirun, read back from
// HDF5 with the plain C API and h5py; micro-batching's memory; a wrong operator found at its node;
// plan-time refusals; ONNX's backend tests on every backend.
#include <algorithm>
#include <cstdlib>
#include <set>

#include "backends/registry.hpp"
#include "common/text.hpp"
#include "helpers.hpp"
#include "networks/conformance.hpp"
#include "networks/graph_builder_test.hpp"
#include "networks/onnx_proto.hpp"
#include "store/reader.hpp"

using namespace d500test;

namespace {

class Networks : public ScratchDirTest {};

// The executors of networks this build has.
std::string built_executors() {
  std::string list;
  for (const auto& b : d500::all_backends())
    if (b.built && (b.name == "reference" || b.make_node_kernel || b.make_graph_runner) && b.name != "custom" &&
        !(b.no_device && !b.no_device().empty()))  // a GPU executor on a host without one
      list += (list.empty() ? "\"" : ", \"") + b.name + "\"";
  return list;
}

const std::string kFixture = std::string(D500_TEST_DIR) + "/fixtures/onnx/pytorch_smallnet.onnx";

struct StepRow {
  int index;
  char name[128], op[32], direction[16], impl[64];
  double flops;
};

// The points of a results file read with HDF5's C API: every d500-executor point has its step
// table, and every rank a duration of every step in every repetition (2 ranks, 6 repetitions);
// training steps have their two phases. Returns how many points had a step table.
int points_with_step_tables(const fs::path& file) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0);
  if (f < 0) return 0;
  hid_t pts = H5Gopen2(f, "points", H5P_DEFAULT);
  std::vector<std::string> ids;
  H5Literate(pts, H5_INDEX_NAME, H5_ITER_INC, nullptr, names_cb, &ids);
  int with_steps = 0;
  for (const auto& id : ids) {
    hid_t g = H5Gopen2(pts, id.c_str(), H5P_DEFAULT);
    const std::string canonical = attr_string(g, "canonical");
    EXPECT_EQ(attr_int(g, "work_items"), 8) << canonical;
    // d500's executor records its memory plan; a framework's own executor has none.
    if (canonical.find("libtorch-native") == std::string::npos)
      EXPECT_GT(attr_int(g, "memory.planned_bytes"), 0) << canonical;
    else
      EXPECT_EQ(H5Aexists(g, "memory.planned_bytes"), 0) << canonical;
    const bool training = canonical.find("pass=training") != std::string::npos;
    std::set<int> phases;
    for (const auto& s : read_samples(f, id)) phases.insert(s.phase);
    EXPECT_EQ(phases.size(), training ? 3u : 1u) << canonical << ": op, forward and backward rows";
    if (H5Lexists(g, "steps", H5P_DEFAULT) > 0) {
      ++with_steps;
      hid_t d = H5Dopen2(g, "step_times", H5P_DEFAULT);
      hid_t s = H5Dget_space(d);
      const hssize_t rows = H5Sget_simple_extent_npoints(s);
      H5Sclose(s);
      H5Dclose(d);
      hid_t ds = H5Dopen2(g, "steps", H5P_DEFAULT);
      hid_t ss = H5Dget_space(ds);
      const hssize_t steps = H5Sget_simple_extent_npoints(ss);
      H5Sclose(ss);
      H5Dclose(ds);
      EXPECT_GT(steps, 5) << canonical;
      EXPECT_EQ(rows, steps * 2 * 6) << canonical << ": 2 ranks x 6 repetitions x every step";
    } else {
      EXPECT_NE(canonical.find("libtorch-native"), std::string::npos) << canonical << " lacks its steps";
    }
    H5Gclose(g);
  }
  H5Gclose(pts);
  H5Fclose(f);
  return with_steps;
}

}  // namespace

TEST_F(Networks, TwoRanksRunEveryExecutorAndTheFileHoldsEveryStep) {
  const fs::path run = planned(
      "[campaign]\nname = \"nets\"\nrepetitions = 5\nwarmups = 1\n[fixed]\nworkload = \"network\"\n"
      "batch = 8\nranks_per_node = 2\nseed = 4\n[axes]\nnetwork = [\"lenet5\", \"" +
      kFixture + "\"]\npass = [\"inference\", \"training\"]\nbackend = [" + built_executors() + "]\n");
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("failed-validation"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("backend-failed"), std::string::npos) << r.out;
  Cmd check = sh(d500_cmd("check " + (run / "results" / "job-0000.h5").string()));
  EXPECT_EQ(check.code, 0) << check.out;
  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  const std::string md = read_file_text(run / "report.md");
  EXPECT_NE(md.find("## Networks"), std::string::npos);
  EXPECT_NE(md.find("costliest"), std::string::npos);
  EXPECT_NE(md.find("by operator and pass"), std::string::npos);
  // The executors that ran one network's pass side by side (reference and blas at least are built).
  EXPECT_NE(md.find("points that ran the same"), std::string::npos);
  EXPECT_NE(md.find("the costliest steps, side by side"), std::string::npos);
  // Every step added by operator and pass: the groups hold each step once, add up to the steps'
  // total, and come costliest first.
  const std::string by_operator = R"(
import json, sys
n = 0
for p in json.load(open(sys.argv[1]))["points"]:
    g, what = p.get("by_operator"), p["canonical"]
    if not g:
        continue
    n += 1
    assert sum(x["steps"] for x in g) == p["steps"], what
    assert abs(sum(x["median_s"] for x in g) - p["steps_total_median_s"]) <= 1e-6 * p["steps_total_median_s"], what
    assert abs(sum(x["share"] for x in g) - 1) < 1e-6, what
    assert [x["median_s"] for x in g] == sorted((x["median_s"] for x in g), reverse=True), what
    assert len({(x["op"], x["direction"]) for x in g}) == len(g), what
    assert any(x["op"] == "Conv" and x["direction"] == "forward" and x["steps"] == 2 for x in g), what
    assert any(x["op"] == "Conv" and x["direction"] == "backward" for x in g) == ("pass=training" in what), what
print("grouped", n, "points")
)";
  Cmd groups = sh("/usr/bin/python3 -c '" + by_operator + "' " + (run / "results.json").string());
  EXPECT_EQ(groups.code, 0) << groups.out;
  EXPECT_NE(groups.out.find("grouped "), std::string::npos) << groups.out;
  auto csv = read_csv(run / "results.csv");
  int points = 0;
  for (const auto& [id, row] : csv) {
    ++points;
    EXPECT_EQ(row.at("status"), "complete") << row.at("canonical") << ": " << row.at("status_reason");
    EXPECT_EQ(row.at("rate_unit"), "samples/s");
    EXPECT_EQ(row.at("validation_status"), "passed") << row.at("canonical");
  }
  EXPECT_GE(points, 8);

  // The file, read with HDF5's C API: every d500-executor point has its step table.
  EXPECT_GT(points_with_step_tables(run / "results" / "job-0000.h5"), 0);

  // The steps d500's reference ran for a backend without the kernel, counted and named in the
  // point's attributes as its step table has them.
  int with_fallbacks = 0;
  for (const auto& p : d500::read_job_file((run / "results" / "job-0000.h5").string()).points) {
    if (p.steps.empty()) continue;
    std::int64_t fallback = 0;
    std::vector<std::string> ops;
    for (const auto& s : p.steps) {
      if (s.impl.rfind("reference (fallback", 0) != 0) continue;
      ++fallback;
      if (std::find(ops.begin(), ops.end(), s.op) == ops.end()) ops.push_back(s.op);
    }
    EXPECT_EQ(std::get<std::int64_t>(p.facts.at("executor.reference_fallback_steps")), fallback) << p.canonical;
    EXPECT_EQ(std::get<std::string>(p.facts.at("executor.reference_fallback_ops")), d500::join(ops, ", "))
        << p.canonical;
    with_fallbacks += fallback > 0;
  }
  // blas has kernels for Conv, Gemm and MatMul only.
  if (built_executors().find("\"blas\"") != std::string::npos) {
    EXPECT_GT(with_fallbacks, 0);
  }

  // h5py, as hdf5-schema/README.md shows: the costliest step of a point from the raw rows.
  Cmd py = sh(
      "/usr/bin/python3 -c \"\nimport h5py, numpy as np\nf = h5py.File('" + (run / "results" / "job-0000.h5").string() +
      "', 'r')\nfor pid, g in f['points'].items():\n    if 'steps' not in g: continue\n    t = g['step_times'][()]\n"
      "    t = t[t['rep'] >= g.attrs['warmups']]\n    worst = {}\n    for row in t: worst[(row['rep'], row['step'])] = max(worst.get((row['rep'], row['step']), 0), row['ns'])\n"
      "    med = {s: np.median([v for (r, k), v in worst.items() if k == s]) for s in set(k for _, k in worst)}\n"
      "    top = max(med, key=med.get)\n    print(g['steps'][top]['op'].decode(), g['steps'][top]['impl'].decode())\n\"");
  EXPECT_EQ(py.code, 0) << py.out;
  EXPECT_NE(py.out.find("Conv"), std::string::npos) << "a convolution or a product leads: " << py.out;
}

TEST_F(Networks, MicroBatchingTradesTimeForMemory) {
  const fs::path run = planned(
      "[campaign]\nname = \"micro\"\nrepetitions = 3\nwarmups = 1\n[fixed]\nworkload = \"network\"\n"
      "network = \"resnet20-cifar\"\nbatch = 16\npass = \"training\"\nbackend = \"reference\"\n"
      "[axes]\nmicrobatch = [0, 4]\n");
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_EQ(sh(d500_cmd("report " + run.string())).code, 0);
  auto csv = read_csv(run / "results.csv");
  double whole = 0, micro = 0;
  for (const auto& [id, row] : csv) {
    EXPECT_EQ(row.at("status"), "complete") << row.at("status_reason");
    (row.at("param_microbatch") == "0" ? whole : micro) = std::stod(row.at("memory_planned_bytes"));
  }
  // Four micro-batches keep a quarter of the activations alive.
  EXPECT_GT(whole, 0);
  EXPECT_LT(micro, 0.4 * whole) << "planned " << micro << " bytes against " << whole;
}

// fusion = "add_relu+bn_relu" (oneDNN's when asked; add_relu is cuda's default), end to end on
// oneDNN: ResNet-20's 9 residual joins and 10 conv-bn-relus run as one node each, forward and
// backward on oneDNN's kernels, named for both nodes, and no Relu is left; the joined point
// validates, counts them, keeps the model's node count and work, and plans less memory than the
// same point unjoined (whose training step kept each sum and normalised output for Relu's backward).
TEST_F(Networks, JoinedResidualsRunAsOneNodeEachAndComputeWhatTheModelDoes) {
  const d500::BackendInfo* onednn = d500::find_backend("onednn");
  if (!onednn || !onednn->built) GTEST_SKIP() << "this build has no onednn, the CPU backend that joins them";
  const fs::path run = planned(
      "[campaign]\nname = \"joins\"\nrepetitions = 2\nwarmups = 1\n[fixed]\nworkload = \"network\"\n"
      "network = \"resnet20-cifar\"\nbatch = 4\npass = \"training\"\nbackend = \"onednn\"\n"
      "[axes]\nfusion = [\"off\", \"add_relu+bn_relu\"]\n");
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto points = d500::read_job_file((run / "results" / "job-0000.h5").string()).points;
  ASSERT_EQ(points.size(), 2u);
  const d500::PointResult* as_model = nullptr;
  const d500::PointResult* joined = nullptr;
  for (const auto& p : points) (p.canonical.find("fusion=add_relu") != std::string::npos ? joined : as_model) = &p;
  ASSERT_TRUE(as_model && joined);
  for (const auto* p : {as_model, joined}) {
    EXPECT_EQ(p->validation_status, "passed") << p->canonical << ": " << p->validation_method;
    int adds = 0, relus = 0, fused = 0, bn_relus = 0;
    for (const auto& st : p->steps) {
      adds += st.op == "Add";
      relus += st.op == "Relu";
      if (st.op == "BatchNormRelu") {
        ++bn_relus;
        EXPECT_EQ(st.impl, "d500 batch normalization loops, relu joined (NCHW)") << st.name;
        EXPECT_NE(st.name.find("+Relu_"), std::string::npos) << st.name;
      }
      if (st.op != "AddRelu") continue;
      ++fused;
      EXPECT_EQ(st.impl, "onednn binary add with relu post-op; backward d500's loop") << st.name;
      EXPECT_NE(st.name.find("+Relu_"), std::string::npos) << st.name;
    }
    const bool join = p == joined;
    EXPECT_EQ(fused, join ? 2 * 9 : 0) << p->canonical;
    EXPECT_EQ(adds, join ? 0 : 2 * 9) << p->canonical;
    EXPECT_EQ(bn_relus, join ? 2 * 10 : 0) << p->canonical;
    EXPECT_EQ(relus, join ? 0 : 2 * 19) << p->canonical;
    EXPECT_EQ(std::get<std::int64_t>(p->facts.at("executor.fused_add_relu")), join ? 9 : 0) << p->canonical;
    EXPECT_EQ(std::get<std::int64_t>(p->facts.at("executor.fused_bn_relu")), join ? 10 : 0) << p->canonical;
  }
  EXPECT_EQ(joined->facts.at("network.nodes"), as_model->facts.at("network.nodes"));
  EXPECT_EQ(joined->work_flops, as_model->work_flops);
  EXPECT_EQ(joined->steps.size() + 2 * (9 + 10), as_model->steps.size());
  EXPECT_LT(std::get<std::int64_t>(joined->facts.at("memory.planned_bytes")),
            std::get<std::int64_t>(as_model->facts.at("memory.planned_bytes")));
}

// math = "bf16" and memory_format = "channels_last" on oneDNN, end to end: ResNet-20's training step
// with its convolutions and its Gemm in oneDNN's bfloat16 primitives validates against the
// yardstick's simulation of bfloat16, which the point's validation method states; with its
// activations NHWC its convolutions, normalisations and poolings compute where they lie and say
// so; every product's step names its arithmetic, and none falls back to the reference. The
// float32 NCHW point of the same campaign keeps its id and its kernels. On a CPU without AVX-512
// (oneDNN 2.6 has no bfloat16 kernels there) the bf16 points fail at setup, saying so and what to
// do, and the float32 ones run as anywhere.
TEST_F(Networks, OnednnsBf16MathAndChannelsLastRunWhereTheySayAndValidate) {
  const d500::BackendInfo* onednn = d500::find_backend("onednn");
  if (!onednn || !onednn->built) GTEST_SKIP() << "this build has no onednn, the CPU backend with bfloat16 products";
  const std::string no_bf16 = d500::test::no_cpu_bf16_here(*onednn);
  const fs::path run = planned(
      "[campaign]\nname = \"bf16\"\nrepetitions = 2\nwarmups = 1\n[fixed]\nworkload = \"network\"\n"
      "network = \"resnet20-cifar\"\nbatch = 4\npass = \"training\"\nbackend = \"onednn\"\n"
      "[axes]\nmath = [\"fp32\", \"bf16\"]\nmemory_format = [\"nchw\", \"channels_last\"]\n");
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto points = d500::read_job_file((run / "results" / "job-0000.h5").string()).points;
  ASSERT_EQ(points.size(), 4u);
  int plain = 0;
  for (const auto& p : points) {
    const bool bf16 = p.canonical.find("math=bf16") != std::string::npos;
    const bool nhwc = p.canonical.find("memory_format=channels_last") != std::string::npos;
    SCOPED_TRACE(p.canonical);
    plain += p.canonical.find("math") == std::string::npos && p.canonical.find("memory_format") == std::string::npos;
    if (bf16 && !no_bf16.empty()) {
      std::printf("%s: %s\n", p.canonical.c_str(), no_bf16.c_str());
      EXPECT_EQ(p.status, "backend-failed");
      EXPECT_NE(p.status_reason.find("only on CPUs with AVX-512"), std::string::npos) << p.status_reason;
      EXPECT_NE(p.status_reason.find("give this point math = \"fp32\""), std::string::npos) << p.status_reason;
      continue;
    }
    EXPECT_EQ(p.validation_status, "passed") << p.validation_method;
    EXPECT_EQ(p.validation_method.find("rounded to 7 mantissa bits") != std::string::npos, bf16) << p.validation_method;
    int products = 0, layouts = 0;
    for (const auto& st : p.steps) {
      const bool product = st.op == "Conv" || st.op == "Gemm";
      products += product;
      if (product) {
        EXPECT_EQ(st.impl.find("bfloat16") != std::string::npos, bf16) << st.name << ": " << st.impl;
      }
      const bool layout = st.op == "Conv" || st.op == "BatchNormalization" || st.op == "GlobalAveragePool";
      layouts += layout;
      if (layout) {
        EXPECT_EQ(st.impl.find("NHWC") != std::string::npos, nhwc) << st.name << ": " << st.impl;
      }
      // bf16 keeps the activations in bfloat16, as autocast does, in either layout: the
      // normalisations, ReLUs and residual Adds compute on them. An NCHW normalisation runs on
      // d500's loops (oneDNN's own has no JIT kernel for NCHW), NHWC on oneDNN's.
      const bool between = st.op == "BatchNormalization" || st.op == "Relu" || st.op == "Add";
      if (between) {
        EXPECT_EQ(st.impl.find("bfloat16") != std::string::npos, bf16) << st.name << ": " << st.impl;
      }
      if (st.op == "BatchNormalization") {
        EXPECT_EQ(st.impl.find("d500 batch normalization loops") != std::string::npos, !nhwc) << st.impl;
      }
      if (st.op == "Conv" && st.name != "Conv_0") {
        EXPECT_EQ(st.impl.find("on bfloat16 activations") != std::string::npos, bf16) << st.name;
      }
    }
    EXPECT_EQ(p.validation_method.find("activations the step keeps in bfloat16") != std::string::npos, bf16)
        << p.validation_method;
    EXPECT_EQ(products, 2 * (21 + 1));
    EXPECT_EQ(layouts, 2 * (21 + 21 + 1));
    const auto& fallback = std::get<std::string>(p.facts.at("executor.reference_fallback_ops"));
    for (const char* op : {"Conv", "Gemm", "BatchNormalization"})
      EXPECT_EQ(fallback.find(op), std::string::npos) << fallback;
  }
  EXPECT_EQ(plain, 1) << "fp32 and nchw are the defaults: one point's id names neither";
}

// A setting left unset (or set to its backend's default, which the planner normalises away from the id)
// is recorded with what it stands for on the point (`unset.<key>`), and the report says that value,
// never "default": a campaign that wrote math = "fp32" reads fp32. Another backend's setting reads as
// absent. A point whose results file is gone reads like its siblings.
TEST_F(Networks, WhatAnUnsetSettingStandsForIsRecordedAndReportedAsThatValue) {
  const d500::BackendInfo* onednn = d500::find_backend("onednn");
  if (!onednn || !onednn->built) GTEST_SKIP() << "this build has no onednn, a backend with settings of its own";
  const fs::path run = planned(
      "[campaign]\nname = \"unset\"\nrepetitions = 2\nwarmups = 1\nlaunches = 2\n[fixed]\nworkload = \"network\"\n"
      "network = \"lenet5\"\nbatch = 4\npass = \"training\"\n[axes]\nbackend = [\"onednn\", \"reference\"]\n");
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto points = d500::read_job_file((run / "results" / "job-0000.h5").string()).points;
  ASSERT_EQ(points.size(), 2u);
  for (const auto& p : points) {
    SCOPED_TRACE(p.canonical);
    ASSERT_EQ(p.canonical.find("math"), std::string::npos) << "fp32 is not in the id";
    ASSERT_TRUE(p.unset.count("cudnn_api")) << "every backend setting the point leaves unset is said";
    EXPECT_EQ(p.unset.at("cudnn_api"), "") << "cuda's setting changes nothing here";
    if (p.canonical.rfind("network:onednn", 0) == 0) {
      EXPECT_EQ(p.unset.at("math"), "fp32");
      EXPECT_EQ(p.unset.at("memory_format"), "nchw");
      EXPECT_EQ(p.unset.at("fusion"), "off");
    } else {
      EXPECT_EQ(p.unset.at("math"), "") << "the reference computes in float32 and has no such setting";
    }
  }
  Cmd check = sh(d500_cmd("check " + (run / "results" / "job-0000.h5").string()));
  EXPECT_EQ(check.code, 0) << check.out;
  // Launch 2's results file lost: its points are missing, and read as their launch 1 siblings do.
  fs::remove(run / "results" / "job-0001.h5");
  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  const auto rows = read_csv(run / "results.csv");
  ASSERT_EQ(rows.size(), 4u);
  int missing = 0;
  for (const auto& [id, row] : rows) {
    SCOPED_TRACE(id + " " + row.at("canonical"));
    missing += row.at("status") == "missing";
    EXPECT_EQ(row.at("param_math"), row.at("backend") == "onednn" ? "fp32" : "");
    EXPECT_EQ(row.at("param_memory_format"), row.at("backend") == "onednn" ? "nchw" : "");
  }
  EXPECT_EQ(missing, 2);
  const std::string md = read_file_text(run / "report.md");
  EXPECT_NE(md.find("A backend's own settings, the same on all its points: onednn: fusion=off math=fp32 "
                    "memory_format=nchw."),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("| default |"), std::string::npos) << md;
  EXPECT_EQ(rep.out.find("default"), std::string::npos) << rep.out;
}

TEST_F(Networks, AWrongCustomOperatorIsFoundAtItsNode) {
  const fs::path run = planned(
      "[campaign]\nname = \"wrong\"\nrepetitions = 3\nwarmups = 1\n[fixed]\nworkload = \"network\"\n"
      "network = \"lenet5\"\nbatch = 4\nbackend = \"custom\"\nlibrary = \"" +
      std::string(D500_CUSTOM_RELU_WRONG) + "\"\n[axes]\npass = [\"inference\", \"training\"]\n");
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 failed-validation"), std::string::npos) << r.out;
  ASSERT_EQ(sh(d500_cmd("report " + run.string())).code, 0);
  for (const auto& [id, row] : read_csv(run / "results.csv")) {
    EXPECT_EQ(row.at("status"), "failed-validation");
    EXPECT_NE(row.at("status_reason").find("Relu node 'Relu_0' (computed by custom example relu (deliberately wrong))"),
              std::string::npos)
        << row.at("status_reason");
    EXPECT_EQ(row.at("n"), "0") << "never timed";
  }
}

// Every built-in network, written by `d500 export-network`, is a model another ONNX implementation
// accepts: Python's onnx checker (full check, with its shape inference) and its shape inference
// agreeing on the output's shape with what `d500 networks` prints.
TEST_F(Networks, EveryExportedBuiltInPassesPythonsOnnxChecker) {
  if (sh("/usr/bin/python3 -c 'import onnx'").code != 0)
    GTEST_SKIP() << "Python's onnx is missing (Debian python3-onnx)";
  const std::string names[] = {"lenet5", "mlp", "resnet18", "resnet50", "resnet20-cifar", "transformer-encoder"};
  const Cmd list = sh(d500_cmd("networks"));  // builds every network: once, not once a name
  ASSERT_EQ(list.code, 0) << list.out;
  for (const auto& name : names) {
    const fs::path file = dir_ / (name + ".onnx");
    Cmd ex = sh(d500_cmd("export-network " + name + " -o " + file.string()));
    ASSERT_EQ(ex.code, 0) << name << ": " << ex.out;
    Cmd py = sh(
        "/usr/bin/python3 -c \"\nimport onnx, sys\nm = onnx.load(sys.argv[1])\nonnx.checker.check_model(m, full_check=True)\n"
        "i = onnx.shape_inference.infer_shapes(m, strict_mode=True)\nprint(len(m.graph.node), m.opset_import[0].version)\n\" " +
        file.string());
    ASSERT_EQ(py.code, 0) << name << ": " << py.out;
    int nodes = 0, opset = 0;
    ASSERT_EQ(std::sscanf(py.out.c_str(), "%d %d", &nodes, &opset), 2) << py.out;
    const auto at = list.out.find("  " + name + ":");
    ASSERT_NE(at, std::string::npos) << list.out;
    const std::string entry = list.out.substr(at, list.out.find("operators:", at) - at);
    // d500 counts the nodes it runs; where shape computations fold it also gives the file's count.
    EXPECT_TRUE(entry.find(" " + std::to_string(nodes) + " nodes\n") != std::string::npos ||
                entry.find("(" + std::to_string(nodes) + " in the ONNX file") != std::string::npos)
        << name << " has " << nodes << " nodes for Python: " << entry;
    EXPECT_GE(opset, 13) << name;
  }
}

TEST_F(Networks, PlanTimeRefusalsNameTheFileTheKeyAndTheNode) {
  // An operator d500 does not run, in a user's model.
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("odd");
  for (const char* n : {"x", "y"}) {
    auto* v = std::string(n) == "x" ? g->add_input() : g->add_output();
    v->set_name(n);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("N");
    t->mutable_shape()->add_dim()->set_dim_value(3);
  }
  auto* node = g->add_node();
  node->set_op_type("EyeLike");
  node->set_name("odd_one");
  node->add_input("x");
  node->add_output("y");
  const std::string model = (dir_ / "eyelike.onnx").string();
  {
    std::ofstream out(model, std::ios::binary);
    m.SerializeToOstream(&out);
  }
  auto plan = [&](const std::string& fixed) {
    return sh(d500_cmd(
        "plan " +
        write("c.toml",
              "[campaign]\nname = \"bad\"\n[fixed]\nworkload = \"network\"\nbackend = \"reference\"\n" + fixed) +
        " -o " + (dir_ / "run").string()));
  };
  Cmd a = plan("network = \"" + model + "\"\nbatch = 2\n");
  EXPECT_NE(a.code, 0);
  EXPECT_NE(a.out.find("c.toml:"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("EyeLike node 'odd_one'"), std::string::npos) << a.out;
  EXPECT_FALSE(fs::exists(dir_ / "run")) << "nothing is written";
  Cmd b = plan("network = \"lenet5\"\nbatch = 8\nmicrobatch = 3\n");
  EXPECT_NE(b.out.find("microbatch 3 does not divide batch 8"), std::string::npos) << b.out;
  Cmd c = plan("network = \"resnet20cifar\"\nbatch = 8\n");
  EXPECT_NE(c.out.find("did you mean 'resnet20-cifar'"), std::string::npos) << c.out;
  Cmd d = plan("network = \"" + kFixture + "\"\n");
  EXPECT_NE(d.out.find("symbolic"), std::string::npos) << d.out;
  Cmd e = plan("network = \"lenet5\"\nbatch = 2\npass = \"train\"\n");
  EXPECT_NE(e.out.find("training"), std::string::npos) << "the valid choices: " << e.out;
}

// ONNX's own backend tests (Debian libonnx-testdata) on every backend that runs networks: no case
// fails but the one known difference, and the pass counts do not fall.
TEST(Conformance, EveryBackendPassesOnnxsNodeTests) {
  const std::string data = "/usr/share/libonnx-testdata/data";
  if (!fs::exists(data + "/node")) {
    const char* req = std::getenv("D500_REQUIRE_BACKENDS");
    if (req && *req) FAIL() << data << " is missing: tests/run.sh installs libonnx-testdata";
    GTEST_SKIP() << data << " is missing (Debian libonnx-testdata)";
  }
  // Known and reported: oneDNN's eltwise log gives -1.43e-6 for log(1), ONNX wants 0 within 1e-7.
  const std::map<std::string, std::set<std::string>> known = {{"onednn", {"test_log_example"}}};
  int backends = 0;
  for (const auto& b : d500::all_backends()) {
    if (!b.built || !(b.name == "reference" || b.make_node_kernel || b.make_graph_runner) || b.name == "custom")
      continue;
    if (b.no_device && !b.no_device().empty()) continue;  // a GPU executor on a host without one
    ++backends;
    std::ostringstream log;
    const auto node = d500::run_conformance({data + "/node"}, b, log);
    const auto pt = d500::run_conformance({data + "/pytorch-converted", data + "/pytorch-operator"}, b, log);
    for (const auto* s : {&node, &pt})
      for (const auto& c : s->cases)
        if (c.result == d500::ConformanceCase::Result::Fail) {
          EXPECT_TRUE(known.count(b.name) && known.at(b.name).count(c.name))
              << b.name << ": " << c.name << ": " << c.detail;
        }
    EXPECT_GE(node.passed, 640) << b.name;
    EXPECT_GE(pt.passed, 95) << b.name;
  }
  EXPECT_GE(backends, 2);
}
