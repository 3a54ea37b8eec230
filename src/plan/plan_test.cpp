#include "plan/plan.hpp"

#include <gtest/gtest.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include "backends/registry.hpp"
#include "campaign/campaign.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "plan/jobspec.hpp"

#include <unistd.h>

using namespace d500;
namespace fs = std::filesystem;

namespace {
const std::string kHead = "[campaign]\nname = \"t\"\n";

Plan plan_of(const std::string& text) { return make_plan(parse_campaign_text(text, "c.toml"), builtin_workloads()); }

std::string plan_error_of(const std::string& text) {
  try {
    plan_of(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Plan, CartesianProductWithDefaultsAndCanonicalIds) {
  Plan p = plan_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"reference\", \"blas\"]\nn = [8, 16, 32]\n");
  ASSERT_EQ(p.points.size(), 6u);
  std::set<std::string> ids;
  for (const auto& pt : p.points) {
    ids.insert(pt.id);
    EXPECT_EQ(pt.id, hex64(fnv1a64(pt.canonical)));
    EXPECT_EQ(pt.level, 0);
  }
  EXPECT_EQ(ids.size(), 6u);
  // Defaults are filled and derived values made explicit, so equal problems get equal ids.
  EXPECT_EQ(p.points[0].canonical, "gemm:reference k=8 m=8 n=8 nodes=1 ranks_per_node=1 seed=1 threads=1");
}

TEST(Plan, IsDeterministicAndIndependentOfLineOrder) {
  std::string a = kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"reference\", \"blas\"]\nn = [8, 16]\n";
  std::string b = kHead + "[axes]\nn = [8, 16]\nbackend = [\"reference\", \"blas\"]\nworkload = [\"gemm\"]\n";
  Plan pa = plan_of(a), pb = plan_of(a), pc = plan_of(b);
  ASSERT_EQ(pa.points.size(), pc.points.size());
  for (std::size_t i = 0; i < pa.points.size(); ++i) {
    EXPECT_EQ(pa.points[i].id, pb.points[i].id);
    EXPECT_EQ(pa.points[i].id, pc.points[i].id);
  }
}

TEST(Plan, ZipAdvancesAxesTogetherAndExcludeDrops) {
  Plan p = plan_of(kHead +
                   "[axes]\nworkload = [\"gemm\"]\nbackend = [\"reference\", \"blas\"]\nn = [8, 16, 32]\n"
                   "m = [4, 8, 16]\n[[zip]]\naxes = [\"m\", \"n\"]\n"
                   "[[exclude]]\nbackend = \"reference\"\nn = [16, 32]\n");
  // 3 zipped (m, n) pairs x 2 backends, minus 2 excluded reference points.
  ASSERT_EQ(p.points.size(), 4u);
  PointResolver res(p);
  for (const auto& pt : p.points) {
    const Params params = res.params(pt);
    EXPECT_EQ(std::get<std::int64_t>(params.at("m")) * 2, std::get<std::int64_t>(params.at("n")));
  }
}

TEST(Plan, ParametersAWorkloadDoesNotTakeAreDroppedAndDeduplicated) {
  Plan p = plan_of(kHead +
                   "[axes]\nworkload = [\"gemm\", \"allreduce\"]\nbackend = [\"blas\", \"mpi\"]\n"
                   "n = [8, 16]\nbytes = [64, 128, 256]\nranks_per_node = [2]\n"
                   "[[exclude]]\nworkload = \"gemm\"\nbackend = \"mpi\"\n"
                   "[[exclude]]\nworkload = \"allreduce\"\nbackend = \"blas\"\n");
  int gemm = 0, allreduce = 0;
  PointResolver res(p);
  for (const auto& pt : p.points) {
    const Params params = res.params(pt);
    if (pt.canonical.rfind("gemm:", 0) == 0) {
      ++gemm;
      EXPECT_FALSE(params.count("bytes"));
    } else {
      ++allreduce;
      EXPECT_FALSE(params.count("n"));
    }
  }
  EXPECT_EQ(gemm, 2);
  EXPECT_EQ(allreduce, 3);
}

TEST(Plan, UnknownNamesGetSuggestions) {
  std::string e = plan_error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nnn = [8]\n");
  EXPECT_NE(e.find("c.toml:6:1"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown parameter 'nn'; did you mean 'n'"), std::string::npos) << e;
  e = plan_error_of(kHead + "[axes]\nworkload = [\"gemmm\"]\nbackend = [\"blas\"]\nn = [8]\n");
  EXPECT_NE(e.find("c.toml:4:13"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'gemm'"), std::string::npos) << e;
  e = plan_error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blsa\"]\nn = [8]\n");
  EXPECT_NE(e.find("did you mean 'blas'"), std::string::npos) << e;
}

TEST(Plan, MissingBackendIsAPlanTimeError) {
  std::string missing;  // a backend d500 knows and this build lacks
  for (const auto& b : all_backends())
    if (!b.built && missing.empty()) missing = b.name;
  if (missing.empty()) GTEST_SKIP() << "this build has every backend d500 knows";
  std::string e =
      plan_error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\", \"" + missing + "\"]\nn = [8]\n");
  EXPECT_NE(e.find("c.toml:5:20"), std::string::npos) << e;
  EXPECT_NE(e.find("backend '" + missing + "' is not available in this build"), std::string::npos) << e;
}

TEST(Plan, ImpossibleCombinationSaysHowToExcludeIt) {
  std::string e = plan_error_of(kHead + "[axes]\nworkload = [\"allreduce\"]\nbackend = [\"blas\"]\nbytes = [64]\n");
  EXPECT_NE(e.find("impossible combination"), std::string::npos) << e;
  EXPECT_NE(e.find("[[exclude]] workload = \"allreduce\", backend = \"blas\""), std::string::npos) << e;
}

TEST(Plan, ValuesAreRangeCheckedWhereTheyWereWritten) {
  std::string e = plan_error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8, 0]\n");
  EXPECT_NE(e.find("c.toml:6:9"), std::string::npos) << e;
  EXPECT_NE(e.find("valid for gemm: 1 to 65536"), std::string::npos) << e;
  e = plan_error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [\"big\"]\n");
  EXPECT_NE(e.find("expected integer"), std::string::npos) << e;
  e = plan_error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\n");
  EXPECT_NE(e.find("'n' must be given (a positive size) unless 'shape' names a problem"), std::string::npos) << e;
  e = plan_error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"reference\"]\nn = [8]\nthreads = [2]\n");
  EXPECT_NE(e.find("single-threaded"), std::string::npos) << e;
  e = plan_error_of(kHead + "[axes]\nworkload = [\"allreduce\"]\nbackend = [\"mpi\"]\nbytes = [6]\n");
  EXPECT_NE(e.find("multiple of 4"), std::string::npos) << e;
  e = plan_error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\nnodes = [2]\n");
  EXPECT_NE(e.find("nodes must be 1"), std::string::npos) << e;
}

// cudnn_api: cuda's alone, refused elsewhere naming the key; its values checked at their line.
// Its default changed from legacy to graph: a cuda convolution or network point that leaves it
// unset is planned with cudnn_api=graph in its id, and one that says "legacy" keeps the id that
// points planned before the change have (no key); an operator that is no convolution, and a
// point on another backend, carry no key.
TEST(Plan, CudnnApiDefaultsToGraphInTheIdAndLegacyKeepsTheOldId) {
  std::string e =
      plan_error_of(kHead +
                    "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nshape = \"resnet50/res2_3x3\"\nn = 2\n"
                    "cudnn_api = \"graph\"\n");
  EXPECT_NE(e.find("'cudnn_api' is only for backend \"cuda\" (this point's backend is \"blas\")"), std::string::npos)
      << e;
  e = plan_error_of(
      kHead +
      "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nshape = \"resnet50/res2_3x3\"\nn = 2\ncudnn_api = \"grahp\"\n");
  EXPECT_NE(e.find("c.toml:8:13"), std::string::npos) << e;
  EXPECT_NE(e.find("(valid: legacy, graph)"), std::string::npos) << e;
  const std::string blas =
      plan_of(kHead + "[fixed]\nbackend = \"blas\"\nworkload = \"conv2d\"\nshape = \"resnet50/res2_3x3\"\nn = 2\n")
          .points.at(0)
          .canonical;
  EXPECT_EQ(blas.find("cudnn_api"), std::string::npos) << "another backend's default is not planned: " << blas;
  const BackendInfo* cuda = find_backend("cuda");
  if (!cuda || !cuda->built) GTEST_SKIP() << "the rest plans cuda points, which this build lacks";
  const std::string conv =
      kHead + "[fixed]\nbackend = \"cuda\"\nworkload = \"conv2d\"\nshape = \"resnet50/res2_3x3\"\nn = 2\n";
  const auto pts = plan_of(conv + "[axes]\ncudnn_api = [\"legacy\", \"graph\"]\n").points;
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0].canonical.find("cudnn_api"), std::string::npos) << "legacy keeps the old id: " << pts[0].canonical;
  EXPECT_NE(pts[1].canonical.find("cudnn_api=graph"), std::string::npos) << pts[1].canonical;
  const auto unset = plan_of(conv).points.at(0);
  EXPECT_EQ(unset.canonical, pts[1].canonical) << "unset is graph, and its id says so";
  const auto pool =
      plan_of(
          kHead +
          "[fixed]\nbackend = \"cuda\"\nworkload = \"pool2d\"\nn = 2\nc = 4\nh = 8\n[axes]\ncudnn_api = [\"legacy\", \"graph\"]\n")
          .points;
  ASSERT_EQ(pool.size(), 1u) << "one problem, planned once";
  EXPECT_EQ(pool[0].canonical.find("cudnn_api"), std::string::npos) << pool[0].canonical;
  // d500's executor calls its convolutions either way too (levels 1-3), and level 3 as level 2.
  const std::string net =
      kHead + "[fixed]\nbackend = \"cuda\"\nworkload = \"train\"\nnetwork = \"lenet5\"\ndataset = \"synthetic\"\n";
  const auto trains = plan_of(net + "[axes]\ncudnn_api = [\"legacy\", \"graph\"]\n").points;
  ASSERT_EQ(trains.size(), 2u);
  EXPECT_EQ(trains[0].canonical.find("cudnn_api"), std::string::npos) << trains[0].canonical;
  EXPECT_EQ(trains[1].canonical, plan_of(net).points.at(0).canonical);
  EXPECT_NE(trains[1].canonical.find("cudnn_api=graph"), std::string::npos) << trains[1].canonical;
  const std::string distributed = plan_of(kHead +
                                          "[fixed]\nbackend = \"cuda\"\nworkload = \"distributed\"\nnetwork = "
                                          "\"lenet5\"\ndataset = \"synthetic\"\nranks_per_node = 2\n")
                                      .points.at(0)
                                      .canonical;
  EXPECT_NE(distributed.find("cudnn_api=graph"), std::string::npos) << distributed;
}

