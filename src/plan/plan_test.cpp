#include "plan/plan.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "common/error.hpp"
#include "common/text.hpp"
#include "plan/jobspec.hpp"
#include "campaign/campaign.hpp"

using namespace d500;
namespace fs = std::filesystem;

namespace {
const std::string kHead = "[campaign]\nname = \"t\"\n";

Plan plan_of(const std::string& text) { return make_plan(parse_campaign_text(text, "c.toml"), builtin_workloads()); }

std::string error_of(const std::string& text) {
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
  for (const auto& pt : p.points)
    EXPECT_EQ(std::get<std::int64_t>(pt.params.at("m")) * 2, std::get<std::int64_t>(pt.params.at("n")));
}

TEST(Plan, ParametersAWorkloadDoesNotTakeAreDroppedAndDeduplicated) {
  Plan p = plan_of(kHead +
                   "[axes]\nworkload = [\"gemm\", \"allreduce\"]\nbackend = [\"blas\", \"mpi\"]\n"
                   "n = [8, 16]\nbytes = [64, 128, 256]\nranks_per_node = [2]\n"
                   "[[exclude]]\nworkload = \"gemm\"\nbackend = \"mpi\"\n"
                   "[[exclude]]\nworkload = \"allreduce\"\nbackend = \"blas\"\n");
  int gemm = 0, allreduce = 0;
  for (const auto& pt : p.points) {
    if (pt.canonical.rfind("gemm:", 0) == 0) {
      ++gemm;
      EXPECT_FALSE(pt.params.count("bytes"));
    } else {
      ++allreduce;
      EXPECT_FALSE(pt.params.count("n"));
    }
  }
  EXPECT_EQ(gemm, 2);
  EXPECT_EQ(allreduce, 3);
}

TEST(Plan, UnknownNamesGetSuggestions) {
  std::string e = error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nnn = [8]\n");
  EXPECT_NE(e.find("c.toml:6:1"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown parameter 'nn'; did you mean 'n'"), std::string::npos) << e;
  e = error_of(kHead + "[axes]\nworkload = [\"gemmm\"]\nbackend = [\"blas\"]\nn = [8]\n");
  EXPECT_NE(e.find("c.toml:4:13"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'gemm'"), std::string::npos) << e;
  e = error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blsa\"]\nn = [8]\n");
  EXPECT_NE(e.find("did you mean 'blas'"), std::string::npos) << e;
}

TEST(Plan, MissingBackendIsAPlanTimeError) {
  std::string e = error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\", \"cuda\"]\nn = [8]\n");
  EXPECT_NE(e.find("c.toml:5:20"), std::string::npos) << e;
  EXPECT_NE(e.find("backend 'cuda' is not available in this build"), std::string::npos) << e;
}

TEST(Plan, ImpossibleCombinationSaysHowToExcludeIt) {
  std::string e = error_of(kHead + "[axes]\nworkload = [\"allreduce\"]\nbackend = [\"blas\"]\nbytes = [64]\n");
  EXPECT_NE(e.find("impossible combination"), std::string::npos) << e;
  EXPECT_NE(e.find("[[exclude]] workload = \"allreduce\", backend = \"blas\""), std::string::npos) << e;
}

TEST(Plan, ValuesAreRangeCheckedWhereTheyWereWritten) {
  std::string e = error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8, 0]\n");
  EXPECT_NE(e.find("c.toml:6:9"), std::string::npos) << e;
  EXPECT_NE(e.find("valid for gemm: 1 to 65536"), std::string::npos) << e;
  e = error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [\"big\"]\n");
  EXPECT_NE(e.find("expected integer"), std::string::npos) << e;
  e = error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\n");
  EXPECT_NE(e.find("'n' must be given (a positive size) unless 'shape' names a problem"), std::string::npos) << e;
  e = error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"reference\"]\nn = [8]\nthreads = [2]\n");
  EXPECT_NE(e.find("single-threaded"), std::string::npos) << e;
  e = error_of(kHead + "[axes]\nworkload = [\"allreduce\"]\nbackend = [\"mpi\"]\nbytes = [6]\n");
  EXPECT_NE(e.find("multiple of 4"), std::string::npos) << e;
  e = error_of(kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\nnodes = [2]\n");
  EXPECT_NE(e.find("nodes must be 1"), std::string::npos) << e;
}

TEST(Plan, ExcludeRulesMustMatchSomething) {
  std::string base = kHead + "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8, 16]\n";
  std::string e = error_of(base + "[[exclude]]\nn = 32\n");
  EXPECT_NE(e.find("value 32 of 'n' is not one of its values (8, 16)"), std::string::npos) << e;
  e = error_of(base + "[[exclude]]\nsize = 8\n");
  EXPECT_NE(e.find("not an axis"), std::string::npos) << e;
  // Zipped (m, n) pairs are (4, 8) and (8, 16): no point has n = 8 with m = 8.
  e = error_of(base + "m = [4, 8]\n[[zip]]\naxes = [\"m\", \"n\"]\n[[exclude]]\nn = 8\nm = 8\n");
  EXPECT_NE(e.find("c.toml:10:1"), std::string::npos) << e;
  EXPECT_NE(e.find("matches no point"), std::string::npos) << e;
  e = error_of(base + "[[exclude]]\nbackend = \"blas\"\n");
  EXPECT_NE(e.find("no points left"), std::string::npos) << e;
}

TEST(Plan, TemplateMustExist) {
  std::string e = error_of("[campaign]\nname = \"t\"\ntemplate = \"locl\"\n[axes]\nworkload = [\"gemm\"]\n"
                           "backend = [\"blas\"]\nn = [8]\n");
  EXPECT_NE(e.find("c.toml:3:12"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'local'"), std::string::npos) << e;
}

TEST(Plan, JobsGroupPointsByShapeAndRespectPointsPerJob) {
  Plan p = plan_of("[campaign]\nname = \"t\"\npoints_per_job = 2\n[axes]\nworkload = [\"gemm\"]\n"
                   "backend = [\"blas\"]\nn = [8, 16, 32]\nranks_per_node = [1, 2]\n");
  ASSERT_EQ(p.points.size(), 6u);
  ASSERT_EQ(p.jobs.size(), 4u);  // 3 points of each shape, 2 per job
  std::size_t total = 0;
  for (const auto& j : p.jobs) {
    EXPECT_LE(j.points.size(), 2u);
    total += j.points.size();
    for (auto i : j.points)
      EXPECT_EQ(std::get<std::int64_t>(p.points[i].params.at("ranks_per_node")), j.ranks_per_node);
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
  EXPECT_EQ(s.points[0].params, p.points[0].params);
  EXPECT_EQ(s.repetitions, p.campaign.repetitions);

  std::string before = read_file((dir / "plan.toml").string());
  EXPECT_THROW(write_plan(p, dir.string(), "/bin/true"), Error);
  EXPECT_EQ(read_file((dir / "plan.toml").string()), before);
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
  std::string head = "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n";
  std::string e = error_of(head + "[slurm]\ntime_limit = 5\npartition = \"debug; rm -rf /\"\n");
  EXPECT_NE(e.find("c.toml:10:13"), std::string::npos) << e;
  EXPECT_NE(e.find("key 'partition' in [slurm]"), std::string::npos) << e;
  EXPECT_NE(e.find("valid: 1-128 letters"), std::string::npos) << e;
  e = error_of(head + "[slurm]\ntime_limit = 5\nmodules = [\"cuda/12\", \"x\\ny\"]\n");
  EXPECT_NE(e.find("key 'modules'"), std::string::npos) << e;
  e = error_of(head + "[slurm]\npartition = \"debug\"\n");
  EXPECT_NE(e.find("set [slurm] time_limit"), std::string::npos) << e;
  e = error_of(head + "[slurm]\ntime_limit = \"soon\"\n");
  EXPECT_NE(e.find("key 'time_limit' in [slurm] is \"soon\""), std::string::npos) << e;
  e = error_of(head + "[slurm]\ntime_limit = 5\npartitoin = \"x\"\n");
  EXPECT_NE(e.find("did you mean 'partition'"), std::string::npos) << e;
  e = error_of(head + "[slurm]\ntime_limit = 5\nretry_time_factor = 0.5\n");
  EXPECT_NE(e.find("a number >= 1"), std::string::npos) << e;
}

TEST(PlanSlurm, NodeHoursAreCountedAndABudgetIsEnforcedUnlessForced) {
  std::string text = "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\npoints_per_job = 1\n[slurm]\ntime_limit = \"01:30:00\"\n"
                     "budget_node_hours = 4\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8, 16, 32]\n";
  std::string e = error_of(text);
  EXPECT_NE(e.find("4.500 node-hours"), std::string::npos) << e;
  EXPECT_NE(e.find("over its budget_node_hours = 4.000"), std::string::npos) << e;
  Plan p = make_plan(parse_campaign_text(text, "c.toml"), builtin_workloads(), PlanOptions{true});
  ASSERT_EQ(p.jobs.size(), 3u);
  EXPECT_DOUBLE_EQ(job_node_hours(p, p.jobs[0]), 1.5);
  EXPECT_DOUBLE_EQ(total_node_hours(p), 4.5);
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
  Plan p = plan_of(kHead + "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nn = 2\n"
                           "[axes]\nshape = [\"resnet50/*\"]\npass = [\"forward\", \"backward_data\"]\n");
  EXPECT_EQ(p.points.size(), 2u * 23u);
  std::set<std::string> shapes;
  for (const auto& pt : p.points) shapes.insert(std::get<std::string>(pt.params.at("shape")));
  EXPECT_EQ(shapes.size(), 23u);
  EXPECT_TRUE(shapes.count("resnet50/conv1"));
  EXPECT_EQ(std::get<std::int64_t>(p.points.front().params.at("c")) > 0, true);

  Plan g = plan_of(kHead + "[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\n[axes]\nshape = [\"deepbench/*\"]\n");
  EXPECT_GT(g.points.size(), 30u);

  std::string e = error_of(kHead + "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nn = 2\n"
                                   "[axes]\nshape = [\"resnet5/*\"]\n");
  EXPECT_NE(e.find("c.toml:8:10"), std::string::npos) << e;
  EXPECT_NE(e.find("no value matches \"resnet5/*\" (sets: resnet50/*)"), std::string::npos) << e;
  e = error_of(kHead + "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nn = 2\nshape = \"resnet50/*\"\n");
  EXPECT_NE(e.find("put it in [axes]"), std::string::npos) << e;
  // Without a set, a misspelt layer gets a suggestion.
  e = error_of(kHead + "[fixed]\nworkload = \"conv2d\"\nbackend = \"blas\"\nn = 2\nshape = \"resnet50/res4_3x3_strid2\"\n");
  EXPECT_NE(e.find("did you mean 'resnet50/res4_3x3_stride2'"), std::string::npos) << e;
}

TEST(Plan, CustomBackendNeedsALoadableLibraryForTheOperator) {
  std::string e = error_of(kHead + "[fixed]\nworkload = \"relu\"\nbackend = \"custom\"\nn = 2\nc = 2\nh = 2\n");
  EXPECT_NE(e.find("needs 'library'"), std::string::npos) << e;
  e = error_of(kHead + "[fixed]\nworkload = \"relu\"\nbackend = \"custom\"\nn = 2\nc = 2\nh = 2\nlibrary = \"/no/such.so\"\n");
  EXPECT_NE(e.find("cannot be loaded"), std::string::npos) << e;
  e = error_of(kHead + "[fixed]\nworkload = \"conv2d\"\nbackend = \"custom\"\nn = 2\nc = 2\nh = 4\nk = 2\nr = 3\n"
                       "library = \"" D500_CUSTOM_RELU "\"\n");
  EXPECT_NE(e.find("implements 'relu', not 'conv2d'"), std::string::npos) << e;
  Plan ok = plan_of(kHead + "[fixed]\nworkload = \"relu\"\nbackend = \"custom\"\nn = 2\nc = 2\nh = 2\nlibrary = \"" D500_CUSTOM_RELU "\"\n");
  ASSERT_EQ(ok.points.size(), 1u);
  EXPECT_NE(ok.points[0].canonical.find("library="), std::string::npos);
  e = error_of(kHead + "[fixed]\nworkload = \"relu\"\nbackend = \"reference\"\nn = 2\nc = 2\nh = 2\nlibrary = \"x.so\"\n");
  EXPECT_NE(e.find("only for backend \"custom\""), std::string::npos) << e;
}