// fusion: cuda's and onednn's, for d500's executor (levels 1-3). cuda's default, add_relu, is new: a
// cuda network point that leaves it unset is planned with fusion=add_relu in its id, one that says
// "off" keeps the id points planned before it have, and a level-0 point carries no key; onednn's
// default is off (no key), add_relu, bn_relu or both asked for, as cuda's may be; a value neither
// takes is refused at its line, naming the valid ones; another backend's point that sets it is
// refused, naming the key.
TEST(Plan, FusionDefaultsToAddReluInTheIdOfCudaNetworkPointsAndOffKeepsTheOldId) {
  const std::string e = plan_error_of(
      kHead +
      "[fixed]\nworkload = \"network\"\nbackend = \"blas\"\nnetwork = \"lenet5\"\nbatch = 2\nfusion = \"add_relu\"\n");
  EXPECT_NE(e.find("'fusion' is only for backends \"cuda\" and \"onednn\" (this point's backend is \"blas\"; the other "
                   "backends run each node as the model has it)"),
            std::string::npos)
      << e;
  const std::string blas =
      plan_of(kHead + "[fixed]\nworkload = \"network\"\nbackend = \"blas\"\nnetwork = \"lenet5\"\nbatch = 2\n")
          .points.at(0)
          .canonical;
  EXPECT_EQ(blas.find("fusion"), std::string::npos) << blas;
  if (const BackendInfo* onednn = find_backend("onednn"); onednn && onednn->built) {  // onednn's, default off
    const std::string net =
        kHead + "[fixed]\nworkload = \"network\"\nbackend = \"onednn\"\nnetwork = \"lenet5\"\nbatch = 2\n";
    const std::string unset = plan_of(net).points.at(0).canonical;
    EXPECT_EQ(unset.find("fusion"), std::string::npos) << unset;
    EXPECT_EQ(plan_of(net + "fusion = \"off\"\n").points.at(0).canonical, unset);
    const std::string joined = plan_of(net + "fusion = \"add_relu\"\n").points.at(0).canonical;
    EXPECT_NE(joined.find("fusion=add_relu"), std::string::npos) << joined;
    for (const char* both : {"bn_relu", "add_relu+bn_relu"}) {
      const std::string id = plan_of(net + "fusion = \"" + both + "\"\n").points.at(0).canonical;
      EXPECT_NE(id.find(std::string("fusion=") + both), std::string::npos) << id;
    }
  }
  const BackendInfo* cuda = find_backend("cuda");
  if (!cuda || !cuda->built) GTEST_SKIP() << "the rest plans cuda points, which this build lacks";
  for (const char* workload : {"network", "train"}) {
    SCOPED_TRACE(workload);
    const std::string net = kHead + "[fixed]\nbackend = \"cuda\"\nworkload = \"" + workload +
                            "\"\nnetwork = \"resnet20-cifar\"\nbatch = 2\n" +
                            (std::string(workload) == "train" ? "dataset = \"synthetic\"\n" : "");
    const auto pts = plan_of(net + "[axes]\nfusion = [\"off\", \"add_relu\"]\n").points;
    ASSERT_EQ(pts.size(), 2u);
    EXPECT_EQ(pts[0].canonical.find("fusion"), std::string::npos) << "off keeps the old id: " << pts[0].canonical;
    EXPECT_NE(pts[1].canonical.find("fusion=add_relu"), std::string::npos) << pts[1].canonical;
    EXPECT_EQ(plan_of(net).points.at(0).canonical, pts[1].canonical) << "unset is add_relu, and its id says so";
    for (const char* both : {"bn_relu", "add_relu+bn_relu"}) {
      const std::string id = plan_of(net + "fusion = \"" + both + "\"\n").points.at(0).canonical;
      EXPECT_NE(id.find(std::string("fusion=") + both), std::string::npos) << id;
    }
    const std::string refused = plan_error_of(net + "fusion = \"bn-relu\"\n");
    EXPECT_NE(refused.find("key 'fusion' is \"bn-relu\"; did you mean 'bn_relu'? (valid: off, add_relu, bn_relu, "
                           "add_relu+bn_relu)"),
              std::string::npos)
        << refused;
    const auto line = std::count(net.begin(), net.end(), '\n') + 1;
    EXPECT_NE(refused.find("c.toml:" + std::to_string(line) + ":"), std::string::npos) << "its own line: " << refused;
  }
  const std::string conv =
      plan_of(kHead + "[fixed]\nbackend = \"cuda\"\nworkload = \"conv2d\"\nshape = \"resnet50/res2_3x3\"\nn = 2\n")
          .points.at(0)
          .canonical;
  EXPECT_EQ(conv.find("fusion"), std::string::npos) << "a level-0 operator runs no graph: " << conv;
}

// cudnn_algorithms: cuda's and libtorch-cuda's alone (refused elsewhere, naming the key), its values checked where
// written; the workload's default, written out, keeps the id of the point that leaves it unset
// (level 0: heuristic, d500's executor: deterministic), and an operator with no algorithms to
// choose drops it.
TEST(Plan, CudnnAlgorithmsAreCudasAloneAndTheWorkloadsDefaultKeepsTheId) {
  std::string e =
      plan_error_of(kHead +
                    "[fixed]\nworkload = \"network\"\nbackend = \"reference\"\nnetwork = \"lenet5\"\nbatch = 2\n"
                    "cudnn_algorithms = \"heuristic\"\n");
  EXPECT_NE(
      e.find(
          "'cudnn_algorithms' is only for backends \"cuda\" and \"libtorch-cuda\" (this point's backend is \"reference\")"),
      std::string::npos)
      << e;
  EXPECT_NE(e.find("c.toml:8:20: "), std::string::npos) << "the refused key's own line: " << e;
  e = plan_error_of(kHead +
                    "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nshape = \"resnet50/res2_3x3\"\nn = 2\n"
                    "cudnn_algorithms = \"fastest\"\n");
  EXPECT_NE(e.find("c.toml:8:20"), std::string::npos) << e;
  EXPECT_NE(e.find("key 'cudnn_algorithms' is \"fastest\" (valid: heuristic, deterministic, find)"), std::string::npos)
      << e;
  const BackendInfo* cuda = find_backend("cuda");
  if (!cuda || !cuda->built) GTEST_SKIP() << "the rest plans cuda points, which this build lacks";
  auto ids = [](const std::string& fixed, const std::string& axis) {
    std::vector<std::string> out;
    for (const auto& pt :
         plan_of(kHead + "[fixed]\nbackend = \"cuda\"\n" + fixed + "[axes]\ncudnn_algorithms = " + axis + "\n").points)
      out.push_back(pt.canonical);
    return out;
  };
  const std::string conv = "workload = \"conv2d\"\nshape = \"resnet50/res2_3x3\"\nn = 2\n";
  const auto level0 = ids(conv, "[\"heuristic\", \"deterministic\", \"find\"]");
  ASSERT_EQ(level0.size(), 3u);
  EXPECT_EQ(level0[0], plan_of(kHead + "[fixed]\nbackend = \"cuda\"\n" + conv).points.at(0).canonical);
  EXPECT_EQ(level0[0].find("cudnn_algorithms"), std::string::npos) << level0[0];
  EXPECT_NE(level0[1].find("cudnn_algorithms=deterministic"), std::string::npos) << level0[1];
  EXPECT_NE(level0[2].find("cudnn_algorithms=find"), std::string::npos) << level0[2];
  const auto gemm = ids("workload = \"gemm\"\nn = 64\n", "[\"heuristic\", \"deterministic\"]");
  ASSERT_EQ(gemm.size(), 1u) << "one problem, planned once";
  EXPECT_EQ(gemm[0].find("cudnn_algorithms"), std::string::npos) << gemm[0];
  const auto level1 = ids("workload = \"network\"\nnetwork = \"lenet5\"\nbatch = 2\npass = \"training\"\n",
                          "[\"deterministic\", \"heuristic\", \"find\"]");
  ASSERT_EQ(level1.size(), 3u);
  EXPECT_EQ(level1[0].find("cudnn_algorithms"), std::string::npos) << level1[0];
  EXPECT_NE(level1[1].find("cudnn_algorithms=heuristic"), std::string::npos) << level1[1];
  EXPECT_NE(level1[2].find("cudnn_algorithms=find"), std::string::npos) << level1[2];
}

// memory_format: libtorch-cuda's and libtorch-native's, and cuda's and onednn's for d500's executor,
// named at its line on another; "nchw", the default, keeps the id.
TEST(Plan, MemoryFormatIsTheGpuBackendsAndOnednnsAndItsDefaultKeepsTheId) {
  std::string e = plan_error_of(kHead +
                                "[fixed]\nworkload = \"network\"\nbackend = \"blas\"\nnetwork = \"lenet5\"\nbatch = 2\n"
                                "memory_format = \"channels_last\"\n");
  EXPECT_NE(e.find("'memory_format' is only for backends \"cuda\", \"libtorch-cuda\", \"libtorch-native\" and "
                   "\"onednn\" (this point's backend is \"blas\"; reference, blas and libtorch keep NCHW)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("c.toml:8:"), std::string::npos) << "the refused key's own line: " << e;
  e = plan_error_of(
      kHead +
      "[fixed]\nworkload = \"network\"\nbackend = \"reference\"\nnetwork = \"lenet5\"\nbatch = 2\nmemory_format = \"nhwc\"\n");
  EXPECT_NE(e.find("(valid: nchw, channels_last)"), std::string::npos) << e;
  const auto with = plan_of(
      kHead +
      "[fixed]\nworkload = \"network\"\nbackend = \"reference\"\nnetwork = \"lenet5\"\nbatch = 2\nmemory_format = \"nchw\"\n");
  const auto without =
      plan_of(kHead + "[fixed]\nworkload = \"network\"\nbackend = \"reference\"\nnetwork = \"lenet5\"\nbatch = 2\n");
  EXPECT_EQ(with.points.at(0).canonical, without.points.at(0).canonical);
  if (const BackendInfo* onednn = find_backend("onednn"); onednn && onednn->built) {
    const std::string net =
        kHead + "[fixed]\nworkload = \"network\"\nbackend = \"onednn\"\nnetwork = \"lenet5\"\nbatch = 2\n";
    const std::string plain = plan_of(net).points.at(0).canonical;
    EXPECT_EQ(plan_of(net + "memory_format = \"nchw\"\n").points.at(0).canonical, plain);
    const std::string last = plan_of(net + "memory_format = \"channels_last\"\n").points.at(0).canonical;
    EXPECT_NE(last.find("memory_format=channels_last"), std::string::npos) << last;
  }
}

// cuda_graph = "step": cuda's, for training; a step a replay would not repeat is refused at the
// key's line, naming why; "off", the default, keeps the id; a level-1 point drops it.
TEST(Plan, CudaGraphRecordsOnlyAStepThatEveryReplayRepeats) {
  std::string e = plan_error_of(kHead +
                                "[fixed]\nworkload = \"train\"\nbackend = \"reference\"\nnetwork = \"mlp\"\n"
                                "dataset = \"synthetic\"\ncuda_graph = \"step\"\n");
  EXPECT_NE(e.find("'cuda_graph' is only for backend \"cuda\""), std::string::npos) << e;
  const BackendInfo* cuda = find_backend("cuda");
  if (!cuda || !cuda->built) GTEST_SKIP() << "the rest plans cuda points, which this build lacks";
  const std::string train = kHead +
                            "[fixed]\nworkload = \"train\"\nbackend = \"cuda\"\nnetwork = \"mlp\"\n"
                            "dataset = \"synthetic\"\ncuda_graph = \"step\"\n";
  const std::pair<std::string, std::string> refused[] = {
      {"", "it needs optimizer_impl = \"native\""},
      {"optimizer_impl = \"native\"\noptimizer = \"adam\"\n", "optimizer \"adam\" changes its bias corrections"},
      {"optimizer_impl = \"native\"\nschedule = \"step\"\n", "the learning rate must be constant (schedule = \"step\""},
      {"optimizer_impl = \"native\"\nwarmup_steps = 5\n",
       "the learning rate must be constant (warmup_steps = 5 raises it over the first steps"},
  };
  for (const auto& [more, why] : refused) {
    e = plan_error_of(train + more);
    EXPECT_NE(
        e.find("'cuda_graph' \"step\" records the whole training step, the optimizer's included, and replays it: " +
               why),
        std::string::npos)
        << more << e;
    EXPECT_NE(e.find("c.toml:8:"), std::string::npos) << "the key's own line: " << e;
  }
  e = plan_error_of(
      kHead +
      "[fixed]\nworkload = \"distributed\"\nbackend = \"cuda\"\nnetwork = \"mlp\"\n"
      "dataset = \"synthetic\"\noptimizer_impl = \"native\"\nranks_per_node = 2\ncuda_graph = \"step\"\n");
  EXPECT_NE(e.find("level 3's schemes exchange gradients between the passes"), std::string::npos) << e;
  const auto on = plan_of(train + "optimizer_impl = \"native\"\n").points.at(0).canonical;
  EXPECT_NE(on.find("cuda_graph=step"), std::string::npos) << on;
  const std::string plain = kHead +
                            "[fixed]\nworkload = \"train\"\nbackend = \"cuda\"\nnetwork = \"mlp\"\n"
                            "dataset = \"synthetic\"\noptimizer_impl = \"native\"\n";
  EXPECT_EQ(plan_of(plain + "cuda_graph = \"off\"\n").points.at(0).canonical, plan_of(plain).points.at(0).canonical);
  const auto level1 = plan_of(kHead +
                              "[fixed]\nworkload = \"network\"\nbackend = \"cuda\"\nnetwork = \"lenet5\"\nbatch = 2\n"
                              "cuda_graph = \"step\"\n")
                          .points.at(0)
                          .canonical;
  EXPECT_EQ(level1.find("cuda_graph"), std::string::npos) << level1;
}

// math: cuda's for convolutions and networks, onednn's for networks (fp32 or bf16); gemm names its
// own key; "fp32", the default, keeps the id; an operator without convolutions or products drops it.
TEST(Plan, MathIsCudasForConvolutionsAndNetworksAndGemmNamesItsDtype) {
  std::string e =
      plan_error_of(kHead +
                    "[fixed]\nworkload = \"network\"\nbackend = \"reference\"\nnetwork = \"lenet5\"\nbatch = 2\n"
                    "math = \"tf32\"\n");
  EXPECT_NE(
      e.find(
          "'math' is only for backends \"cuda\", \"libtorch-cuda\", \"libtorch-native\" and \"onednn\" (this point's "
          "backend is \"reference\"; reference, blas and libtorch compute in strict float32)"),
      std::string::npos)
      << e;
  EXPECT_NE(e.find("c.toml:8:8: "), std::string::npos) << "the refused key's own line: " << e;
  e = plan_error_of(
      kHead +
      "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nshape = \"resnet50/res2_3x3\"\nn = 2\nmath = \"bf16\"\n");
  EXPECT_NE(e.find("c.toml:8:8"), std::string::npos) << e;
  EXPECT_NE(e.find("'math' \"bf16\" is for networks (levels 1-3"), std::string::npos) << e;
  e = plan_error_of(
      kHead +
      "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nshape = \"resnet50/res2_3x3\"\nn = 2\nmath = \"fp16\"\n");
  EXPECT_NE(e.find("key 'math' is \"fp16\"; did you mean 'fp32'? (valid: fp32, tf32, bf16)"), std::string::npos) << e;
  // onednn (where this build has it: a build without refuses the backend first): fp32 or bf16, for
  // networks; a level-0 convolution on it computes in float32.
  if (const BackendInfo* onednn = find_backend("onednn"); onednn && onednn->built) {
    const std::string onednn_net =
        kHead + "[fixed]\nworkload = \"network\"\nbackend = \"onednn\"\nnetwork = \"lenet5\"\nbatch = 2\n";
    e = plan_error_of(onednn_net + "math = \"tf32\"\n");
    EXPECT_NE(e.find("c.toml:8:8"), std::string::npos) << e;
    EXPECT_NE(e.find("'math' \"tf32\" is not one backend \"onednn\" takes (valid: fp32, bf16; tf32 is the "
                     "GPUs' tensor-core format; oneDNN computes in fp32 or bf16)"),
              std::string::npos)
        << e;
    e = plan_error_of(kHead +
                      "[fixed]\nworkload = \"conv2d\"\nbackend = \"onednn\"\nshape = \"resnet50/res2_3x3\"\nn = 2\n"
                      "math = \"bf16\"\n");
    EXPECT_NE(e.find("'math' \"bf16\" is for networks (levels 1-3"), std::string::npos) << e;
    const std::string plain = plan_of(onednn_net).points.at(0).canonical;
    EXPECT_EQ(plan_of(onednn_net + "math = \"fp32\"\n").points.at(0).canonical, plain) << "fp32 is the default";
    const std::string bf16 = plan_of(onednn_net + "math = \"bf16\"\n").points.at(0).canonical;
    EXPECT_NE(bf16.find("math=bf16"), std::string::npos) << bf16;
  }
  const BackendInfo* cuda = find_backend("cuda");
  if (!cuda || !cuda->built) GTEST_SKIP() << "the rest plans cuda points, which this build lacks";
  e = plan_error_of(kHead + "[fixed]\nworkload = \"gemm\"\nbackend = \"cuda\"\nn = 64\nmath = \"tf32\"\n");
  EXPECT_NE(e.find("'math' is for conv2d and networks; gemm's element type is its own key: dtype = \"tf32\""),
            std::string::npos)
      << e;
  auto ids = [](const std::string& fixed) {
    std::vector<std::string> out;
    for (const auto& pt :
         plan_of(kHead + "[fixed]\nbackend = \"cuda\"\n" + fixed + "[axes]\nmath = [\"fp32\", \"tf32\"]\n").points)
      out.push_back(pt.canonical);
    return out;
  };
  const std::string conv = "workload = \"conv2d\"\nshape = \"resnet50/res2_3x3\"\nn = 2\n";
  const auto level0 = ids(conv);
  ASSERT_EQ(level0.size(), 2u);
  EXPECT_EQ(level0[0], plan_of(kHead + "[fixed]\nbackend = \"cuda\"\n" + conv).points.at(0).canonical);
  EXPECT_NE(level0[1].find("math=tf32"), std::string::npos) << level0[1];
  const auto level1 = ids("workload = \"network\"\nnetwork = \"lenet5\"\nbatch = 2\npass = \"training\"\n");
  ASSERT_EQ(level1.size(), 2u);
  EXPECT_EQ(level1[0].find("math"), std::string::npos) << level1[0];
  EXPECT_NE(level1[1].find("math=tf32"), std::string::npos) << level1[1];
  const auto pool = ids("workload = \"pool2d\"\nn = 2\nc = 4\nh = 8\n");
  ASSERT_EQ(pool.size(), 1u) << "one problem, planned once";
  EXPECT_EQ(pool[0].find("math"), std::string::npos) << pool[0];
  // bf16, a network's mixed precision: d500's own kernels, on either cuDNN API.
  const std::string net =
      kHead + "[fixed]\nbackend = \"cuda\"\nworkload = \"network\"\nnetwork = \"lenet5\"\nbatch = 2\nmath = \"bf16\"\n";
  e = plan_error_of(net);
  if (!e.empty()) {
    EXPECT_NE(e.find("'math' \"bf16\" on cuda needs d500's own kernels"), std::string::npos) << e;
    return;
  }
  EXPECT_NE(plan_of(net).points.at(0).canonical.find("math=bf16"), std::string::npos);
  const std::string graph = plan_of(net + "cudnn_api = \"graph\"\n").points.at(0).canonical;
  EXPECT_NE(graph.find("math=bf16"), std::string::npos) << graph;
  EXPECT_NE(graph.find("cudnn_api=graph"), std::string::npos) << graph;
}

// conv2d's dtype: a reduced-precision backend's alone, refused at the key's own line elsewhere;
// "fp32" keeps the id; not with math = "tf32" (float32's rounding) or cuDNN's graph API.
TEST(Plan, AConvolutionsDtypeNeedsAReducedPrecisionBackendAndRunsOnEitherCudnnApi) {
  const std::string conv = "workload = \"conv2d\"\nshape = \"resnet50/res2_3x3\"\nn = 2\n";
  std::string e = plan_error_of(kHead + "[fixed]\nbackend = \"blas\"\n" + conv + "dtype = \"bf16\"\n");
  EXPECT_NE(e.find("c.toml:8:9: "), std::string::npos) << "the refused key's own line: " << e;
  EXPECT_NE(e.find("'dtype' \"bf16\" needs a backend that computes in reduced precision"), std::string::npos) << e;
  EXPECT_NE(plan_error_of(kHead + "[fixed]\nbackend = \"blas\"\n" + conv + "dtype = \"tf32\"\n")
                .find("(valid: fp32, bf16, fp16)"),
            std::string::npos);
  EXPECT_EQ(plan_of(kHead + "[fixed]\nbackend = \"blas\"\n" + conv + "dtype = \"fp32\"\n").points.at(0).canonical,
            plan_of(kHead + "[fixed]\nbackend = \"blas\"\n" + conv).points.at(0).canonical);
  const BackendInfo* cuda = find_backend("cuda");
  if (!cuda || !cuda->built || !cuda->supports("conv2d"))
    GTEST_SKIP() << "the rest plans cuDNN convolutions, which this build lacks";
  const std::string head = kHead + "[fixed]\nbackend = \"cuda\"\n" + conv;
  const Plan p = plan_of(head + "[axes]\ndtype = [\"bf16\", \"fp16\"]\n");
  ASSERT_EQ(p.points.size(), 2u);
  EXPECT_NE(p.points[0].canonical.find("dtype=bf16"), std::string::npos) << p.points[0].canonical;
  e = plan_error_of(head + "dtype = \"fp16\"\nmath = \"tf32\"\n");
  EXPECT_NE(e.find("'math' \"tf32\" rounds float32 data; with dtype = \"fp16\""), std::string::npos) << e;
  EXPECT_NE(e.find("c.toml:9:8: "), std::string::npos) << e;
  // 16-bit tensors through cuDNN's graph API too (PyTorch's path for them).
  const Plan g = plan_of(head + "cudnn_api = \"graph\"\n[axes]\ndtype = [\"bf16\", \"fp16\"]\n");
  ASSERT_EQ(g.points.size(), 2u);
  EXPECT_NE(g.points[1].canonical.find("cudnn_api=graph"), std::string::npos) << g.points[1].canonical;
  EXPECT_NE(g.points[1].canonical.find("dtype=fp16"), std::string::npos) << g.points[1].canonical;
}

TEST(Plan, ExcludeRulesMustMatchSomething) {
  std::string base = kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8, 16]\n";
  std::string e = plan_error_of(base + "[[exclude]]\nn = 32\n");
  EXPECT_NE(e.find("value 32 of 'n' is not one of its values (8, 16)"), std::string::npos) << e;
  e = plan_error_of(base + "[[exclude]]\nsize = 8\n");
  EXPECT_NE(e.find("not an axis"), std::string::npos) << e;
  // Zipped (m, n) pairs are (4, 8) and (8, 16): no point has n = 8 with m = 8.
  e = plan_error_of(base + "m = [4, 8]\n[[zip]]\naxes = [\"m\", \"n\"]\n[[exclude]]\nn = 8\nm = 8\n");
  EXPECT_NE(e.find("c.toml:10:1"), std::string::npos) << e;
  EXPECT_NE(e.find("matches no point"), std::string::npos) << e;
  e = plan_error_of(base + "[[exclude]]\nbackend = \"blas\"\n");
  EXPECT_NE(e.find("no points left"), std::string::npos) << e;
}

TEST(Plan, TemplateMustExist) {
  std::string e = plan_error_of(
      "[campaign]\nname = \"t\"\ntemplate = \"locl\"\n[axes]\nworkload = [\"gemm\"]\n"
      "backend = [\"blas\"]\nn = [8]\n");
  EXPECT_NE(e.find("c.toml:3:12"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'local'"), std::string::npos) << e;
}

TEST(Plan, JobsGroupPointsByShapeAndRespectPointsPerJob) {
  Plan p = plan_of(
      "[campaign]\nname = \"t\"\npoints_per_job = 2\n[axes]\nworkload = [\"gemm\"]\n"
      "backend = [\"blas\"]\nn = [8, 16, 32]\nranks_per_node = [1, 2]\n");
  ASSERT_EQ(p.points.size(), 6u);
  ASSERT_EQ(p.jobs.size(), 4u);  // 3 points of each shape, 2 per job
  std::size_t total = 0;
  for (const auto& j : p.jobs) {
    EXPECT_LE(j.points.size(), 2u);
    total += j.points.size();
    for (auto i : j.points) {
      EXPECT_EQ(std::get<std::int64_t>(PointResolver(p).params(p.points[i]).at("ranks_per_node")), j.ranks_per_node);
      EXPECT_EQ(p.points[i].ranks_per_node, j.ranks_per_node);
    }
  }
  EXPECT_EQ(total, 6u);
}

TEST(Plan, WritesAPlanDirectoryAndNeverOverwritesOne) {
  Plan p = plan_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8, 16]\n");
  fs::path dir = fs::temp_directory_path() / ("d500-plan-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  write_plan(p, dir.string(), "/bin/true");
  EXPECT_TRUE(fs::exists(dir / "plan.toml"));
  EXPECT_TRUE(fs::exists(dir / "points.csv"));
  EXPECT_TRUE(fs::exists(dir / "jobs" / "job-0000.sh"));
  EXPECT_TRUE(fs::is_directory(dir / "results"));
  EXPECT_EQ(read_file((dir / "campaign.toml").string()), p.campaign.text);

  JobSpec s = read_job_spec((dir / "jobs" / "job-0000.toml").string());
  ASSERT_EQ(s.points.size(), 2u);
  EXPECT_EQ(s.points[0].id, p.points[0].id);
  EXPECT_EQ(s.points[0].params, PointResolver(p).params(p.points[0]));
  EXPECT_EQ(s.repetitions, p.campaign.repetitions);

  std::string before = read_file((dir / "plan.toml").string());
  EXPECT_THROW(write_plan(p, dir.string(), "/bin/true"), Error);
  EXPECT_EQ(read_file((dir / "plan.toml").string()), before);
  fs::remove_all(dir);
}

// The specs `d500 submit --resume` and `d500 run` write list their points: the writer's escaping
// must round-trip every value through the parser the worker uses, hostile strings and extreme
// numbers included.
TEST(JobSpec, EveryValueRoundTripsThroughTheWriterAndTheWorkersParser) {
  JobSpec s;
  s.id = "job-\"0\"";
  s.campaign = "we\\ird \"name\"\n\twith é ✓";
  s.campaign_hash = "0123456789abcdef";
  s.repetitions = 7;
  s.warmups = 1;
  Params p;
  p["workload"] = std::string("gemm");
  p["backend"] = std::string("a\"b\\c");
  p["library"] = std::string("line\nbreak\ttab\rcr\x01\x1f\x7f end 'single' \"\"\"triple\"\"\" ✓é");
  p["key with space"] = std::string("x=y # not a comment");
  p["small"] = 4.9e-324;
  p["big"] = 1.7976931348623157e308;
  p["third"] = 0.1 + 0.2;
  p["integral_real"] = 3.0;
  p["negative_zero"] = -0.0;
  p["infinite"] = -std::numeric_limits<double>::infinity();
  p["min"] = std::numeric_limits<std::int64_t>::min();
  p["max"] = std::numeric_limits<std::int64_t>::max();
  p["flag"] = true;
  p["empty"] = std::string();
  s.points.push_back({"0000000000000001", canonical_point(p), 2, p});
  Params q = p;
  q["max"] = std::int64_t{0};
  s.points.push_back({"0000000000000002", canonical_point(q), 0, q});
  const fs::path f = fs::temp_directory_path() / ("d500-spec-rt-" + std::to_string(getpid()) + ".toml");
  write_file_atomic(f.string(), job_spec_toml(s));
  const JobSpec back = read_job_spec(f.string());
  fs::remove(f);
  EXPECT_EQ(back.id, s.id);
  EXPECT_EQ(back.campaign, s.campaign);
  EXPECT_EQ(back.repetitions, 7);
  ASSERT_EQ(back.points.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.points[i].canonical, s.points[i].canonical);
    EXPECT_EQ(back.points[i].level, s.points[i].level);
    ASSERT_EQ(back.points[i].params.size(), s.points[i].params.size());
    for (const auto& [k, v] : s.points[i].params) {
      ASSERT_TRUE(back.points[i].params.count(k)) << k;
      EXPECT_EQ(back.points[i].params.at(k), v) << k;
    }
  }
  EXPECT_TRUE(std::signbit(std::get<double>(back.points[0].params.at("negative_zero"))));
}

// What d500 plan writes names each job's rows of points.csv, and the worker derives each
// point's parameters from its canonical text there: they are exactly those derived afresh from
// each point's combination (zips, excluded and dropped axes, defaults, unset strings, named
// shapes, every level's workloads), read back from a written plan, for every job.
TEST(JobSpec, ThePlansRowsGiveBackEveryPointsParameters) {
  Plan p = plan_of(
      "[campaign]\nname = \"t\"\npoints_per_job = 3\n[axes]\n"
      "workload = [\"gemm\", \"allreduce\", \"conv2d\"]\nbackend = [\"blas\", \"mpi\"]\n"
      "n = [8, 16]\nm = [4, 8]\nbytes = [64, 128]\nshape = [\"\", \"resnet50/conv1\"]\nranks_per_node = [1, 2]\n"
      "[[zip]]\naxes = [\"m\", \"n\"]\n"
      "[[exclude]]\nworkload = [\"gemm\", \"conv2d\"]\nbackend = \"mpi\"\n"
      "[[exclude]]\nworkload = \"allreduce\"\nbackend = \"blas\"\n"
      "[[exclude]]\nworkload = \"conv2d\"\nshape = \"\"\n"
      "[[exclude]]\nworkload = \"gemm\"\nshape = \"resnet50/conv1\"\n");
  ASSERT_GT(p.jobs.size(), 3u);
  Plan levels = plan_of(
      "[campaign]\nname = \"l\"\npoints_per_job = 2\n[axes]\n"
      "workload = [\"network\", \"train\", \"distributed\"]\nbackend = [\"reference\"]\n"
      "network = [\"lenet5\", \"mlp\"]\nlr = [0.5, 1.0]\nbatch = [8]\nranks_per_node = [2]\n");
  ASSERT_GT(levels.points.size(), 6u);
  for (const Plan* plan : {&p, &levels}) {
    fs::path dir = fs::temp_directory_path() / ("d500-rows-" + std::to_string(getpid()));
    fs::remove_all(dir);
    write_plan(*plan, dir.string(), "/bin/true");
    PointResolver afresh(*plan);
    for (const auto& j : plan->jobs) {
      const JobSpec back = read_job_spec((dir / "jobs" / (j.id + ".toml")).string());
      ASSERT_EQ(back.points.size(), j.points.size()) << j.id;
      for (std::size_t k = 0; k < j.points.size(); ++k) {
        const Point& pt = plan->points[j.points[k]];
        EXPECT_EQ(back.points[k].id, pt.id);
        EXPECT_EQ(back.points[k].level, pt.level);
        EXPECT_EQ(back.points[k].params, afresh.params(pt)) << pt.canonical;
      }
      EXPECT_EQ(job_spec_toml(back), job_spec_toml(make_job_spec(*plan, j))) << j.id;
    }
    // The spec is a head and a range: the plan's files hold each point once (points.csv).
    const std::string spec = read_file((dir / "jobs" / "job-0000.toml").string());
    EXPECT_LT(spec.size(), 600u) << spec;
    EXPECT_EQ(spec.find("[[point]]"), std::string::npos) << spec;
    fs::remove_all(dir);
  }
}

// A spec's rows must be its job's points as planned: a row of another job, an edited canonical
// text or a range beyond the file is refused, naming the file.
TEST(JobSpec, RowsThatAreNotTheJobsPointsAreRefused) {
  Plan p = plan_of(kHead + "points_per_job = 1\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8, 16]\n");
  fs::path dir = fs::temp_directory_path() / ("d500-rows-bad-" + std::to_string(getpid()));
  fs::remove_all(dir);
  write_plan(p, dir.string(), "/bin/true");
  const std::string spec0 = (dir / "jobs" / "job-0000.toml").string(),
                    spec1 = (dir / "jobs" / "job-0001.toml").string();
  const std::string text1 = read_file(spec1);
  auto refusal = [&](const std::string& spec) {
    try {
      read_job_spec(spec);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // job-0001 pointed at job-0000's row.
  const std::string off0 = read_file(spec0).substr(read_file(spec0).find("offset = "));
  std::string t = text1;
  t.replace(t.find("offset = "), t.find('\n', t.find("offset = ")) - t.find("offset = "),
            off0.substr(0, off0.find('\n')));
  write_file_atomic(spec1, t);
  EXPECT_NE(refusal(spec1).find("is not a point of job job-0001"), std::string::npos) << refusal(spec1);
  t = text1;
  t.replace(t.find("count = 1"), 9, "count = 99");
  write_file_atomic(spec1, t);
  EXPECT_NE(refusal(spec1).find("points.csv: row 2 of the 99"), std::string::npos) << refusal(spec1);
  write_file_atomic(spec1, text1);
  std::string csv = read_file((dir / "points.csv").string());
  csv.replace(csv.find("n=16"), 4, "n=17");
  write_file_atomic((dir / "points.csv").string(), csv);
  EXPECT_NE(refusal(spec1).find("is not the id of its canonical text"), std::string::npos) << refusal(spec1);
  fs::remove_all(dir);
}

TEST(JobSpec, RejectsAnEditedSpec) {
  Plan p = plan_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n");
  std::string text = job_spec_toml(make_job_spec(p, p.jobs[0]));
  auto pos = text.find("n = 8");
  ASSERT_NE(pos, std::string::npos) << text;
  text.replace(pos, 5, "n = 9");
  fs::path f = fs::temp_directory_path() / ("d500-spec-" + std::to_string(getpid()) + ".toml");
  write_file_atomic(f.string(), text);
  EXPECT_THROW(read_job_spec(f.string()), Error);
  fs::remove(f);
}

TEST(PlanSlurm, ValuesThatWouldBreakAJobScriptAreRejectedWhereWritten) {
  std::string head =
      "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n";
  std::string e = plan_error_of(head + "[slurm]\ntime_limit = 5\npartition = \"debug; rm -rf /\"\n");
  EXPECT_NE(e.find("c.toml:10:13"), std::string::npos) << e;
  EXPECT_NE(e.find("key 'partition' in [slurm]"), std::string::npos) << e;
  EXPECT_NE(e.find("valid: 1-128 letters"), std::string::npos) << e;
  e = plan_error_of(head + "[slurm]\ntime_limit = 5\nmodules = [\"cuda/12\", \"x\\ny\"]\n");
  EXPECT_NE(e.find("key 'modules'"), std::string::npos) << e;
  e = plan_error_of(head + "[slurm]\npartition = \"debug\"\n");
  EXPECT_NE(e.find("set [slurm] time_limit"), std::string::npos) << e;
  e = plan_error_of(head + "[slurm]\ntime_limit = \"soon\"\n");
  EXPECT_NE(e.find("key 'time_limit' in [slurm] is \"soon\""), std::string::npos) << e;
  e = plan_error_of(head + "[slurm]\ntime_limit = 5\npartitoin = \"x\"\n");
  EXPECT_NE(e.find("did you mean 'partition'"), std::string::npos) << e;
  e = plan_error_of(head + "[slurm]\ntime_limit = 5\nretry_time_factor = 0.5\n");
  EXPECT_NE(e.find("a number >= 1"), std::string::npos) << e;
}

TEST(PlanSlurm, NodeHoursAreCountedAndABudgetIsEnforcedUnlessForced) {
  std::string text =
      "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\npoints_per_job = 1\n[slurm]\ntime_limit = \"01:30:00\"\n"
      "budget_node_hours = 4\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8, 16, 32]\n";
  std::string e = plan_error_of(text);
  EXPECT_NE(e.find("4.500 node-hours"), std::string::npos) << e;
  EXPECT_NE(e.find("over its budget_node_hours = 4.000"), std::string::npos) << e;
  Plan p = make_plan(parse_campaign_text(text, "c.toml"), builtin_workloads(), PlanOptions{true});
  ASSERT_EQ(p.jobs.size(), 3u);
  EXPECT_DOUBLE_EQ(job_node_hours(p, p.jobs[0]), 1.5);
  EXPECT_DOUBLE_EQ(total_node_hours(p), 4.5);
}

// What a campaign may spend: its jobs, the retries of each (max_retries, the k-th at the limit x
// retry_time_factor^k) and the analysis job once per submission round; a budget is checked
// against all of it (a 1.0 node-hour campaign with an analysis job used to pass a 1.2 budget).
TEST(PlanSlurm, TheBudgetCountsEveryRetryAndTheAnalysisJob) {
  const std::string head =
      "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\n"
      "n = [8, 16]\n[slurm]\ntime_limit = 30\n";
  std::string e =
      plan_error_of(head + "max_retries = 1\nretry_time_factor = 1.5\nanalysis_job = true\nbudget_node_hours = 1.2\n");
  EXPECT_NE(e.find("c.toml:8:1"), std::string::npos) << e;
  EXPECT_NE(e.find("may use 1.417 node-hours (1 job at the time limit 0.500 + retries 0.750 (max_retries = 1, "
                   "retry_time_factor = 1.50) + analysis job 0.167 (1 node, 00:05:00, once per submission round: 2))"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("over its budget_node_hours = 1.200"), std::string::npos) << e;
  Plan p =
      make_plan(parse_campaign_text(head + "max_retries = 2\nretry_time_factor = 2\nanalysis_job = true\n", "c.toml"),
                builtin_workloads());
  const NodeHours h = node_hours(p);
  EXPECT_DOUBLE_EQ(h.jobs, 0.5);
  EXPECT_DOUBLE_EQ(h.retries, (60 + 120) / 60.0) << "30 min x 2, then x 4";
  EXPECT_DOUBLE_EQ(h.analysis, 3 * 5 / 60.0);
  EXPECT_DOUBLE_EQ(total_node_hours(p), h.total());
  // The analysis job's limit grows with the plan, unless [slurm.analysis] sets it.
  Campaign c = parse_campaign_text(head, "c.toml");
  EXPECT_EQ(analysis_time_limit_min(c, 2, 1), 5);
  EXPECT_EQ(analysis_time_limit_min(c, 10000, 10000), 21);  // 2 x (60 + 50 + 500) s
  c = parse_campaign_text(head + "[slurm.analysis]\ntime_limit = \"00:45:00\"\naccount = \"a2\"\n", "c.toml");
  EXPECT_EQ(analysis_time_limit_min(c, 10000, 10000), 45);
  EXPECT_EQ(c.slurm.analysis.account, "a2");
  // Local plans spend no node-hours.
  Plan local = make_plan(
      parse_campaign_text("[campaign]\nname = \"l\"\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n",
                          "c.toml"),
      builtin_workloads());
  EXPECT_DOUBLE_EQ(node_hours(local).total(), 0);
}

// Training points checkpoint and end on SIGTERM: Slurm is asked to send it before the limit
// (120 s, or a quarter of a shorter limit; signal_before_limit overrides, 0 turns it off), and
// the site's keys reach the job script as single-quoted words.
TEST(PlanSlurm, SignalBeforeTheLimitAndSiteKeys) {
  const std::string head =
      "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\n"
      "n = [8]\n[slurm]\n";
  EXPECT_EQ(signal_before_limit_s(parse_campaign_text(head + "time_limit = 30\n", "c.toml"), true), 120);
  EXPECT_EQ(signal_before_limit_s(parse_campaign_text(head + "time_limit = 30\n", "c.toml"), false), 0);
  EXPECT_EQ(signal_before_limit_s(parse_campaign_text(head + "time_limit = 2\n", "c.toml"), true), 30);
  EXPECT_EQ(signal_before_limit_s(
                parse_campaign_text(head + "time_limit = 30\nsignal_before_limit = \"5min\"\n", "c.toml"), false),
            300);
  EXPECT_EQ(
      signal_before_limit_s(parse_campaign_text(head + "time_limit = 30\nsignal_before_limit = 0\n", "c.toml"), true),
      0);
  std::string e = plan_error_of(head + "time_limit = 1\nsignal_before_limit = \"90s\"\n");
  EXPECT_NE(e.find("c.toml:10:23"), std::string::npos) << e;
  EXPECT_NE(e.find("not less than the time limit (00:01:00)"), std::string::npos) << e;
  e = plan_error_of(head + "time_limit = 5\nsignal_before_limit = \"soon\"\n");
  EXPECT_NE(e.find("key 'signal_before_limit' in [slurm]"), std::string::npos) << e;
  e = plan_error_of(head + "time_limit = 5\nmodule_init = \"etc/modules.sh\"\n");
  EXPECT_NE(e.find("key 'module_init' in [slurm]: valid: the absolute path"), std::string::npos) << e;
  e = plan_error_of(head + "time_limit = 5\n[slurm.analysis]\naccont = \"x\"\n");
  EXPECT_NE(e.find("did you mean 'account'"), std::string::npos) << e;
  e = plan_error_of(head + "time_limit = 5\n[slurm.analysis]\nqos = \"a b\"\n");
  EXPECT_NE(e.find("key 'qos' in [slurm]"), std::string::npos) << e;
  e = plan_error_of(head + "time_limit = 5\nreservation = \"$(x)\"\n");
  EXPECT_NE(e.find("key 'reservation' in [slurm]"), std::string::npos) << e;
}

TEST(PlanSlurm, TimeLimitsInSlurmsForms) {
  EXPECT_EQ(parse_time_limit("30"), 30);
  EXPECT_EQ(parse_time_limit("01:30:00"), 90);
  EXPECT_EQ(parse_time_limit("01:30:01"), 91);  // rounded up: never shorter than asked
  EXPECT_EQ(parse_time_limit("10:30"), 11);     // MM:SS
  EXPECT_EQ(parse_time_limit("2-00"), 2880);
  EXPECT_EQ(parse_time_limit("1-02:03:00"), 1563);
  EXPECT_EQ(parse_time_limit("0"), -1);
  EXPECT_EQ(parse_time_limit("1h"), -1);
  EXPECT_EQ(slurm_time(90), "01:30:00");
  EXPECT_EQ(slurm_time(1563), "1-02:03:00");
}

TEST(Plan, NamedShapeSetsExpandInAxes) {
  Plan p = plan_of(kHead +
                   "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nn = 2\n"
                   "[axes]\nshape = [\"resnet50/*\"]\npass = [\"forward\", \"backward_data\"]\n");
  EXPECT_EQ(p.points.size(), 2u * 23u);
  std::set<std::string> shapes;
  PointResolver res(p);
  for (const auto& pt : p.points) shapes.insert(std::get<std::string>(res.params(pt).at("shape")));
  EXPECT_EQ(shapes.size(), 23u);
  EXPECT_TRUE(shapes.count("resnet50/conv1"));
  EXPECT_EQ(std::get<std::int64_t>(res.params(p.points.front()).at("c")) > 0, true);

  Plan g = plan_of(kHead + "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\n[axes]\nshape = [\"deepbench/*\"]\n");
  EXPECT_GT(g.points.size(), 30u);

  std::string e = plan_error_of(kHead +
                                "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nn = 2\n"
                                "[axes]\nshape = [\"resnet5/*\"]\n");
  EXPECT_NE(e.find("c.toml:8:10"), std::string::npos) << e;
  EXPECT_NE(e.find("no value matches \"resnet5/*\" (sets: resnet50/*)"), std::string::npos) << e;
  e = plan_error_of(kHead + "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nn = 2\nshape = \"resnet50/*\"\n");
  EXPECT_NE(e.find("put it in [axes]"), std::string::npos) << e;
  // Without a set, a misspelt layer gets a suggestion.
  e = plan_error_of(
      kHead + "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nn = 2\nshape = \"resnet50/res4_3x3_strid2\"\n");
  EXPECT_NE(e.find("did you mean 'resnet50/res4_3x3_stride2'"), std::string::npos) << e;
}

TEST(Plan, CustomBackendNeedsALoadableLibraryForTheOperator) {
  std::string e = plan_error_of(kHead + "[fixed]\nworkload = \"relu\"\nbackend = \"custom\"\nn = 2\nc = 2\nh = 2\n");
  EXPECT_NE(e.find("needs 'library'"), std::string::npos) << e;
  e = plan_error_of(
      kHead + "[fixed]\nworkload = \"relu\"\nbackend = \"custom\"\nn = 2\nc = 2\nh = 2\nlibrary = \"/no/such.so\"\n");
  EXPECT_NE(e.find("cannot be loaded"), std::string::npos) << e;
  e = plan_error_of(kHead +
                    "[fixed]\nworkload = \"conv2d\"\nbackend = \"custom\"\nn = 2\nc = 2\nh = 4\nk = 2\nr = 3\n"
                    "library = \"" D500_CUSTOM_RELU "\"\n");
  EXPECT_NE(e.find("implements 'relu', not 'conv2d'"), std::string::npos) << e;
  Plan ok = plan_of(
      kHead + "[fixed]\nworkload = \"relu\"\nbackend = \"custom\"\nn = 2\nc = 2\nh = 2\nlibrary = \"" D500_CUSTOM_RELU
              "\"\n");
  ASSERT_EQ(ok.points.size(), 1u);
  EXPECT_NE(ok.points[0].canonical.find("library="), std::string::npos);
  e = plan_error_of(kHead +
                    "[fixed]\nworkload = \"relu\"\nbackend = \"reference\"\nn = 2\nc = 2\nh = 2\nlibrary = \"x.so\"\n");
  EXPECT_NE(e.find("only for backend \"custom\""), std::string::npos) << e;
}

namespace {
Plan plan_with(const std::string& text, PlanOptions opt) {
  return make_plan(parse_campaign_text(text, "c.toml"), builtin_workloads(), opt);
}
std::string error_with(const std::string& text, PlanOptions opt) {
  try {
    plan_with(text, opt);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
constexpr std::int64_t kGiB = std::int64_t{1} << 30;
}  // namespace

TEST(PlanResources, TheMemoryEstimateCountsTensorsStagingValidationAndWorkspace) {
  // gemm m=100 n=50 k=20: A 2000 and B 1000 elements in, C 5000 out; floats, the inputs' double
  // staging, and the double reference on 16 of C's rows (A 16x20, all of B, C 16x50).
  Plan p = plan_of(kHead + "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\nm = 100\nn = 50\nk = 20\n");
  const std::int64_t want = 4 * (3000 + 5000) + 8 * 3000 + 8 * (16 * 20 + 1000 + 16 * 50);
  EXPECT_EQ(p.points.at(0).memory_bytes, want);
  // oneDNN's convolution counts its reordered copies: more than the same point on the reference.
  const std::string conv = "[fixed]\nworkload = \"conv2d\"\nn = 4\nc = 8\nh = 16\nk = 8\nr = 3\n";
  const std::int64_t ref = plan_of(kHead + conv + "backend = \"reference\"\n").points.at(0).memory_bytes;
  const std::int64_t blas = plan_of(kHead + conv + "backend = \"blas\"\n").points.at(0).memory_bytes;
  EXPECT_EQ(blas - ref, 4 * 8 * 3 * 3 * 14 * 14);  // blas adds its im2col buffer of one image
  // An allreduce holds a send and a receive buffer.
  Plan a = plan_of(kHead + "[fixed]\nworkload = \"allreduce\"\nbackend = \"mpi\"\nbytes = 4096\n");
  EXPECT_EQ(a.points.at(0).memory_bytes, 8192);
}

TEST(PlanResources, APointThatCannotFitANodeIsRefusedNamingTheKeyUnlessForced) {
  PlanOptions opt;
  opt.host_memory_bytes = 24 * kGiB;
  // 48 GiB of GEMM matrices per rank on a 24 GiB machine.
  const std::string gemm = kHead + "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\n[axes]\nn = [1024, 65536]\n";
  std::string e = error_with(gemm, opt);
  EXPECT_NE(e.find("c.toml:7:12: point gemm:blas n=65536"), std::string::npos) << e;
  EXPECT_NE(e.find("more than this machine's memory (24.0 GiB, MemTotal); key 'n' = 65536 makes it so"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("plan with --force"), std::string::npos) << e;
  // A convolution too big for its batch, and relu sizes whose element count overflows 64 bits.
  e = error_with(
      kHead +
          "[fixed]\nworkload = \"conv2d\"\nbackend = \"reference\"\nn = 100000\nc = 4096\nh = 4096\nk = 4096\nr = 1\n",
      opt);
  EXPECT_NE(e.find("needs about"), std::string::npos) << e;
  e = error_with(
      kHead + "[fixed]\nworkload = \"relu\"\nbackend = \"reference\"\nn = 1000000\nc = 1000000\nh = 1000000\n", opt);
  EXPECT_NE(e.find("needs about"), std::string::npos) << e;
  EXPECT_NE(e.find("key 'c' = 1000000 makes it so"), std::string::npos) << e;
  // --force plans it, says so, and the summary's largest point is that one.
  opt.force = true;
  Plan forced = plan_with(gemm, opt);
  ASSERT_EQ(forced.warnings.size(), 1u);
  EXPECT_NE(forced.warnings[0].find("(planned anyway: --force)"), std::string::npos);
  ASSERT_GE(forced.largest_memory_point, 0);
  EXPECT_EQ(
      std::get<std::int64_t>(
          PointResolver(forced).params(forced.points[static_cast<std::size_t>(forced.largest_memory_point)]).at("n")),
      65536);
  // Ranks on one node share its memory.
  opt.force = false;
  opt.host_memory_bytes = 1 * kGiB;
  e = error_with(kHead + "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\nn = 4096\nranks_per_node = 8\n", opt);
  EXPECT_NE(e.find("for its 8 ranks per node"), std::string::npos) << e;
}

TEST(PlanResources, SlurmPlansCheckMemPerNodeWhenGivenAndSayWhenItIsUnknown) {
  const std::string head = "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\n[slurm]\ntime_limit = 10\n";
  const std::string point = "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\nn = 16384\n";
  Plan unknown = plan_of(head + point);
  EXPECT_EQ(unknown.node_memory_bytes, 0);  // not this machine's: a cluster node's is not known
  std::string e = plan_error_of(head + "mem_per_node = \"2G\"\n" + point);
  EXPECT_NE(e.find("more than [slurm] mem_per_node (2.00 GiB, c.toml:6:16)"), std::string::npos) << e;
  EXPECT_NE(plan_error_of(head + "mem_per_node = \"lots\"\n" + point)
                .find("c.toml:6:16: key 'mem_per_node' in [slurm] is \"lots\""),
            std::string::npos);
  EXPECT_EQ(parse_memory_size("64G"), 64 * kGiB);
  EXPECT_EQ(parse_memory_size("512000"), std::int64_t{512000} << 20);  // Slurm's default unit: MiB
  EXPECT_EQ(parse_memory_size("1T"), 1024 * kGiB);
  EXPECT_EQ(parse_memory_size("-1G"), -1);
  EXPECT_EQ(parse_memory_size("99999999999999T"), -1);
}

TEST(PlanResources, ThreadsBeyondTheCpusAreWarnedOnceAtPlanTime) {
  PlanOptions opt;
  opt.host_cpus = 2;
  Plan p =
      plan_with(kHead + "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\nthreads = 1024\n[axes]\nn = [8, 16]\n", opt);
  ASSERT_EQ(p.warnings.size(), 1u) << "one warning per shape, not per point";
  EXPECT_NE(p.warnings[0].find("threads oversubscribed: 1 rank(s) x 1024 thread(s) = 1024 on this machine's 2 CPUs"),
            std::string::npos)
      << p.warnings[0];
  EXPECT_NE(p.warnings[0].find("(e.g. point gemm:blas n=8)"), std::string::npos)
      << "named by the keys the campaign sweeps, not by its every default: " << p.warnings[0];
  Plan fits = plan_with(kHead + "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\nthreads = 2\nn = 8\n", opt);
  EXPECT_TRUE(fits.warnings.empty());
  Plan slurm = plan_of(
      "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\n[slurm]\ntime_limit = 10\ncpus_per_task = 4\n"
      "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\nthreads = 8\nn = 8\n");
  ASSERT_EQ(slurm.warnings.size(), 1u);
  EXPECT_NE(slurm.warnings[0].find("8 thread(s) per rank, but [slurm] cpus_per_task = 4"), std::string::npos);
}

TEST(PlanResources, NamesThatAreDirectoriesAreRefusedAndARefusalLeavesNothing) {
  for (const char* name : {".", "..", "..."}) {
    std::string e = plan_error_of("[campaign]\nname = \"" + std::string(name) + "\"\n[fixed]\nworkload = \"gemm\"\n");
    EXPECT_NE(e.find("c.toml:2:8: key 'name' in [campaign] is \"" + std::string(name) + "\""), std::string::npos) << e;
    EXPECT_NE(e.find("not only dots"), std::string::npos) << e;
  }
  // A plan that fails while it is written removes what it created, the parent of the run too.
  const fs::path base = fs::temp_directory_path() / ("d500-refusal-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base);
  Plan p = plan_of(kHead + "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\nn = 8\n");
  p.tmpl.text = "{{no_such_variable}}\n";  // rendering the job script fails
  EXPECT_THROW(write_plan(p, (base / "runs" / "t").string(), "/bin/true"), Error);
  EXPECT_FALSE(fs::exists(base / "runs"));
  EXPECT_TRUE(fs::is_empty(base));
  fs::remove_all(base);
}

// A point on a GPU backend in a Slurm job that asks for no GPU, or for fewer than its ranks per
// node, is warned of once per backend; enough GPUs, or a CPU backend, say nothing.
TEST(PlanResources, GpuPointsInSlurmJobsWithoutAGpuPerRankAreWarned) {
  const BackendInfo* cuda = find_backend("cuda");
  if (!cuda || !cuda->built)
    GTEST_SKIP() << "this build has no cuda backend: " << (cuda ? cuda->not_built_reason : "unknown");
  const std::string head = "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\n[slurm]\ntime_limit = 10\n";
  const std::string points =
      "[fixed]\nworkload = \"gemm\"\nranks_per_node = 2\n[axes]\nbackend = [\"cuda\", \"blas\"]\nn = [8, 16]\n";
  Plan none = plan_of(head + points);
  ASSERT_EQ(none.warnings.size(), 1u);
  EXPECT_NE(none.warnings[0].find("on backend cuda run on a GPU, but [slurm] asks for none: set gres = \"gpu:2\""),
            std::string::npos)
      << none.warnings[0];
  Plan shared = plan_of(head + "gres = \"gpu:1\"\n" + points);
  ASSERT_EQ(shared.warnings.size(), 1u);
  EXPECT_NE(shared.warnings[0].find("run 2 ranks per node on 1 GPU(s) (gres = \"gpu:1\"): ranks will share a GPU"),
            std::string::npos)
      << shared.warnings[0];
  EXPECT_TRUE(plan_of(head + "gres = \"gpu:a100:2\"\n" + points).warnings.empty());
  EXPECT_TRUE(plan_of(head + "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\nn = 8\n").warnings.empty());
}

// Issue 18: hostile paths and template names.
namespace {
const std::string kSlurmAll =
    "[campaign]\nname = \"s\"\ntemplate = \"TEMPLATE\"\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n"
    "[slurm]\ntime_limit = 5\npartition = \"p\"\naccount = \"a\"\nqos = \"q\"\nconstraint = \"gpu\"\ngres = \"gpu:1\"\n"
    "modules = [\"m/1\"]\nreservation = \"r\"\nsignal_before_limit = 60\n";

std::string with_template(std::string text, const std::string& name) {
  text.replace(text.find("TEMPLATE"), 8, name);
  return text;
}

fs::path scratch(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("d500-hostile-" + std::to_string(getpid()) + "-" + tag);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
}  // namespace

TEST(Hostile, ANewlineInAnyPathIsRefusedAndNothingIsWritten) {
  const fs::path base = scratch("newline");
  Plan p = plan_of(with_template(kSlurmAll, "slurm"));
  const std::string injected = "\n#SBATCH --wrap=touch /tmp/pwned\n";
  auto refused = [&](const Plan& plan, const fs::path& dir, const std::string& worker, const std::string& what,
                     const std::string& escaped = "\\n#SBATCH --wrap=touch /tmp/pwned\\n") {
    try {
      write_plan(plan, dir.string(), worker);
      ADD_FAILURE() << what << ": not refused";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(what), std::string::npos) << m;
      EXPECT_NE(m.find("contains a control character"), std::string::npos) << m;
      EXPECT_NE(m.find(escaped), std::string::npos) << "the path is shown escaped: " << m;
    }
  };
  refused(p, base / ("run" + injected), "/bin/true", "the run directory");
  refused(p, base / "run", "/opt/d500" + injected + "/d500-worker", "the worker's path");
  Plan q =
      make_plan(parse_campaign_text(with_template(kSlurmAll, "slurm"), (base / ("c" + injected + ".toml")).string()),
                builtin_workloads());
  refused(q, base / "run", "/bin/true", "the campaign file's path");
  Plan r = p;
  r.tmpl.path = "/tmp/t\r.sh.in";
  refused(r, base / "run", "/bin/true", "the template path", "/tmp/t\\r.sh.in");
  for (const auto& e : fs::directory_iterator(base)) ADD_FAILURE() << "left behind: " << e.path();
  fs::remove_all(base);
}

TEST(Hostile, EveryRenderedLineOfEveryTemplateIsItsTemplatesLine) {
  // Legal but shell-hostile: spaces, quotes, $(...), backticks and ; in the run directory.
  const fs::path base = scratch("lines");
  const fs::path dir = base / "run dir 'x' $(touch pwned) `id`; echo";
  for (const char* name : {"local", "slurm", "daint"}) {
    SCOPED_TRACE(name);
    Plan p =
        plan_of(std::string(name) == "local" ? kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n"
                                             : with_template(kSlurmAll, name));
    fs::remove_all(dir);
    write_plan(p, dir.string(), "/opt/my d500/d500-worker");
    const auto tmpl = lines_of(p.tmpl.text);
    const auto script = lines_of(read_file((dir / "jobs" / "job-0000.sh").string()));
    ASSERT_EQ(script.size(), tmpl.size()) << "every optional value is set: no line is dropped, none is added";
    for (std::size_t i = 0; i < tmpl.size(); ++i) {
      const std::string literal = tmpl[i].substr(0, tmpl[i].find("{{"));
      EXPECT_EQ(script[i].substr(0, literal.size()), literal) << "line " << i + 1 << ": " << script[i];
      if (tmpl[i].find("{{") == std::string::npos) {
        EXPECT_EQ(script[i], tmpl[i]) << "line " << i + 1;
      }
    }
    // And bash reads the script as the template's commands: it parses (-n) without running.
    const int rc = std::system(("bash -n " + shell_quote((dir / "jobs" / "job-0000.sh").string())).c_str());
    EXPECT_EQ(rc, 0);
  }
  EXPECT_FALSE(fs::exists("pwned"));
  fs::remove_all(base);
}

TEST(Hostile, ATemplateIsANameNeverAPath) {
  for (const char* bad : {"../../../tmp/evil", "/etc/passwd", "sub/local", "local.sh.in", "", "a b"}) {
    std::string e = plan_error_of("[campaign]\nname = \"t\"\ntemplate = \"" + std::string(bad) +
                                  "\"\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n");
    EXPECT_NE(e.find("c.toml:3:12"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("valid: a template's name"), std::string::npos) << bad << ": " << e;
  }
}

TEST(Hostile, TheUsersOwnTemplatesComeFromTheDirectoryTheCampaignNames) {
  const fs::path base = scratch("templates");
  fs::create_directories(base / "mine");
  write_file_atomic(
      (base / "mine" / "site.sh.in").string(),
      "#!/usr/bin/env bash\n# d500: launcher=local\nexec mpirun -np {{ranks}} {{worker}} {{spec}} {{output}}\n");
  const std::string campaign = (base / "c.toml").string();
  Plan p = make_plan(parse_campaign_text("[campaign]\nname = \"t\"\ntemplate = \"site\"\ntemplates_dir = \"mine\"\n"
                                         "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n",
                                         campaign),
                     builtin_workloads());
  EXPECT_EQ(p.tmpl.path, (base / "mine" / "site.sh.in").string());
  write_plan(p, (base / "run").string(), "/bin/true");
  auto t = toml::parse_file((base / "run" / "plan.toml").string());
  EXPECT_EQ(t["plan"]["template_path"].value_or(std::string()), p.tmpl.path);
  // A name it lacks falls back to d500's own templates; a missing directory is an error.
  Plan q = make_plan(parse_campaign_text("[campaign]\nname = \"t\"\ntemplates_dir = \"mine\"\n"
                                         "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n",
                                         campaign),
                     builtin_workloads());
  EXPECT_EQ(fs::path(q.tmpl.path).parent_path(), fs::path(templates_dir()));
  try {
    parse_campaign_text("[campaign]\nname = \"t\"\ntemplates_dir = \"absent\"\n", campaign);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":3:17"), std::string::npos) << e.what();
  }
  fs::remove_all(base);
}

TEST(Hostile, APlanFileReadsBackWhateverTheCampaignPathHolds) {
  const fs::path base = scratch("planfile");
  // TOML syntax in the campaign's path: quotes, brackets, a table header, '=' and '#'.
  const fs::path weird = base / "c\"] [plan] campaign = \"x\" # '''.toml";
  Plan p = make_plan(
      parse_campaign_text(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n", weird.string()),
      builtin_workloads());
  write_plan(p, (base / "run").string(), "/bin/true");
  auto t = toml::parse_file((base / "run" / "plan.toml").string());
  EXPECT_EQ(t["plan"]["campaign_path"].value_or(std::string()), weird.string());
  EXPECT_EQ(t["plan"]["campaign"].value_or(std::string()), "t");
  EXPECT_EQ(t["plan"]["launcher"].value_or(std::string()), "local");
  EXPECT_EQ(t["plan"]["points"].value_or(0), 1);
  fs::remove_all(base);
}

// Issue 18, item 7: a plan never runs the machine out of memory, and a huge job is refused
// with the split that fits.
namespace {
std::string sweep(int a, int b, int per_job) {
  std::string n, m;
  for (int i = 0; i < a; ++i) n += (i ? ", " : "") + std::to_string(8 + i);
  for (int i = 0; i < b; ++i) m += (i ? ", " : "") + std::to_string(8 + i);
  return "[campaign]\nname = \"big\"\npoints_per_job = " + std::to_string(per_job) +
         "\n[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\n[axes]\nn = [" + n + "]\nm = [" + m + "]\n";
}
}  // namespace

TEST(PlanSize, AJobOverTheLimitIsRefusedWithTheSplitThatFitsUnlessForced) {
  const Campaign c = parse_campaign_text(sweep(120, 100, 0), "c.toml");  // 12,000 points of one shape
  try {
    make_plan(c, builtin_workloads());
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("c.toml:3:18"), std::string::npos) << m;  // the points_per_job key
    EXPECT_NE(m.find("a job of 12000 points"), std::string::npos) << m;
    EXPECT_NE(m.find("set points_per_job = 6000 (2 jobs of that shape)"), std::string::npos) << m;
  }
  PlanOptions force;
  force.force = true;
  Plan p = make_plan(c, builtin_workloads(), force);
  ASSERT_EQ(p.jobs.size(), 1u);
  EXPECT_EQ(p.jobs[0].points.size(), 12000u);
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_NE(p.warnings.back().find("points_per_job = 6000 would split it"), std::string::npos) << p.warnings.back();
  EXPECT_EQ(make_plan(parse_campaign_text(sweep(120, 100, 6000), "c.toml"), builtin_workloads()).jobs.size(), 2u);
}

TEST(PlanSize, ACampaignThatCannotFitInMemoryIsRefusedBeforeItIsExpandedEvenForced) {
  PlanOptions small;
  small.force = true;
  small.available_memory_bytes = 16LL << 20;  // 10^4 combinations need ~10 MiB + specs: over half of 16 MiB
  try {
    make_plan(parse_campaign_text(sweep(100, 100, 1000), "c.toml"), builtin_workloads(), small);
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("c.toml:1:1"), std::string::npos) << m;
    EXPECT_NE(m.find("expands to 10000 combinations"), std::string::npos) << m;
    EXPECT_NE(m.find("16.0 MiB available"), std::string::npos) << m;
  }
  small.available_memory_bytes = 1LL << 30;
  EXPECT_EQ(make_plan(parse_campaign_text(sweep(100, 100, 1000), "c.toml"), builtin_workloads(), small).points.size(),
            10000u);
}

TEST(Plan, TooFewRepetitionsForAConfidenceIntervalAreWarnedAtPlanTime) {
  auto warned = [](int reps) {
    Plan p = plan_of("[campaign]\nname = \"t\"\nrepetitions = " + std::to_string(reps) +
                     "\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n");
    for (const auto& w : p.warnings)
      if (w.find("no distribution-free 95% confidence interval") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(warned(3));
  EXPECT_TRUE(warned(5));
  EXPECT_FALSE(warned(6));
}

// Packing by time, from the model alone (earlier runs are the integration tests'): each job's
// estimates fit its limit less the margin, in plan order; what cannot be estimated or cannot fit
// is refused where the campaign says so.
TEST(PlanPacking, PointsFillJobsUpToTheLimitLessTheMarginInPlanOrder) {
  // GEMM n^3 x 2 flops at 1 GFLOP/s, 10 + 2 repetitions, 1 s per point: n = 400 is
  // 1 + 12 x 0.128 = 2.536 s, n = 800 is 1 + 12 x 1.024 = 13.288 s.
  const std::string t2 = kHead +
                         "repetitions = 10\n[packing]\njob_time = 20\nmargin = 0.25\ngflops = 1\ngbps = 1000\n"
                         "point_overhead_s = 1\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"reference\"]\n"
                         "n = [400, 800]\nseed = [1, 2, 3]\n";
  Plan p = plan_of(t2);
  ASSERT_EQ(p.points.size(), 6u);
  EXPECT_DOUBLE_EQ(p.job_limit_s, 20);
  EXPECT_DOUBLE_EQ(p.job_capacity_s, 15);
  for (const auto& pt : p.points) {
    const double expect = pt.canonical.find("n=400") != std::string::npos ? 1 + 12 * 0.128 : 1 + 12 * 1.024;
    EXPECT_NEAR(pt.estimate_s, expect, 1e-4) << pt.canonical;
    EXPECT_EQ(pt.estimate_source, 3) << "model";
  }
  // Plan order (n slower than seed): 400,400,400 (7.6 s) then 800 x 3 (13.3 s each): next fit.
  ASSERT_EQ(p.jobs.size(), 4u);
  EXPECT_EQ(p.jobs[0].points.size(), 3u);
  double total = 0;
  std::size_t next = 0;
  for (const auto& j : p.jobs) {
    EXPECT_LE(j.estimate_s, p.job_capacity_s) << j.id;
    for (auto i : j.points) {
      EXPECT_EQ(i, next++) << "jobs keep plan order";
      total += p.points[i].estimate_s;
    }
  }
  EXPECT_NEAR(total, 3 * 2.536 + 3 * 13.288, 1e-3);
  EXPECT_NE(p.packing_text.find("6 model"), std::string::npos) << p.packing_text;
  // points_per_job still caps a job.
  p = plan_of(kHead + "points_per_job = 2\n" + t2.substr(kHead.size()));
  EXPECT_EQ(p.jobs.size(), 5u);  // 400 x 2, 400, 800, 800, 800
}

TEST(PlanPacking, WhatCannotBeEstimatedOrFitIsRefusedWhereTheCampaignSaysSo) {
  const std::string axes = "[axes]\nworkload = [\"gemm\"]\nbackend = [\"reference\"]\nn = [400, 800]\n";
  // Local plans need a job time; Slurm plans pack to their time limit and refuse one.
  std::string e = plan_error_of(kHead + "[packing]\nmargin = 0.1\n" + axes);
  EXPECT_NE(e.find("c.toml:3:1: [packing] with template 'local' needs job_time"), std::string::npos) << e;
  e = plan_error_of(
      "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\n[slurm]\ntime_limit = 30\n[packing]\njob_time = 60\n" + axes);
  EXPECT_NE(e.find("c.toml:7:12: key 'job_time' in [packing] applies to local plans"), std::string::npos) << e;
  Plan s = plan_of(
      "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\n[slurm]\ntime_limit = 30\n[packing]\nmargin = 0.5\n" + axes);
  EXPECT_DOUBLE_EQ(s.job_capacity_s, 900);
  // A point longer than a job's capacity: refused with its estimate, or its own job when forced.
  const std::string tight = kHead + "[packing]\njob_time = 10\nmargin = 0.2\ngflops = 1\n" + axes;
  e = plan_error_of(tight);
  EXPECT_NE(e.find("c.toml:3:1: point gemm:reference n=800"), std::string::npos) << e;
  EXPECT_NE(e.find("is estimated at 14.3 s (model), more than a job's 8.00 s"), std::string::npos) << e;
  EXPECT_NE(e.find("--force"), std::string::npos) << e;
  Plan forced = plan_with(tight, PlanOptions{true});
  ASSERT_EQ(forced.jobs.size(), 2u);
  EXPECT_EQ(forced.jobs[1].points.size(), 1u);
  ASSERT_FALSE(forced.warnings.empty());
  // Training is not modelled: it needs an earlier run or a default.
  const std::string train =
      kHead + "[packing]\njob_time = 3600\n[axes]\nworkload = [\"train\"]\nbackend = [\"reference\"]\n";
  e = plan_error_of(train);
  EXPECT_NE(e.find("has no estimate: no run in times_from measured it (a training point's time is not modelled)"),
            std::string::npos)
      << e;
  Plan d = plan_of(kHead + "[packing]\njob_time = 3600\ndefault_point_s = 600\n" + train.substr(train.find("[axes]")));
  EXPECT_EQ(d.points.front().estimate_s, 600);
  EXPECT_NE(d.packing_text.find("1 default"), std::string::npos) << d.packing_text;
  // A run directory that is not one.
  e = plan_error_of(kHead + "[packing]\njob_time = 60\ntimes_from = [\"/nonexistent-run\"]\n" + axes);
  EXPECT_NE(e.find("c.toml:5:15: key 'times_from' in [packing]: /nonexistent-run is not a run directory"),
            std::string::npos)
      << e;
}

// Issue 17: replicated launches. Each launch of a point is its own point (launch = 1..k), the
// launches never share a job, and the jobs come launch after launch (interleaved in time with the
// other jobs); a campaign without launches keeps its ids.
TEST(Plan, LaunchesAreSeparateJobsLaunchAfterLaunch) {
  const std::string body =
      "[axes]\nworkload = [\"gemm\"]\nbackend = [\"reference\", \"blas\"]\nn = [8, 16]\nranks_per_node = [1, 2]\n";
  const Plan one = plan_of(kHead + body);
  const Plan three = plan_of("[campaign]\nname = \"t\"\nlaunches = 3\n" + body);
  ASSERT_EQ(three.points.size(), 3 * one.points.size());
  EXPECT_EQ(one.points[0].canonical.find("launch"), std::string::npos) << one.points[0].canonical;
  std::set<std::string> ids;
  for (const auto& p : three.points) ids.insert(p.id);
  EXPECT_EQ(ids.size(), three.points.size());
  ASSERT_EQ(three.jobs.size(), 3 * one.jobs.size());
  int previous = 0;
  for (const auto& j : three.jobs) {
    std::set<int> launches;
    for (auto i : j.points) launches.insert(three.points[i].launch);
    ASSERT_EQ(launches.size(), 1u) << j.id << " mixes launches";
    EXPECT_GE(*launches.begin(), previous) << j.id;
    previous = *launches.begin();
    EXPECT_NE(three.points[j.points[0]].canonical.find("launch=" + std::to_string(previous)), std::string::npos);
  }
  EXPECT_EQ(previous, 3);
}

TEST(Plan, LaunchMistakesAreLocated) {
  const std::string body = "[axes]\nworkload = [\"gemm\"]\nbackend = [\"reference\"]\n";
  EXPECT_NE(plan_error_of("[campaign]\nname = \"t\"\nlaunches = 0\n" + body).find("c.toml:3"), std::string::npos)
      << plan_error_of("[campaign]\nname = \"t\"\nlaunches = 0\n" + body);
  const std::string e = plan_error_of("[campaign]\nname = \"t\"\nlaunches = 2\n" + body + "launch = [1, 2]\n");
  EXPECT_NE(e.find("c.toml:7"), std::string::npos) << e;
  EXPECT_NE(e.find("set launches instead"), std::string::npos) << e;
}

TEST(Plan, ThePlanIsTheSameWhateverTheThreadsThatExpandIt) {
  // 3 workloads x 2 backends x 20 sizes x 8 byte counts x 2 thread counts x 15 seeds = 28800
  // combinations (the last dimension, the workload's, has 3 values: no run starts at its first),
  // in runs of 2048 on several threads: excluded pairs, duplicates (gemm takes no `bytes`, the
  // collectives neither `n` nor `threads`), a warning said once, one per point too big for a
  // node (forced).
  std::string sizes, seeds;
  for (int i = 1; i <= 19; ++i) sizes += std::to_string(8 * i) + ", ";
  sizes += "65536";
  for (int i = 1; i <= 15; ++i) seeds += (i > 1 ? ", " : "") + std::to_string(i);
  const std::string text =
      kHead +
      "[axes]\nworkload = [\"gemm\", \"allreduce\", \"broadcast\"]\nbackend = [\"blas\", \"mpi\"]\n"
      "n = [" +
      sizes +
      "]\nbytes = [8, 16, 32, 64, 128, 256, 512, 1024]\nthreads = [1, 64]\n"
      "seed = [" +
      seeds +
      "]\n"
      "[[exclude]]\nworkload = \"gemm\"\nbackend = \"mpi\"\n"
      "[[exclude]]\nworkload = [\"allreduce\", \"broadcast\"]\nbackend = \"blas\"\n";
  PlanOptions opt;
  opt.host_memory_bytes = 24 * kGiB;
  opt.host_cpus = 2;
  opt.force = true;
  opt.threads = 1;
  const Plan one = plan_with(text, opt);
  ASSERT_EQ(one.points.size(), 20u * 2 * 15 + 2u * 8 * 15)
      << "gemm: sizes x threads x seeds; collectives: bytes x seeds";
  ASSERT_EQ(one.warnings.size(), 1u + 2u * 15)
      << "a threads warning per ranks x threads, a memory one per forced point";
  // Each point is what its combination resolves to afresh, the runs' seams included.
  PointResolver again(one);
  for (const Point& pt : one.points)
    ASSERT_EQ(params_of_canonical(pt.canonical, "t"), again.params(pt)) << pt.canonical;
  for (int threads : {3, 0}) {
    opt.threads = threads;
    const Plan p = plan_with(text, opt);
    ASSERT_EQ(p.points.size(), one.points.size()) << threads;
    for (std::size_t i = 0; i < p.points.size(); ++i) {
      const Point &a = p.points[i], &b = one.points[i];
      ASSERT_EQ(a.id, b.id) << threads << " threads, point " << i;
      EXPECT_EQ(a.canonical, b.canonical);
      EXPECT_EQ(a.combination, b.combination);
      EXPECT_EQ(a.memory_bytes, b.memory_bytes);
    }
    EXPECT_EQ(p.warnings, one.warnings) << threads;
    EXPECT_EQ(p.value_counts, one.value_counts) << threads;
    EXPECT_EQ(p.largest_memory_point, one.largest_memory_point) << threads;
    ASSERT_EQ(p.jobs.size(), one.jobs.size()) << threads;
    for (std::size_t j = 0; j < p.jobs.size(); ++j) EXPECT_EQ(p.jobs[j].points, one.jobs[j].points);
  }
  // The same first refusal: a point too big unless forced, and a value out of range late in the
  // product (every combination from there on fails).
  opt.force = false;
  const std::string late = kHead + "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\n[axes]\nm = [" + sizes +
                           ", 70000, 70001]\nseed = [" + seeds + "]\nn = [" + sizes + "]\n";
  for (const std::string& t : {text, late}) {
    opt.threads = 1;
    const std::string e1 = error_with(t, opt);
    opt.threads = 3;
    EXPECT_FALSE(e1.empty());
    EXPECT_EQ(error_with(t, opt), e1);
  }
  EXPECT_NE(error_with(late, opt).find("70000"), std::string::npos) << error_with(late, opt);
}

TEST(Plan, NetworkPointsPlanTheSameOnSeveralThreads) {
  // Level 1's checks and estimates load networks through a cache that the threads share.
  std::string seeds;
  for (int i = 1; i <= 30; ++i) seeds += (i > 1 ? ", " : "") + std::to_string(i);
  const std::string text =
      kHead +
      "[fixed]\nworkload = \"network\"\n[axes]\nnetwork = [\"lenet5\", \"mlp\", \"fashion-cnn\"]\n"
      "backend = [\"reference\", \"blas\"]\nbatch = [8, 16, 32, 64]\npass = [\"inference\", \"training\"]\n"
      "microbatch = [0, 4]\nseed = [" +
      seeds + "]\n";
  PlanOptions opt;
  opt.threads = 1;
  const Plan one = plan_with(text, opt);
  opt.threads = 4;
  const Plan four = plan_with(text, opt);
  ASSERT_EQ(one.points.size(), 3u * 2 * 4 * 2 * 2 * 30);
  ASSERT_EQ(four.points.size(), one.points.size());
  for (std::size_t i = 0; i < one.points.size(); ++i) {
    ASSERT_EQ(four.points[i].canonical, one.points[i].canonical) << i;
    EXPECT_EQ(four.points[i].memory_bytes, one.points[i].memory_bytes) << i;
    EXPECT_GT(one.points[i].memory_bytes, 0) << i;
  }
}
