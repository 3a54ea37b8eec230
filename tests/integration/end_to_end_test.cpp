// End to end, the real thing: `d500 plan`, `d500 run` (mpirun, 2 ranks), `d500 report`; then
// the HDF5 files are read back with the plain HDF5 C API -- not through d500's reader -- and
// checked against the report's CSV.
#include <signal.h>
#include <map>
#include <regex>
#include <set>

#include <atomic>
#include <chrono>
#include <thread>

#include "backends/registry.hpp"
#include "common/crash_note.hpp"
#include "helpers.hpp"
#include "launch/slurm.hpp"
#include "metrics/stopping.hpp"
#include "rundir/layout.hpp"
#include "rundir/lock.hpp"

using namespace d500test;

namespace {

class EndToEnd : public ScratchDirTest {};

// The tests that kill, signal or wait for something: each runs idle and with a CPU hog per core
// (issue 52: on a loaded machine, two runners of one job once ran side by side).
class Signals : public ScratchDirTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    hog_ = std::make_unique<CpuHog>(GetParam());
  }
  void TearDown() override {
    hog_.reset();
    ScratchDirTest::TearDown();
  }

 private:
  std::unique_ptr<CpuHog> hog_;
};

// The node's facts the Environment section shows: the CPU governor, the kernel's transparent
// huge pages and the NUMA nodes with memory (each its value, or where it could not be read).
void expect_machine_facts(const std::string& md) {
  EXPECT_NE(md.find("| machine.cpu_governor | "), std::string::npos);
  EXPECT_TRUE(
      std::regex_search(md, std::regex("\\| machine\\.transparent_hugepages \\| (always|madvise|never|unreadable)")))
      << md;
  EXPECT_TRUE(std::regex_search(md, std::regex("\\| machine\\.numa_nodes \\| ([1-9][0-9]*|unreadable)"))) << md;
}

const std::string kTwoRankCampaign =
    "[campaign]\nname = \"e2e\"\nrepetitions = 8\nwarmups = 2\n" + gemm_and_allreduce("64, 96", "4096", 2);

}  // namespace

TEST_F(EndToEnd, TwoRankCampaignFileAndReportAgree) {
  std::string campaign = write("e2e.toml", kTwoRankCampaign);
  fs::path run = dir_ / "run";
  Cmd plan = sh(d500_cmd("plan " + campaign + " -o " + run.string()));
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("3 points in 1 jobs"), std::string::npos) << plan.out;
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("point 3/3"), std::string::npos) << r.out;
  // Named relatively, as a person types it: the index's links must still resolve.
  Cmd rep = sh("cd " + dir_.string() + " && " + d500_cmd("report run"));
  ASSERT_EQ(rep.code, 0) << rep.out;
  for (const char* f : {"report.md", "report.html", "results.csv", "campaign.h5"})
    EXPECT_TRUE(fs::exists(run / f)) << f;
  EXPECT_FALSE(fs::exists(run / "campaign.h5.tmp"));
  {
    hid_t idx = H5Fopen((run / "campaign.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(idx, 0);
    hid_t job = H5Oopen(idx, "/jobs/job-0000.h5", H5P_DEFAULT);  // an external link into the results file
    EXPECT_GE(job, 0);
    if (job >= 0) {
      EXPECT_EQ(attr_string(job, "status"), "complete");
      H5Oclose(job);
    }
    H5Fclose(idx);
  }

  fs::path h5 = run / "results" / "job-0000.h5";
  hid_t file = H5Fopen(h5.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(attr_string(file, "schema"), "d500-results");
  EXPECT_EQ(attr_int(file, "schema_version"), 5);
  EXPECT_EQ(attr_string(file, "phase_names"),
            "op,data,forward,backward,update,communication,wait,evaluation,checkpoint,device");
  EXPECT_EQ(attr_string(file, "status"), "complete");
  EXPECT_EQ(attr_int(file, "ranks"), 2);
  {  // The campaign text is stored byte for byte.
    hid_t d = H5Dopen2(file, "/campaign_toml", H5P_DEFAULT);
    hid_t t = H5Dget_type(d);
    std::string text(H5Tget_size(t), '\0');
    H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data());
    EXPECT_EQ(text, kTwoRankCampaign);
    H5Tclose(t);
    H5Dclose(d);
  }
  {
    hid_t g = H5Gopen2(file, "/env", H5P_DEFAULT);
    EXPECT_GT(H5Aexists(g, "version.mpi"), 0);
    EXPECT_GT(H5Aexists(g, "version.blas"), 0);
    EXPECT_GT(H5Lexists(g, "hosts", H5P_DEFAULT), 0);
    H5Gclose(g);
  }

  const std::vector<std::string> points = point_ids(file);
  ASSERT_EQ(points.size(), 3u);

  auto csv = read_csv(run / "results.csv");
  for (const auto& id : points) {
    hid_t g = H5Gopen2(file, ("/points/" + id).c_str(), H5P_DEFAULT);
    EXPECT_EQ(attr_string(g, "status"), "complete") << id;
    EXPECT_EQ(attr_string(g, "validation_status"), "passed") << id;
    // The machine's state over the point, and the busy flag that follows from it.
    const double other_load = attr_double(g, "machine.other_load"), steal = attr_double(g, "machine.steal_share");
    EXPECT_TRUE(std::isfinite(other_load)) << id;  // /proc/loadavg is readable here
    EXPECT_GE(steal, 0.0);
    EXPECT_LE(steal, 1.0);
    EXPECT_GE(attr_int(g, "machine.involuntary_switches"), 0);
    EXPECT_EQ(attr_int(g, "machine.busy"), other_load >= 1 || steal >= 0.02 ? 1 : 0) << id;
    H5Gclose(g);
    std::vector<Row> rows = read_samples(file, id);
    ASSERT_EQ(rows.size(), 2u * (2 + 8)) << id;  // ranks x (warm-ups + repetitions)
    std::map<int, long long> cost;               // rep -> max over ranks
    std::map<int, int> per_rank;
    for (const auto& s : rows) {
      EXPECT_EQ(s.warmup, s.rep < 2 ? 1 : 0);
      EXPECT_LE(s.start_ns, s.end_ns);
      per_rank[s.rank]++;
      if (!s.warmup) cost[s.rep] = std::max(cost[s.rep], s.end_ns - s.start_ns);
    }
    EXPECT_EQ(per_rank[0], 10);
    EXPECT_EQ(per_rank[1], 10);
    std::vector<double> c;
    for (auto& [rep, v] : cost) c.push_back(static_cast<double>(v) * 1e-9);
    std::sort(c.begin(), c.end());
    ASSERT_EQ(c.size(), 8u);
    double median = 0.5 * (c[3] + c[4]);
    ASSERT_TRUE(csv.count(id)) << id;
    EXPECT_EQ(csv[id]["n"], "8");
    EXPECT_EQ(csv[id]["warmups_excluded"], "2");
    EXPECT_EQ(csv[id]["status"], "complete");
    EXPECT_EQ(csv[id]["oversubscribed"], "false");
    EXPECT_NEAR(std::stod(csv[id]["median_s"]), median, median * 1e-6) << id;
    // n = 8: the 95% interval is [x(1), x(8)].
    EXPECT_NEAR(std::stod(csv[id]["ci_lo_s"]), c[0], c[0] * 1e-6);
    EXPECT_NEAR(std::stod(csv[id]["ci_hi_s"]), c[7], c[7] * 1e-6);
    if (csv[id]["workload"] == "gemm") {
      double n = std::stod(csv[id]["param_n"]);
      EXPECT_NEAR(std::stod(csv[id]["rate_median"]), 2 * n * n * n / median / 1e9, 1e-3);
      // Per rank, said so; every rank multiplies its own matrices (weak), so the aggregate is twice.
      EXPECT_NEAR(std::stod(csv[id]["rate_aggregate"]), 2 * std::stod(csv[id]["rate_median"]),
                  1e-6 * std::stod(csv[id]["rate_median"]));
    }
  }
  H5Fclose(file);
  // A table per workload: what varies (gemm's n) a column, what its points share (allreduce's bytes) said once.
  const std::string shared = "Results: allreduce:\nShared by every allreduce point: backend=mpi bytes=4096";
  EXPECT_NE(rep.out.find(shared), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("Results: gemm:"), std::string::npos) << rep.out;
  // Rates per rank, with every rank's sum beside them in the files (the terminal's --wide).
  const std::string md_text = read_file_text(run / "report.md");
  EXPECT_NE(md_text.find("| GFLOP/s | rate CI | all ranks |"), std::string::npos) << md_text;
  EXPECT_NE(sh(d500_cmd("report --wide " + run.string())).out.find("all ranks"), std::string::npos);
  // GFLOP/s and GB/s never share an axis: per workload its rate against its swept parameter
  // (gemm: k = m = n), then its repetitions' distribution; level 0's GEMMs on a roofline; Markdown links
  // the same SVG files.
  const std::string html = read_file_text(run / "report.html");
  for (const char* part : {"GFLOP/s (median, 95% CI)", "GB/s (median, 95% CI)",
                           "class=\"xlabel\" x=", "middle\">k = m = n<", "gemm: repetitions of each point"})
    EXPECT_NE(html.find(part), std::string::npos) << part;
  EXPECT_EQ(html.find("row of the Results table"), std::string::npos) << "no plot by table row";
  std::size_t figures = 0;
  for (std::size_t at = html.find("<figure "); at != std::string::npos; at = html.find("<figure ", at + 1)) ++figures;
  EXPECT_EQ(figures, 5u);
  EXPECT_NE(html.find("<figure id=\"roofline\">"), std::string::npos);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(run / "figures")) files += e.path().extension() == ".svg";
  EXPECT_EQ(files, 5u);
  EXPECT_NE(md_text.find("](figures/rate-gemm-GFLOP-s.svg)"), std::string::npos) << md_text;
  // The environment the files were measured in: this machine's CPU as /proc/cpuinfo names it.
  std::string cpu;
  {
    std::ifstream info("/proc/cpuinfo");
    for (std::string line; cpu.empty() && std::getline(info, line);)
      if (line.rfind("model name", 0) == 0) cpu = line.substr(line.find(':') + 2);
  }
  const std::string md = read_file_text(run / "report.md");
  EXPECT_NE(md.find("## Environment"), std::string::npos);
  EXPECT_NE(md.find("| machine.cpu_model | " + cpu + " |"), std::string::npos) << md;
  expect_machine_facts(md);
  EXPECT_NE(md.find("| version.hdf5 | "), std::string::npos);
  EXPECT_NE(md.find("| files | 1 |"), std::string::npos);
  EXPECT_NE(md.find("% steal |"), std::string::npos) << md;  // the quality table's machine column
  const std::string json = read_file_text(run / "results.json");
  EXPECT_NE(json.find("\"environments\": [{\"files\": 1, \"hosts\": ["), std::string::npos);
  EXPECT_NE(json.find("\"level\": 0, \"workload\": \"gemm\", \"backend\": \"blas\""), std::string::npos)
      << json.substr(0, 3000);
}

// Every campaign shipped in campaigns/ plans on this build, so that a change which breaks one
// fails here. The only refusals allowed: a backend this build lacks (named as not available,
// and really not built) and a dataset file that exists on the machine the campaign is for only.
TEST_F(EndToEnd, EveryShippedCampaignPlansOrNamesWhatThisMachineLacks) {
  std::vector<fs::path> campaigns;
  for (const auto& e : fs::directory_iterator(fs::path(D500_TEST_DIR) / ".." / "campaigns"))
    if (e.path().extension() == ".toml") campaigns.push_back(e.path());
  // Two plans at a time: each mostly loads libraries (a backend's module, ~1 s with LibTorch)
  // and builds networks, one process each.
  std::vector<Cmd> plans(campaigns.size());
  std::atomic<std::size_t> next{0};
  auto planner = [&] {
    for (std::size_t i; (i = next++) < campaigns.size();)
      plans[i] = sh(d500_cmd("plan " + campaigns[i].string() + " -o " + (dir_ / campaigns[i].stem()).string()));
  };
  std::thread other(planner);
  planner();
  other.join();
  int planned = 0;
  for (std::size_t i = 0; i < campaigns.size(); ++i) {
    const fs::path& file = campaigns[i];
    SCOPED_TRACE(file.filename().string());
    const fs::path run = dir_ / file.stem();
    const Cmd& plan = plans[i];
    if (plan.code == 0) {
      EXPECT_TRUE(fs::exists(run / "points.csv")) << plan.out;
      ++planned;
      continue;
    }
    EXPECT_NE(plan.out.find(file.filename().string() + ":"), std::string::npos) << plan.out;  // file and line
    const auto at = plan.out.find("key 'backend': backend '");
    if (at != std::string::npos) {
      const auto from = at + 24;
      const std::string name = plan.out.substr(from, plan.out.find('\'', from) - from);
      const d500::BackendInfo* b = d500::find_backend(name);
      EXPECT_NE(plan.out.find("is not available in this build"), std::string::npos) << plan.out;
      EXPECT_TRUE(b && !b->built) << name << " is built, yet refused: " << plan.out;
    } else {
      EXPECT_NE(plan.out.find("training data file not found (dataset = \"/scratch/"), std::string::npos) << plan.out;
    }
  }
  EXPECT_GE(planned, 3) << "at least the CPU campaigns (quickstart, distributed, daint-scaling) plan everywhere";
}

TEST_F(EndToEnd, MoreRanksThanCoresRunsAndIsFlaggedAsOversubscribed) {
  const int ranks = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) + 2;
  std::string campaign = write("o.toml",
                               "[campaign]\nname = \"oversub\"\nrepetitions = 6\nwarmups = 1\n[axes]\n"
                               "workload = [\"allreduce\"]\nbackend = [\"mpi\"]\nbytes = [4096]\n"
                               "ranks_per_node = [1, " +
                                   std::to_string(ranks) + "]\n[[exclude]]\nranks_per_node = 1\n");
  fs::path run = dir_ / "run";
  ASSERT_EQ(sh(d500_cmd("plan " + campaign + " -o " + run.string())).code, 0);
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  auto csv = read_csv(run / "results.csv");
  ASSERT_EQ(csv.size(), 1u);
  EXPECT_EQ(csv.begin()->second["oversubscribed"], "true");
  EXPECT_EQ(csv.begin()->second["ranks"], std::to_string(ranks));
  EXPECT_NE(rep.out.find("(oversubscribed)"), std::string::npos) << rep.out;
}

TEST_F(EndToEnd, ThreadsBeyondTheCpusAreWarnedAtPlanTimeAndFlaggedPerPoint) {
  // One rank with more BLAS threads than this machine has CPUs, beside one that fits.
  const int threads = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) + 1;
  std::string plan;
  const fs::path run = planned(
      "[campaign]\nname = \"threads\"\nrepetitions = 5\nwarmups = 1\n[fixed]\n"
      "workload = \"gemm\"\nbackend = \"blas\"\nn = 64\n[axes]\nthreads = [1, " +
          std::to_string(threads) + "]\n",
      &plan);
  EXPECT_NE(plan.find("warning: threads oversubscribed: 1 rank(s) x " + std::to_string(threads) + " thread(s)"),
            std::string::npos)
      << plan;
  EXPECT_NE(plan.find("memory: the largest point needs about"), std::string::npos) << plan;
  ASSERT_EQ(sh(d500_cmd("run " + run.string())).code, 0);
  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  EXPECT_NE(rep.out.find("(threads oversubscribed)"), std::string::npos) << rep.out;
  auto csv = read_csv(run / "results.csv");
  ASSERT_EQ(csv.size(), 2u);
  for (auto& [id, row] : csv) {
    const bool over = row["param_threads"] == std::to_string(threads);
    EXPECT_EQ(row["threads_oversubscribed"], over ? "true" : "false") << row["canonical"];
    EXPECT_EQ(row["oversubscribed"], "false") << "one rank never oversubscribes by ranks";
    EXPECT_EQ(row["status"], "complete");
    // The planner's estimate beside the measured peak: gemm n=64 holds 3 float and 2 double
    // matrices and a 16-row reference: 4*3*4096 + 8*2*4096 + 8*(16*64*2 + 4096) bytes.
    EXPECT_EQ(row["memory_estimate_bytes"], std::to_string(4 * 3 * 4096 + 8 * 2 * 4096 + 8 * (16 * 64 * 2 + 4096)));
    EXPECT_GT(std::stoll(row["peak_rss_bytes"]), std::stoll(row["memory_estimate_bytes"]));
  }
  std::string md = read_file_text(run / "report.md");
  EXPECT_NE(md.find("threads oversubscribed"), std::string::npos);
  for (const auto& f : fs::directory_iterator(run / "results"))
    EXPECT_EQ(sh(d500_cmd("check " + f.path().string())).code, 0);
}

TEST_F(EndToEnd, APointThatCannotAllocateFailsAloneWithTheReason) {
  // Under an address-space limit, a 2.4 GB GEMM point (by the planner's estimate) cannot
  // allocate its data: it fails as backend-failed, and the small point after it still runs.
  const fs::path run = planned(
      "[campaign]\nname = \"mem\"\nrepetitions = 3\nwarmups = 1\n[fixed]\n"
      "workload = \"gemm\"\nbackend = \"blas\"\n[axes]\nn = [8192, 64]\n");
  // The limit: 0.5 GB above the smallest of 1.5, 2, 2.5, 3 GB under which d500 starts at all (a
  // build with CUDA mapped about 0.5 GB more of its libraries before they moved into modules), so the small
  // point has room and the large one, which needs 2.25 GiB more, has not. Below that, d500 may
  // not even end: OpenBLAS's threads retry a failing malloc forever, hence the probe's timeout.
  long long limit_kb = 0;
  for (long long kb : {1500000LL, 2000000LL, 2500000LL, 3000000LL})
    if (!limit_kb &&
        sh("ulimit -v " + std::to_string(kb) + " && timeout -s KILL 20 " + d500_cmd("--version")).code == 0)
      limit_kb = kb + 500000;
  ASSERT_GT(limit_kb, 0) << "d500 does not start under a 3 GB address-space limit";
  Cmd r = sh("ulimit -v " + std::to_string(limit_kb) + " && timeout -s KILL 300 " + d500_cmd("run " + run.string()));
  EXPECT_NE(r.out.find("backend-failed"), std::string::npos) << r.out;
  ASSERT_EQ(sh(d500_cmd("report " + run.string())).code, 0);
  auto csv = read_csv(run / "results.csv");
  ASSERT_EQ(csv.size(), 2u);
  for (auto& [id, row] : csv) {
    if (row["param_n"] == "8192") {
      EXPECT_EQ(row["status"], "backend-failed") << row["canonical"];
      EXPECT_NE(row["status_reason"].find("out of memory: this rank could not allocate the point's data (the planner's "
                                          "estimate: 2.25 GiB per rank)"),
                std::string::npos)
          << row["status_reason"];
      EXPECT_EQ(row["n"], "0");
    } else {
      EXPECT_EQ(row["status"], "complete") << row["canonical"];
    }
  }
}

TEST_F(EndToEnd, EveryCollectiveValidatesOnAnOddNumberOfRanks) {
  // 3 ranks: uneven splits would show in allgather offsets and reduce-scatter blocks.
  auto csv = reported(
      "[campaign]\nname = \"coll\"\nrepetitions = 6\nwarmups = 1\n[axes]\n"
      "workload = [\"allreduce\", \"allgather\", \"broadcast\", \"reduce_scatter\"]\n"
      "backend = [\"mpi\"]\nbytes = [12, 12288]\nranks_per_node = [3]\n");
  ASSERT_FALSE(HasFailure()) << "plan, run and report succeed";
  ASSERT_EQ(csv.size(), 8u);
  for (auto& [id, row] : csv) {
    EXPECT_EQ(row["validation_status"], "passed") << row["canonical"];
    EXPECT_EQ(row["status"], "complete") << row["canonical"];
    EXPECT_EQ(row["n"], "6") << row["canonical"];
    // Rates follow nccl-tests' sizes: allgather counts the gathered result (3 x bytes).
    const double bytes = std::stod(row["param_bytes"]) * (row["workload"] == "allgather" ? 3 : 1);
    EXPECT_NEAR(std::stod(row["rate_median"]), bytes / std::stod(row["median_s"]) / 1e9,
                1e-6 * std::stod(row["rate_median"]));
  }
  // nccl-tests' bus bandwidth on 3 ranks: the rate times 4/3 (allreduce), 2/3 (allgather,
  // reduce_scatter) or 1 (broadcast), in results.json and in the report's Collectives section.
  Cmd bus = sh(
      "/usr/bin/python3 -c \"import json; j = json.load(open('" + (dir_ / "run" / "results.json").string() +
      "')); f = {'allreduce': 4 / 3, 'allgather': 2 / 3, 'reduce_scatter': 2 / 3, 'broadcast': 1}; "
      "bad = [p['canonical'] for p in j['points'] if abs(p['bus_bandwidth'][0] / (p['rate'] * f[p['workload']]) - 1) > 1e-6 "
      "or not p['bus_bandwidth'][1] <= p['bus_bandwidth'][0] <= p['bus_bandwidth'][2]]; print(len(j['points']), bad)\"");
  EXPECT_EQ(bus.out, "8 []\n") << bus.out;
  EXPECT_NE(read_file_text(dir_ / "run" / "report.md").find("## Collectives"), std::string::npos);
  Cmd bad = sh(d500_cmd("plan --dry-run " + write("b.toml",
                                                  "[campaign]\nname = \"b\"\n[axes]\nworkload = [\"reduce_scatter\"]\n"
                                                  "backend = [\"mpi\"]\nbytes = [16]\nranks_per_node = [3]\n")));
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("bytes/4 divisible by the ranks (3)"), std::string::npos) << bad.out;
}

// A training step's allreduce runs in place on gradients just packed, with caches cooled by the
// step's compute; level 0 can measure the same (buffers = "in-place", off_cache): validated,
// and without the new parameters a point keeps its canonical text and id.
TEST_F(EndToEnd, AnAllreduceInPlaceWithColdCachesValidatesAndOldPointsKeepTheirIds) {
  auto csv = reported(
      "[campaign]\nname = \"cold\"\nrepetitions = 6\nwarmups = 1\n[axes]\n"
      "workload = [\"allreduce\"]\nbackend = [\"mpi\"]\nbytes = [12288]\nranks_per_node = [2]\n"
      "buffers = [\"\", \"in-place\"]\noff_cache = [\"\", \"1M\"]\n");
  ASSERT_FALSE(HasFailure()) << "plan, run and report succeed";
  ASSERT_EQ(csv.size(), 4u);
  std::set<std::string> texts;
  for (auto& [id, row] : csv) {
    EXPECT_EQ(row["validation_status"], "passed") << row["canonical"];
    EXPECT_EQ(row["n"], "6") << row["canonical"];
    texts.insert(row["canonical"]);
  }
  EXPECT_TRUE(texts.count("allreduce:mpi bytes=12288 nodes=1 ranks_per_node=2 seed=1")) << "the id a point had before";
  EXPECT_TRUE(texts.count("allreduce:mpi buffers=in-place bytes=12288 nodes=1 off_cache=1M ranks_per_node=2 seed=1"));
  Cmd bad = sh(d500_cmd("plan --dry-run " + write("b.toml",
                                                  "[campaign]\nname = \"b\"\n[axes]\nworkload = [\"allgather\"]\n"
                                                  "backend = [\"mpi\"]\nbytes = [16]\nbuffers = [\"in-place\"]\n")));
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("buffers = \"in-place\" is for allreduce only"), std::string::npos) << bad.out;
  bad = sh(d500_cmd("plan --dry-run " + write("o.toml",
                                              "[campaign]\nname = \"o\"\n[axes]\nworkload = [\"allreduce\"]\n"
                                              "backend = [\"mpi\"]\nbytes = [16]\noff_cache = [\"lots\"]\n")));
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("off_cache is \"lots\": a size below 4 EiB such as \"64M\""), std::string::npos) << bad.out;
}

TEST_F(EndToEnd, SubmitWithoutASlurmConfigurationSaysSoAndRecordsNothing) {
  std::string campaign = write("s.toml",
                               "[campaign]\nname = \"s\"\ntemplate = \"slurm\"\n[slurm]\ntime_limit = 5\n"
                               "[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [8]\n");
  fs::path run = dir_ / "run";
  ASSERT_EQ(sh(d500_cmd("plan " + campaign + " -o " + run.string())).code, 0);
  Cmd sub = sh("SLURM_CONF=/nonexistent/slurm.conf " + d500_cmd("submit " + run.string()));
  EXPECT_EQ(sub.code, 1) << sub.out;
  // A build with libslurm looks for the configuration first; one without says what it lacks.
  const std::string why =
      ::d500::slurm_available()
          ? "no Slurm configuration found (SLURM_CONF=/nonexistent/slurm.conf does not exist)"
          : "this d500 was built without libslurm (Debian: apt-get install libslurm-dev, then rebuild)";
  EXPECT_NE(sub.out.find(why), std::string::npos) << sub.out;
  EXPECT_FALSE(fs::exists(run / "slurm" / "submissions.tsv"));
  Cmd local = sh(d500_cmd("run " + run.string()));
  EXPECT_EQ(local.code, 1);
  EXPECT_NE(local.out.find("uses the 'slurm' launcher"), std::string::npos) << local.out;
  Cmd st = sh("SLURM_CONF=/nonexistent/slurm.conf " + d500_cmd("status " + run.string()));
  EXPECT_EQ(st.code, 0) << st.out;
  // Status answers from the results files, whatever Slurm (or its absence) says.
  EXPECT_NE(st.out.find("points: 0 complete, 0 failed (validation or backend), 0 incomplete, 1 missing"),
            std::string::npos)
      << st.out;
}

TEST_F(EndToEnd, BadCampaignGivesOneLocatedErrorAndWritesNothing) {
  std::string campaign = write("bad.toml", "[campaign]\nname = \"bad\"\nrepetitons = 5\n");
  fs::path run = dir_ / "run";
  Cmd plan = sh(d500_cmd("plan " + campaign + " -o " + run.string()));
  EXPECT_EQ(plan.code, 1);
  EXPECT_NE(plan.out.find("bad.toml:3:1: unknown key 'repetitons' in [campaign]; did you mean 'repetitions'?"),
            std::string::npos)
      << plan.out;
  EXPECT_FALSE(fs::exists(run));
  Cmd typo = sh(d500_cmd("plna " + campaign));
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.out.find("did you mean 'plan'"), std::string::npos) << typo.out;
}

TEST_F(EndToEnd, FailedJobIsReportedAndTheOthersStillRun) {
  std::string campaign = write("two.toml", R"(
[campaign]
name = "two-jobs"
repetitions = 6
warmups = 1
[axes]
workload = ["gemm"]
backend = ["blas"]
n = [32]
ranks_per_node = [1, 2]
)");
  fs::path run = dir_ / "run";
  ASSERT_EQ(sh(d500_cmd("plan " + campaign + " -o " + run.string())).code, 0);
  // Reported before anything ran: the plan names the campaign, At a glance says none completed.
  Cmd before = sh(d500_cmd("report " + run.string()));
  EXPECT_EQ(before.code, 0) << before.out;
  EXPECT_EQ(before.out.rfind("d500 report: two-jobs\n", 0), 0u) << before.out;
  EXPECT_NE(before.out.find("d500: no results file yet"), std::string::npos) << before.out;
  EXPECT_NE(before.out.find("- 0 of 2 points completed; 2 did not (missing 2)"), std::string::npos) << before.out;
  // A job that dies: its script exits 3 before starting the worker.
  std::ofstream((run / "jobs" / "job-0000.sh").string()) << "#!/bin/bash\necho simulated failure >&2\nexit 3\n";
  Cmd r = sh(d500_cmd("run " + run.string()));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("job-0000: exit code 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 succeeded, 1 failed"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(run / "results" / "job-0001.h5"));
  EXPECT_NE(sh("cat " + (run / "jobs" / "job-0000.status").string()).out.find("exit_code = 3"), std::string::npos);
  EXPECT_NE(sh("cat " + (run / "logs" / "job-0000.log").string()).out.find("simulated failure"), std::string::npos);

  // The report still comes, with the failed job's point listed as missing.
  std::ofstream((run / "results" / "foreign.h5").string()) << "not an HDF5 file";
  Cmd rep = sh(d500_cmd("report " + run.string()));
  EXPECT_EQ(rep.code, 0) << rep.out;
  auto csv = read_csv(run / "results.csv");
  int missing = 0, complete = 0;
  for (auto& [id, row] : csv) {
    missing += row["status"] == "missing";
    complete += row["status"] == "complete";
  }
  EXPECT_EQ(missing, 1);
  EXPECT_EQ(complete, 1);
  EXPECT_NE(rep.out.find("foreign.h5: not an HDF5 file"), std::string::npos) << rep.out;

  // A second run skips the completed job; --rerun keeps the earlier file beside the new one.
  Cmd again = sh(d500_cmd("run " + run.string()));
  EXPECT_NE(again.out.find("job-0001] already complete"), std::string::npos) << again.out;
  fs::remove(run / "results" / "foreign.h5");
  std::ofstream((run / "jobs" / "job-0000.sh").string()) << "#!/bin/bash\nexit 0\n";
  Cmd rerun = sh(d500_cmd("run --rerun " + run.string()));
  EXPECT_EQ(rerun.code, 0) << rerun.out;
  EXPECT_TRUE(fs::exists(run / "results" / "job-0001.h5.prev-1"));
  EXPECT_TRUE(fs::exists(run / "results" / "job-0001.h5"));
}

// A backend that crashes its process (the custom ReLU writing through a null pointer): each
// rank's crash note names the rank, the signal and the point, `d500 run` shows it and fails
// the job, and the next run, the crash gone, measures the points the crash left.
TEST_F(EndToEnd, ARankThatCrashesIsNamedWithItsPointAndTheNextRunMeasuresIt) {
  const std::string campaign =
      write("crash.toml", std::string("[campaign]\nname = \"crash\"\nrepetitions = 3\nwarmups = 1\n[fixed]\n"
                                      "workload = \"relu\"\nbackend = \"custom\"\nranks_per_node = 2\nc = 4\nh = 8\n"
                                      "library = \"") +
                              D500_CUSTOM_RELU + "\"\n[axes]\nn = [2, 3]\n");
  const fs::path run = dir_ / "run";
  ASSERT_EQ(sh(d500_cmd("plan " + campaign + " -o " + run.string())).code, 0);
  std::string first_id;
  {
    std::ifstream points(run / "points.csv");
    std::string header, row;
    std::getline(points, header);
    std::getline(points, row);
    first_id = row.substr(0, row.find(','));
  }
  ASSERT_EQ(first_id.size(), 16u) << first_id;
  Cmd crashed = sh("D500_EXAMPLE_RELU_CRASH=1 " + d500_cmd("run " + run.string()));
  EXPECT_EQ(crashed.code, 1) << crashed.out;
  EXPECT_NE(crashed.out.find("FAILED with exit code"), std::string::npos) << crashed.out;
  const std::string note = "crashed with SIGSEGV in point 1/2 " + first_id;
  EXPECT_NE(crashed.out.find(note), std::string::npos) << "d500 run shows the note\n" << crashed.out;
  const std::string log = read_file_text(run / "logs" / "job-0000.log");
  EXPECT_NE(log.find("d500-worker: rank 0 on "), std::string::npos) << log;
  EXPECT_NE(log.find(note), std::string::npos) << log;
  Cmd again = sh(d500_cmd("run " + run.string()));
  EXPECT_EQ(again.code, 0) << again.out;
  ASSERT_EQ(sh(d500_cmd("report " + run.string())).code, 0);
  const auto rows = read_csv(run / "results.csv");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& [id, row] : rows) EXPECT_EQ(row.at("status"), "complete") << id;
}

// Issue 52, the trust model: a campaign's library is code (its constructors run when it is
// loaded). `d500 plan --dry-run` loads none -- it looks at the file alone -- and a real plan
// loads it to check its operator, as the README says; a run records which file it loaded and
// the SHA-256 of its bytes (checked against coreutils' sha256sum), and the report lists them.
TEST_F(EndToEnd, ADryRunLoadsNoLibraryAndARunRecordsWhichItLoaded) {
  const fs::path mark = dir_ / "loaded";
  const std::string campaign =
      write("c.toml",
            "[campaign]\nname = \"trust\"\n[fixed]\nworkload = \"relu\"\nn = 2\nc = 8\nh = 12\n"
            "backend = \"custom\"\nlibrary = \"" +
                std::string(D500_CUSTOM_RELU) + "\"\n");
  const std::string env = "D500_TEST_LOADED_MARK=" + mark.string() + " ";
  Cmd dry = sh(env + d500_cmd("plan --dry-run " + campaign));
  ASSERT_EQ(dry.code, 0) << dry.out;
  EXPECT_FALSE(fs::exists(mark)) << "the dry run ran the library's constructor";
  const std::string bogus = write("bogus.so", "#!/bin/sh\n");
  Cmd not_elf =
      sh(env + d500_cmd("plan --dry-run " + write("b.toml",
                                                  "[campaign]\nname = \"trust\"\n[fixed]\nworkload = \"relu\"\n"
                                                  "n = 2\nc = 8\nh = 12\nbackend = \"custom\"\nlibrary = \"" +
                                                      bogus + "\"\n")));
  EXPECT_NE(not_elf.code, 0) << not_elf.out;
  EXPECT_NE(not_elf.out.find("library '" + bogus + "' is not a shared object"), std::string::npos) << not_elf.out;
  Cmd real = sh(env + d500_cmd("plan " + campaign + " -o " + (dir_ / "run").string()));
  ASSERT_EQ(real.code, 0) << real.out;
  EXPECT_TRUE(fs::exists(mark)) << "a real plan checks the library by loading it";

  ASSERT_EQ(sh(d500_cmd("run " + (dir_ / "run").string())).code, 0);
  Cmd rep = sh(d500_cmd("report " + (dir_ / "run").string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  Cmd sum = sh("sha256sum " + std::string(D500_CUSTOM_RELU) + " | cut -d' ' -f1 | tr -d '\\n'");
  ASSERT_EQ(sum.out.size(), 64u) << sum.out;
  const std::string md = read_file_text(dir_ / "run" / "report.md");
  EXPECT_NE(md.find("## Code loaded from the campaign"), std::string::npos) << md;
  EXPECT_NE(md.find(fs::canonical(D500_CUSTOM_RELU).string() + ": SHA-256 " + sum.out + " (1 point)"),
            std::string::npos)
      << md;
}

TEST_F(EndToEnd, OperatorsRunOnEveryBackendAndAWrongOneIsFlaggedNotTimed) {
  // Two ranks, relu on the library backends of this build and two custom builds (one
  // deliberately wrong), conv2d on blas and the library backends of this build.
  const std::string right = D500_CUSTOM_RELU, wrong = D500_CUSTOM_RELU_WRONG;
  std::string libs;  // "onednn", "libtorch" where built
  int built_libs = 0;
  for (const char* b : {"onednn", "libtorch"})
    if (::d500::find_backend(b)->built) libs += std::string(", \"") + b + "\"", ++built_libs;
  std::string campaign =
      write("c.toml",
            "[campaign]\nname = \"ops\"\nrepetitions = 5\nwarmups = 1\n[fixed]\nranks_per_node = 2\nn = 2\nc = 8\n"
            "h = 12\nk = 8\nr = 3\npad = 1\n[axes]\nworkload = [\"relu\", \"conv2d\"]\n"
            "backend = [\"blas\", \"custom\"" +
                libs + "]\nlibrary = [\"\", \"" + right + "\", \"" + wrong +
                "\"]\n"
                "[[exclude]]\nbackend = \"custom\"\nlibrary = \"\"\n"
                "[[exclude]]\nbackend = [\"blas\"" +
                libs + "]\nlibrary = [\"" + right + "\", \"" + wrong +
                "\"]\n"
                "[[exclude]]\nworkload = \"relu\"\nbackend = \"blas\"\n"
                "[[exclude]]\nworkload = \"conv2d\"\nbackend = \"custom\"\n");
  const std::size_t points = 3 + 2 * static_cast<std::size_t>(built_libs);  // conv2d on blas, relu on 2 custom builds
  fs::path run = dir_ / "run";
  Cmd plan = sh(d500_cmd("plan " + campaign + " -o " + run.string()));
  ASSERT_EQ(plan.code, 0) << plan.out;
  Cmd r = sh(d500_cmd("run " + run.string()));
  EXPECT_NE(r.out.find("failed-validation"), std::string::npos) << r.out;
  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  auto csv = read_csv(run / "results.csv");
  ASSERT_EQ(csv.size(), points);
  int failed = 0;
  for (auto& [id, row] : csv) {
    const bool bad = row["param_library"] == wrong;
    if (bad) {
      ++failed;
      EXPECT_EQ(row["status"], "failed-validation") << row["canonical"];
      EXPECT_EQ(row["validation_status"], "failed") << row["canonical"];
      EXPECT_EQ(row["n"], "0") << "a wrong result must never be timed";
      EXPECT_GT(std::stod(row["validation_max_rel_error"]), 1e-3);
    } else {
      EXPECT_EQ(row["status"], "complete") << row["canonical"];
      EXPECT_EQ(row["validation_status"], "passed") << row["canonical"];
      EXPECT_EQ(row["n"], "5") << row["canonical"];
      EXPECT_GT(std::stod(row["rate_median"]), 0.0) << row["canonical"];
    }
    // The process's peak resident set: at least the libraries, far below the machine.
    EXPECT_GT(std::stoll(row["peak_rss_bytes"]), 1LL << 20) << row["canonical"];
    EXPECT_LT(std::stoll(row["peak_rss_bytes"]), 8LL << 30) << row["canonical"];
  }
  EXPECT_EQ(failed, 1);
  // The report says so where a reader looks, and every file passes the schema check.
  {
    // A backend that fails while setting up fails its point, flagged with the library's message,
    // and the job goes on to the next point.
    fs::path again = dir_ / "again";
    ASSERT_EQ(sh(d500_cmd("plan " + campaign + " -o " + again.string())).code, 0);
    Cmd refused = sh("D500_EXAMPLE_RELU_REFUSE=1 " + d500_cmd("run " + again.string()));
    ASSERT_EQ(sh(d500_cmd("report " + again.string())).code, 0);
    auto rows = read_csv(again / "results.csv");
    int refusals = 0, complete = 0;
    for (auto& [id, row] : rows) {
      if (row["status_reason"].find("refused: D500_EXAMPLE_RELU_REFUSE is set") != std::string::npos) {
        ++refusals;
        EXPECT_EQ(row["status"], "backend-failed");
        EXPECT_EQ(row["n"], "0");
      }
      complete += row["status"] == "complete";
    }
    EXPECT_EQ(refusals, 2) << refused.out;                             // both custom builds refuse
    EXPECT_EQ(complete, static_cast<int>(points) - 2) << refused.out;  // and every other point still ran
  }
  std::ifstream md(run / "report.md");
  std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("failed-validation"), std::string::npos);
  for (const auto& f : fs::directory_iterator(run / "results")) {
    Cmd check = sh(d500_cmd("check " + f.path().string()));
    EXPECT_EQ(check.code, 0) << check.out;
  }
}

// Issue 18, item 6: one runner per run directory, and a runner that is told to stop (or dies)
// takes its job's processes with it.
namespace {

// Starts `d500 ARGS` with its output in `out`; returns d500's own pid.
pid_t spawn_d500(const std::string& args, const fs::path& out, const std::string& env = "") {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // its own group, as a shell starts a job: signals in the test reach only it
    execl(
        "/bin/bash", "bash", "-c",
        ((env.empty() ? "exec " : "exec env " + env + " ") + d500_cmd(args) + " > '" + out.string() + "' 2>&1").c_str(),
        static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// The pids of processes whose command line mentions `needle` (d500-worker with the run's spec).
// Under a hog per core processes come and go while /proc is read: a CI-shaped run of 2026-12-06
// failed on "basic_filebuf::underflow error reading the file: No such process".
std::vector<pid_t> processes_with(const std::string& needle) {
  std::vector<pid_t> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd;
    try {  // a process that ends while it is read fails the read (ESRCH): it runs no more
      cmd = read_file_text(e.path() / "cmdline");
    } catch (const std::exception&) {
      continue;
    }
    const std::string argv0 = cmd.substr(0, cmd.find('\0'));
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos && argv0.ends_with("d500-worker")) pids.push_back(std::stoi(name));
  }
  return pids;
}

int exit_status_within(pid_t pid, double seconds) {
  int st = 0;
  const bool ended = wait_for([&] { return waitpid(pid, &st, WNOHANG) == pid; }, seconds);
  if (!ended) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Two ranks of reference GEMM for a minute: long enough to be caught running.
const std::string kSlowCampaign =
    "[campaign]\nname = \"slow\"\nrepetitions = 100000\nwarmups = 0\n[fixed]\nworkload = \"gemm\"\n"
    "backend = \"reference\"\nn = 192\nranks_per_node = 2\n";

}  // namespace

TEST_P(Signals, ASecondRunnerIsRefusedAndSigtermStopsTheWholeJob) {
  const fs::path run = planned(kSlowCampaign);
  const fs::path out = dir_ / "run1.out";
  const pid_t runner = spawn_d500("run " + run.string(), out);
  const std::string spec = (run / "jobs" / "job-0000.toml").string();
  ASSERT_TRUE(wait_for([&] { return read_file_text(out).find("point 1/1") != std::string::npos; }, 60))
      << read_file_text(out);
  EXPECT_EQ(processes_with(spec).size(), 2u);

  Cmd second = sh(d500_cmd("run " + run.string()));
  EXPECT_EQ(second.code, 1) << second.out;
  EXPECT_NE(second.out.find("in use by `d500 run` (pid " + std::to_string(runner) + " on host "), std::string::npos)
      << second.out;

  kill(runner, SIGTERM);  // to d500 run alone, not its group
  EXPECT_EQ(exit_status_within(runner, 30), 128 + SIGTERM) << read_file_text(out);
  EXPECT_TRUE(wait_for([&] { return processes_with(spec).empty(); }, 10)) << "ranks run on after d500 run stopped";
  EXPECT_NE(read_file_text(out).find("STOPPED (d500 run got SIGTERM)"), std::string::npos) << read_file_text(out);
  const std::string status = read_file_text(run / "jobs" / "job-0000.status");
  EXPECT_NE(status.find("stopped_by = 'SIGTERM'"), std::string::npos) << status;
  // What was flushed before the stop is kept: the point reads as incomplete, not lost.
  Cmd rep = sh(d500_cmd("report " + run.string()));
  EXPECT_EQ(rep.code, 0) << rep.out;
  EXPECT_EQ(read_csv(run / "results.csv").begin()->second["status"], "incomplete") << rep.out;
}

TEST_P(Signals, AfterKill9TheRanksEndAndAJobThatOutlivesItsRunnerIsNamed) {
  const fs::path run = planned(kSlowCampaign);
  const std::string spec = (run / "jobs" / "job-0000.toml").string();
  const fs::path out = dir_ / "run1.out";
  pid_t runner = spawn_d500("run " + run.string(), out);
  ASSERT_TRUE(wait_for([&] { return read_file_text(out).find("point 1/1") != std::string::npos; }, 60))
      << read_file_text(out);
  kill(runner, SIGKILL);
  EXPECT_EQ(exit_status_within(runner, 10), 128 + SIGKILL);
  EXPECT_TRUE(wait_for([&] { return processes_with(spec).empty(); }, 15)) << "ranks run on after kill -9 of d500 run";

  // A job that ignores SIGTERM outlives its runner's kill -9: the next runner names it.
  fs::create_directories(dir_ / "templates");
  write("templates/stubborn.sh.in",
        "#!/usr/bin/env bash\n# d500: launcher=local\ntrap '' TERM HUP INT\n: > started\nsleep 120\n"
        "# {{worker}} {{spec}} {{output}}\n");
  const fs::path stubborn = dir_ / "stubborn";
  Cmd plan =
      sh(d500_cmd("plan " +
                  write("stubborn.toml",
                        "[campaign]\nname = \"stubborn\"\ntemplate = \"stubborn\"\n"
                        "templates_dir = \"templates\"\n[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\nn = 8\n") +
                  " -o " + stubborn.string()));
  ASSERT_EQ(plan.code, 0) << plan.out;
  runner = spawn_d500("run " + stubborn.string(), out);
  // Until the script has set its trap, a kill -9 of its runner ends it too (the kernel's SIGTERM,
  // or its own check that its parent is still there): on a loaded machine that once took longer
  // than the runner's recording of the group, and the second runner then rightly ran the job.
  ASSERT_TRUE(wait_for([&] { return fs::exists(stubborn / "started"); }, 60));
  const long pgid = ::d500::read_lock_file((stubborn / "run.lock").string()).job_pgid;
  ASSERT_GT(pgid, 0);
  kill(runner, SIGKILL);
  exit_status_within(runner, 10);
  Cmd again = sh(d500_cmd("run " + stubborn.string()));
  EXPECT_EQ(again.code, 1) << again.out;
  EXPECT_NE(again.out.find("is gone: processes it started still run"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("job job-0000, process group " + std::to_string(pgid)), std::string::npos) << again.out;
  kill(-static_cast<pid_t>(pgid), SIGKILL);
  EXPECT_TRUE(wait_for([&] { return kill(-static_cast<pid_t>(pgid), 0) != 0; }, 10));
}

// Issue 52, bounded waits: a rank that stops (SIGSTOP; a dead node looks the same) leaves the
// other spinning in a collective and the job silent. d500 run ends it once neither its output
// nor its results file has moved for D500_PROGRESS_TIMEOUT_S (SIGTERM, then SIGKILL 10 s later,
// which a stopped process cannot ignore), and the report says why its point is unfinished.
TEST_P(Signals, AStoppedRankEndsItsJobAfterTheProgressTimeoutAndTheReportSaysWhy) {
  const fs::path run = planned(kSlowCampaign);
  const std::string spec = (run / "jobs" / "job-0000.toml").string();
  const fs::path out = dir_ / "run.out";
  const pid_t runner = spawn_d500("run " + run.string(), out, "D500_PROGRESS_TIMEOUT_S=3");
  ASSERT_TRUE(wait_for([&] { return read_file_text(out).find("point 1/1") != std::string::npos; }, 60))
      << read_file_text(out);
  ASSERT_TRUE(wait_for([&] { return processes_with(spec).size() == 2; }, 30));
  const pid_t rank = processes_with(spec).front();
  ASSERT_EQ(kill(rank, SIGSTOP), 0);
  const auto t0 = std::chrono::steady_clock::now();
  // The bound: the timeout, the 10 s between SIGTERM and SIGKILL, and a second per poll (the
  // slack is for a loaded machine).
  EXPECT_EQ(exit_status_within(runner, 3 + 10 + 30), 1) << read_file_text(out);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("stopped rank: d500 run ended %.1f s after the SIGSTOP\n", took);
  EXPECT_TRUE(wait_for([&] { return processes_with(spec).empty(); }, 10)) << "a rank survived its job";
  const std::string said = read_file_text(out);
  EXPECT_NE(said.find("no progress for"), std::string::npos) << said;
  EXPECT_NE(said.find("a rank has stopped or hangs; ending the job (D500_PROGRESS_TIMEOUT_S = 3.00)"),
            std::string::npos)
      << said;

  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  auto csv = read_csv(run / "results.csv");
  ASSERT_EQ(csv.size(), 1u) << rep.out;
  const auto& row = csv.begin()->second;
  EXPECT_EQ(row.at("status"), "job-failed") << rep.out;
  EXPECT_NE(row.at("status_reason").find("ended by d500 run after"), std::string::npos) << row.at("status_reason");
}

INSTANTIATE_TEST_SUITE_P(IdleAndLoaded, Signals, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "UnderAHogPerCore" : "Idle"; });

// Issue 52: tight limits end in a clear error or a clean run, never a hang. `ulimit -n 32` once
// crashed mpirun in PMIx_Finalize and left d500 run waiting; `ulimit -v 200000` left report,
// check and run spinning in OpenBLAS's fork and exit hooks, and a job's ranks in its malloc retries.
TEST_F(EndToEnd, TightLimitsEndInAClearErrorNeverAHang) {
  const fs::path run = planned(
      "[campaign]\nname = \"limits\"\nrepetitions = 5\nwarmups = 1\n[fixed]\nworkload = \"gemm\"\n"
      "backend = \"blas\"\nn = 16\nranks_per_node = 2\n");
  Cmd files = sh("ulimit -n 32; timeout -s KILL 60 " + d500_cmd("run " + run.string()));
  EXPECT_EQ(files.code, 1) << files.out;
  EXPECT_NE(files.out.find("the open-file limit (ulimit -n) is 32; mpirun needs about 48 for a job of 2 rank(s)"),
            std::string::npos)
      << files.out;
  EXPECT_FALSE(fs::exists(run / "results" / "job-0000.h5")) << "a job was started";
  // A flush interval out of its range ends the job with the variable and the range named.
  Cmd flush = sh("D500_FLUSH_INTERVAL_S=0.001 timeout -s KILL 60 " + d500_cmd("run " + run.string()));
  EXPECT_NE(flush.code, 0) << flush.out;
  EXPECT_NE(flush.out.find("D500_FLUSH_INTERVAL_S=\"0.001\": must be seconds from 0.05 to 300"), std::string::npos)
      << flush.out;
  EXPECT_FALSE(fs::exists(run / "results" / "job-0000.h5")) << "the refused job wrote a results file";
  ASSERT_EQ(sh(d500_cmd("run " + run.string())).code, 0);
  const std::string h5 = (run / "results" / "job-0000.h5").string();
  for (const std::string& command : {"report " + run.string(), "check " + h5, "status " + run.string()}) {
    Cmd c = sh("ulimit -v 200000; timeout -s KILL 60 " + d500_cmd(command));
    EXPECT_TRUE(c.code == 0) << command << ": exit " << c.code << " (137: killed after 60 s)\n" << c.out;
  }
  // The job itself under that limit: OpenBLAS, short of room for its buffer, would retry its
  // malloc for ever (the ranks hung until the progress watchdog); the point fails at once instead,
  // naming the limit and what it needs.
  const fs::path tight = planned(
      "[campaign]\nname = \"tight\"\nrepetitions = 5\nwarmups = 1\n[fixed]\nworkload = \"gemm\"\n"
      "backend = \"blas\"\nn = 16\nranks_per_node = 2\n");
  const std::string tight_run =
      "ulimit -v 200000; D500_PROGRESS_TIMEOUT_S=50 timeout -s KILL 90 " + d500_cmd("run " + tight.string());
  Cmd vm = sh(tight_run);
  // A rank maps ~181 MiB of the 195 by then: under CI's load PMIx once ran out inside MPI_Init
  // (a NULL from calloc, SIGSEGV), which the worker's crash note names, and once could not map
  // its progress thread's stack ("pmix_progress_thread_start failed", and Open MPI's "An error
  // occurred in MPI_Init"; a CI-shaped run of 2026-12-06). Not this test's subject: the run is
  // made once more, saying so. A third time PMIx's init failed before Open MPI's message
  // ("pmix_init failed", "OPAL ERROR", exit code 2; a CI-shaped run of 2026-12-07), which only
  // the job's log shows in full. Whatever the way, the ranks then never began the point: the job's
  // log has no "d500:point" line, which the worker writes once MPI_Init has returned. Up to two
  // more runs, saying so.
  auto inside_init = [&](const std::string& out) {
    const std::string log = read_file_text(tight / "logs" / "job-0000.log");
    return d500::crashed_inside_mpi_init(out) || out.find("An error occurred in MPI_Init") != std::string::npos ||
           log.find("pmix_init failed") != std::string::npos ||
           log.find("pmix_progress_thread_start failed") != std::string::npos ||
           log.find("d500:point ") == std::string::npos;
  };
  for (int again = 0; again < 2 && inside_init(vm.out); ++again) {
    std::cout << "The ranks failed before the point began (inside MPI_Init) under the limit; the run is made once "
                 "more:\n"
              << vm.out << "\n"
              << read_file_text(tight / "logs" / "job-0000.log") << std::endl;
    vm = sh(tight_run);
  }
  EXPECT_NE(vm.code, 137) << "killed after 90 s: " << vm.out;
  EXPECT_EQ(vm.out.find("no progress for"), std::string::npos) << "ended by the progress watchdog: " << vm.out;
  EXPECT_NE(vm.out.find("points: 1 backend-failed"), std::string::npos) << vm.out;
  const std::string log = read_file_text(tight / "logs" / "job-0000.log");
  EXPECT_NE(log.find("blas: the address-space limit (ulimit -v) is 195 MiB"), std::string::npos) << log;
  EXPECT_NE(log.find("OpenBLAS needs a buffer of 128 MiB for each of its 1 thread(s)"), std::string::npos) << log;
}

// Issue 52: a run directory prepared by someone careless or hostile. A link planted at a file
// d500 writes or appends to never has the file it points to written: every command refuses a
// link that leads out of the run directory, naming it, and one within it is replaced (a report)
// or refused (a log, the lock), never written through.
TEST_F(EndToEnd, NoWriteFollowsALinkPlantedInTheRunDirectory) {
  const fs::path run = planned(
      "[campaign]\nname = \"links\"\nrepetitions = 4\nwarmups = 1\n[fixed]\nworkload = \"gemm\"\n"
      "backend = \"blas\"\nn = 16\n");
  const fs::path victim = dir_ / "victim";
  write("victim", "secret\n");
  for (const char* planted : {"run.lock", "logs/job-0000.log", "jobs/job-0000.status.tmp", "jobs/job-0000.status",
                              "report.md.tmp", "results/job-0000.h5", "results.csv"}) {
    SCOPED_TRACE(planted);
    fs::create_symlink(victim, run / planted);
    for (const char* command : {"run ", "report ", "status "}) {
      Cmd c = sh(d500_cmd(command + run.string()));
      EXPECT_NE(c.code, 0) << command << c.out;
      EXPECT_NE(c.out.find((run / planted).string() + ": is a symbolic link to " + victim.string() +
                           ", outside the run directory"),
                std::string::npos)
          << command << c.out;
    }
    fs::remove(run / planted);
  }
  EXPECT_EQ(read_file_text(victim), "secret\n");

  // Within the run directory: the lock and the log are refused all the same; a report is replaced.
  fs::create_symlink("plan.toml", run / "run.lock");
  Cmd locked = sh(d500_cmd("run " + run.string()));
  EXPECT_EQ(locked.code, 1) << locked.out;
  EXPECT_NE(locked.out.find("run.lock: is a symbolic link; d500 locks and writes no file through a link"),
            std::string::npos)
      << locked.out;
  fs::remove(run / "run.lock");
  fs::create_symlink("../campaign.toml", run / "logs" / "job-0000.log");
  Cmd logged = sh(d500_cmd("run " + run.string()));
  EXPECT_NE(logged.code, 0) << logged.out;
  EXPECT_NE(logged.out.find("job-0000.log: is a symbolic link; d500 appends to no file through a link"),
            std::string::npos)
      << logged.out;
  fs::remove(run / "logs" / "job-0000.log");
  const std::string campaign = read_file_text(run / "campaign.toml");
  fs::create_symlink("campaign.toml", run / "report.md");
  ASSERT_EQ(sh(d500_cmd("run " + run.string())).code, 0);
  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  EXPECT_FALSE(fs::is_symlink(run / "report.md"));
  EXPECT_EQ(read_file_text(run / "campaign.toml"), campaign);
  for (const auto& e : fs::recursive_directory_iterator(run))
    EXPECT_FALSE(e.path().string().ends_with(".tmp")) << e.path();
}

// Issue 15, item 2: `d500 run` resumes by point. A job killed in its second point runs only that
// point again, under a spec of its own, and every earlier results file is kept.
TEST_F(EndToEnd, ARunResumesByPointAndKeepsEveryEarlierFile) {
  const fs::path run = planned(
      "[campaign]\nname = \"resume\"\nrepetitions = 3000\nwarmups = 0\n[fixed]\nworkload = \"gemm\"\n"
      "[axes]\nbackend = [\"blas\", \"reference\"]\nn = [256, 512]\n[[zip]]\naxes = [\"backend\", \"n\"]\n");
  // blas at n = 256: about a second; reference at n = 512: about 25 s here, far longer than the
  // 3 s mpirun leaves a rank between a stop and its SIGTERM (at n = 256 it took 2.5 s, and it
  // sometimes completed before the SIGTERM reached it)
  const std::string spec = (run / "jobs" / "job-0000.toml").string();
  const fs::path out1 = dir_ / "run1.out", out2 = dir_ / "run2.out";
  pid_t runner = spawn_d500("run " + run.string(), out1);
  ASSERT_TRUE(wait_for([&] { return read_file_text(out1).find("point 2/2") != std::string::npos; }, 120))
      << read_file_text(out1);
  const long job_group = ::d500::read_lock_file((run / "run.lock").string()).job_pgid;
  kill(runner, SIGKILL);
  exit_status_within(runner, 10);
  // mpirun ends its ranks and itself within a second or two of its runner's death; until then
  // the next runner refuses (tested above), so wait for the whole job to be gone.
  ASSERT_TRUE(wait_for([&] { return processes_with(spec).empty() && !::d500::process_group_runs(job_group); }, 15));

  runner = spawn_d500("run " + run.string(), out2);
  ASSERT_TRUE(wait_for([&] { return read_file_text(out2).find("point 1/1 gemm:reference") != std::string::npos; }, 60))
      << read_file_text(out2);
  kill(runner, SIGTERM);
  EXPECT_EQ(exit_status_within(runner, 30), 128 + SIGTERM) << read_file_text(out2);
  const std::string said = read_file_text(out2);
  EXPECT_NE(said.find("resuming: 1 of 2 points already have final results; running the other 1 (spec job-0000.r1)"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("earlier results kept as job-0000.h5.prev-1"), std::string::npos) << said;
  const std::string resumed = read_file_text(run / "jobs" / "job-0000.r1.toml");
  EXPECT_NE(resumed.find("gemm:reference"), std::string::npos) << resumed;
  EXPECT_EQ(resumed.find("gemm:blas"), std::string::npos) << resumed;

  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  auto csv = read_csv(run / "results.csv");
  ASSERT_EQ(csv.size(), 2u) << rep.out;
  for (auto& [id, row] : csv)
    EXPECT_EQ(row["status"], row["canonical"].rfind("gemm:blas", 0) == 0 ? "complete" : "incomplete")
        << row["canonical"];
}

TEST_F(EndToEnd, AJobWhosePointsAllHaveFinalResultsIsNotRunAgain) {
  const fs::path run = planned(
      "[campaign]\nname = \"done\"\nrepetitions = 6\nwarmups = 1\n[fixed]\nworkload = \"gemm\"\n"
      "n = 32\n[axes]\nbackend = [\"blas\", \"reference\"]\n");
  ASSERT_EQ(sh(d500_cmd("run " + run.string())).code, 0);
  fs::remove(run / "jobs" / "job-0000.status");  // as if the runner died after the job's last point
  Cmd again = sh(d500_cmd("run " + run.string()));
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("all 2 points already have final results"), std::string::npos) << again.out;
  EXPECT_FALSE(fs::exists(run / "results" / "job-0000.h5.prev-1"));
  // The worker itself skips what an earlier file of its spec finished: a requeued Slurm job's
  // next attempt is the same spec with another output.
  const std::string worker = (fs::path(d500_bin()).parent_path() / "d500-worker").string();
  const std::string spec = (run / "jobs" / "job-0000.toml").string(),
                    again_file = (run / "results" / "job-0000.again.h5").string();
  Cmd attempt = sh("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 1 " + worker +
                   " " + spec + " " + again_file);
  EXPECT_EQ(attempt.code, 0) << attempt.out;
  const std::string earlier = (run / "results" / "job-0000.h5").string();
  EXPECT_NE(attempt.out.find("d500:skipped 1/2 complete " + earlier), std::string::npos) << attempt.out;
  EXPECT_NE(attempt.out.find("d500:skipped 2/2 complete " + earlier), std::string::npos) << attempt.out;
  EXPECT_EQ(attempt.out.find("d500:point"), std::string::npos) << attempt.out;
  fs::remove(again_file);
  // --rerun measures every point again (the worker is told not to skip).
  Cmd rerun = sh(d500_cmd("run --rerun " + run.string()));
  EXPECT_EQ(rerun.code, 0) << rerun.out;
  EXPECT_TRUE(fs::exists(run / "results" / "job-0000.h5.prev-1"));
  EXPECT_NE(sh(d500_cmd("check " + (run / "results" / "job-0000.h5").string())).out.find("2 complete"),
            std::string::npos);
  EXPECT_EQ(rerun.out.find("not run again"), std::string::npos) << rerun.out;
}

// Issue 15, item 4: `d500` alone and `d500 --version` answer instead of "A subcommand is required".
TEST_F(EndToEnd, PlainD500GivesHelpAndTheVersion) {
  Cmd bare = sh(d500_cmd(""));
  EXPECT_EQ(bare.code, 0) << bare.out;
  EXPECT_EQ(bare.out.rfind("d500 ", 0), 0u) << bare.out;
  for (const char* s : {"plan", "run", "report", "check", "submit"})
    EXPECT_NE(bare.out.find(s), std::string::npos) << s;
  Cmd v = sh(d500_cmd("--version"));
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_EQ(v.out, sh(d500_cmd("version")).out);
  // `d500 workloads` lists every parameter as the README says: type, default, range or choices.
  Cmd w = sh(d500_cmd("workloads"));
  EXPECT_EQ(w.code, 0) << w.out;
  for (const char* line : {"  n (integer, default -1, 1 to 65536): columns of C",
                           "  pass (string, default forward, one of forward, backward_data, backward_filter)",
                           "  bytes (integer, required, 4 to 17179869184)", "every workload also takes:"})
    EXPECT_NE(w.out.find(line), std::string::npos) << line << "\n" << w.out.substr(0, 2000);
}

// Issue 15, item 3: a large plan is summarised (jobs per shape, points per axis value) instead
// of printing every point; --list prints them all, and points.csv always holds them.
TEST_F(EndToEnd, ALargePlanIsSummarisedAndListedOnRequest) {
  std::string seeds;
  for (int i = 1; i <= 40; ++i) seeds += (i > 1 ? ", " : "") + std::to_string(i);
  const std::string campaign = write("big.toml",
                                     "[campaign]\nname = \"big\"\npoints_per_job = 20\n[fixed]\nbackend = \"blas\"\n"
                                     "workload = \"gemm\"\n[axes]\nn = [8, 16]\nseed = [" +
                                         seeds + "]\n");
  const fs::path run = dir_ / "run";
  Cmd plan = sh(d500_cmd("plan " + campaign + " -o " + run.string()));
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("80 points in 4 jobs"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("4 job(s) of 1 node(s) x 1 rank(s), 20 points each"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("n: 8 (40), 16 (40)"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("seed: 1 (2), 2 (2)"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("... 28 more values"), std::string::npos) << plan.out;
  EXPECT_EQ(plan.out.find("  gemm:blas k="), std::string::npos) << plan.out;  // no point listed
  std::istringstream csv(read_file_text(run / "points.csv"));
  int lines = 0;
  for (std::string l; std::getline(csv, l);) ++lines;
  EXPECT_EQ(lines, 81);

  Cmd listed = sh(d500_cmd("plan --dry-run --list " + campaign));
  ASSERT_EQ(listed.code, 0) << listed.out;
  int points = 0;
  for (std::size_t at = listed.out.find("  gemm:blas k="); at != std::string::npos;
       at = listed.out.find("  gemm:blas k=", at + 1))
    ++points;
  EXPECT_EQ(points, 80) << listed.out;
}

// A plan whose files do not fit the disk (written on several threads: 24,000 points, so the
// planner and the writer use every CPU) is refused with the reason; nothing of it is left, and
// an earlier run directory on the same disk is untouched.
TEST_F(EndToEnd, APlanOnAFullDiskIsRefusedAndLeavesNothingAndLosesNothing) {
  const auto mounted = small_tmpfs("1m");
  if (!mounted) GTEST_SKIP() << "needs root to mount a small tmpfs (mount -t tmpfs)";
  const fs::path mnt = mounted->path;
  const std::string small =
      write("small.toml", "[campaign]\nname = \"small\"\n[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\nn = 8\n");
  ASSERT_EQ(sh(d500_cmd("plan " + small + " -o " + (mnt / "old").string())).code, 0);
  std::map<std::string, std::string> before;
  for (const auto& e : fs::recursive_directory_iterator(mnt))
    if (e.is_regular_file()) before[e.path().string()] = read_file_text(e.path());
  ASSERT_GE(before.size(), 4u);

  std::string seeds;
  for (int i = 1; i <= 1000; ++i) seeds += (i > 1 ? ", " : "") + std::to_string(i);
  const std::string big = write("big.toml",
                                "[campaign]\nname = \"big\"\npoints_per_job = 1000\n[fixed]\nworkload = \"gemm\"\n"
                                "backend = \"blas\"\n[axes]\nn = [8, 16, 24, 32, 40, 48, 56, 64]\nm = [8, 16, 32]\n"
                                "seed = [" +
                                    seeds + "]\n");
  Cmd plan = sh(d500_cmd("plan " + big + " -o " + (mnt / "runs" / "big").string()));
  EXPECT_EQ(plan.code, 1) << plan.out;
  EXPECT_TRUE(plan.out.find("disk full") != std::string::npos ||
              plan.out.find("No space left on device") != std::string::npos)
      << plan.out;
  EXPECT_NE(plan.out.find("nothing was written"), std::string::npos) << plan.out;
  std::map<std::string, std::string> after;
  for (const auto& e : fs::recursive_directory_iterator(mnt)) {
    EXPECT_TRUE(e.path().string().rfind((mnt / "old").string(), 0) == 0) << "left behind: " << e.path();
    if (e.is_regular_file()) after[e.path().string()] = read_file_text(e.path());
  }
  EXPECT_EQ(after, before);
}

// Issue 15, item 4: `cmake --install` gives a d500 that works from its prefix alone: the worker
// beside it, the templates from share/d500, a campaign planned, run and reported.
TEST_F(EndToEnd, AnInstalledD500PlansRunsAndReportsFromItsPrefix) {
  const fs::path prefix = dir_ / "prefix";
  Cmd inst = sh(std::string(D500_CMAKE) + " --install " + D500_BUILD_DIR + " --prefix " + prefix.string());
  ASSERT_EQ(inst.code, 0) << inst.out;
  const std::string d500 = (prefix / "bin" / "d500").string();
  ASSERT_TRUE(fs::exists(prefix / "bin" / "d500-worker"));
  const std::string campaign = write("one.toml",
                                     "[campaign]\nname = \"inst\"\nrepetitions = 6\nwarmups = 1\n[fixed]\n"
                                     "workload = \"gemm\"\nbackend = \"blas\"\nn = 16\n");
  const fs::path run = dir_ / "run";
  // Away from the source tree: no D500_TEMPLATES, and the working directory elsewhere.
  const std::string env = "cd " + dir_.string() + " && env -u D500_TEMPLATES ";
  Cmd plan = sh(env + d500 + " plan " + campaign + " -o " + run.string());
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find((prefix / "share" / "d500" / "templates" / "local.sh.in").string()), std::string::npos)
      << plan.out;
  Cmd r = sh(env + d500 + " run " + run.string());
  ASSERT_EQ(r.code, 0) << r.out;
  Cmd rep = sh(env + d500 + " report " + run.string());
  ASSERT_EQ(rep.code, 0) << rep.out;
  EXPECT_NE(rep.out.find("Results: gemm:\nShared by every gemm point: "), std::string::npos) << rep.out;
  EXPECT_NE(read_file_text(run / "jobs" / "job-0000.sh").find((prefix / "bin" / "d500-worker").string()),
            std::string::npos);

  // The backends in modules load from the prefix's lib/, beside the prefix's core (the dynamic
  // loader's record of what `d500 backends`, which loads them all, opened).
  std::vector<std::string> modules;
  for (const auto& b : d500::all_backends())
    if (b.built && !b.module.empty() && std::find(modules.begin(), modules.end(), b.module) == modules.end())
      modules.push_back(b.module);
  const fs::path ld = dir_ / "ld";
  Cmd listed = sh(env + "LD_DEBUG=files LD_DEBUG_OUTPUT=" + ld.string() + " " + d500 + " backends");
  EXPECT_EQ(listed.code, 0) << listed.out;
  EXPECT_EQ(listed.out.find("did not load"), std::string::npos) << listed.out;
  std::set<std::string> loaded;  // every library initialised ("calling init: /a/b.so"), its path made canonical
  for (const auto& f : fs::directory_iterator(dir_)) {
    if (f.path().filename().string().rfind("ld.", 0) != 0) continue;
    const std::string text = read_file_text(f.path());
    const std::string key = "calling init: ";
    for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
      const std::size_t from = at + key.size();
      loaded.insert(fs::weakly_canonical(text.substr(from, text.find('\n', from) - from)).string());
    }
  }
  EXPECT_TRUE(loaded.count(fs::weakly_canonical(prefix / "lib" / "libd500core.so").string())) << listed.out;
  for (const auto& f : loaded)
    EXPECT_EQ(f.rfind(std::string(D500_BUILD_DIR) + "/libd500", 0), std::string::npos)
        << "loaded from the build tree: " << f;
  for (const auto& m : modules) EXPECT_TRUE(loaded.count(fs::weakly_canonical(prefix / "lib" / m).string())) << m;
  if (!d500::find_backend("libtorch")->built)
    GTEST_SKIP() << "the rest needs a backend in a module (libtorch), which this build lacks";
  EXPECT_NE(listed.out.find("version: LibTorch "), std::string::npos) << listed.out;
  // A module that cannot load (here: deleted; on a cluster: a library its environment module
  // provides, not loaded) is a plan-time error naming the file, line and key and why; the
  // backends in the core still plan.
  // Planned where the module loads, run where it does not (a compute node without the library):
  // its point fails at setup with the loader's words, the job goes on, the blas point runs.
  const std::string both =
      write("both.toml",
            "[campaign]\nname = \"b\"\nrepetitions = 3\nwarmups = 1\n[fixed]\nworkload = \"gemm\"\n"
            "n = 16\n[axes]\nbackend = [\"libtorch\", \"blas\"]\n");
  const fs::path node = dir_ / "node";
  ASSERT_EQ(sh(env + d500 + " plan " + both + " -o " + node.string()).code, 0);
  fs::remove(prefix / "lib" / "libd500-libtorch.so");
  Cmd ran = sh(env + d500 + " run " + node.string());
  ASSERT_EQ(sh(env + d500 + " report " + node.string()).code, 0) << ran.out;
  auto rows = read_csv(node / "results.csv");
  ASSERT_EQ(rows.size(), 2u) << ran.out;
  for (auto& [id, row] : rows) {
    if (row["param_backend"] == "libtorch") {
      EXPECT_EQ(row["status"], "backend-failed") << ran.out;
      EXPECT_NE(row["status_reason"].find("backend 'libtorch': its module did not load: "), std::string::npos)
          << row["status_reason"];
    } else {
      EXPECT_EQ(row["status"], "complete") << row["canonical"];
    }
  }
  const std::string torch =
      write("torch.toml", "[campaign]\nname = \"t\"\n[fixed]\nworkload = \"gemm\"\nbackend = \"libtorch\"\nn = 16\n");
  Cmd bad = sh(env + d500 + " plan --dry-run " + torch);
  EXPECT_NE(bad.code, 0) << bad.out;
  EXPECT_NE(
      bad.out.find(
          "torch.toml:5:11: key 'backend': backend 'libtorch' is in this build, in module libd500-libtorch.so, which did not load here: "),
      std::string::npos)
      << bad.out;
  EXPECT_NE(bad.out.find("libd500-libtorch.so: cannot open shared object file"), std::string::npos) << bad.out;
  EXPECT_EQ(sh(env + d500 + " plan --dry-run " + campaign).code, 0);
  Cmd listed_after = sh(env + d500 + " backends");
  EXPECT_EQ(listed_after.code, 0) << listed_after.out;
  EXPECT_NE(listed_after.out.find("in this build, but its module did not load: "), std::string::npos)
      << listed_after.out;
  // A module left from another build (an older install) is refused by its build's identity,
  // never called (the stand-in aborts when called); a library that is no module at all likewise.
  fs::copy_file(D500_STALE_MODULE, prefix / "lib" / "libd500-libtorch.so");
  Cmd stale = sh(env + d500 + " plan --dry-run " + torch);
  EXPECT_NE(stale.code, 0) << stale.out;
  EXPECT_NE(
      stale.out.find("libd500-libtorch.so was built by d500 0.0.9 (0123456789ab), GNU 11.4.0; this d500 is d500 "),
      std::string::npos)
      << stale.out;
  EXPECT_NE(stale.out.find("a module must come from the same build as libd500core"), std::string::npos) << stale.out;
  fs::copy_file(D500_CUSTOM_RELU, prefix / "lib" / "libd500-libtorch.so", fs::copy_options::overwrite_existing);
  Cmd foreign = sh(env + d500 + " plan --dry-run " + torch);
  EXPECT_NE(foreign.code, 0) << foreign.out;
  EXPECT_NE(foreign.out.find("libd500-libtorch.so is not a d500 backend module"), std::string::npos) << foreign.out;
}

// The backends in modules (LibTorch's, CUDA's) are loaded by the processes that run them and by no
// other: a campaign on blas plans and runs (mpirun, 2 ranks) without a single one of their
// libraries in any d500 process (the dynamic loader's own record, LD_DEBUG=files), and its file
// says that the modules were not loaded; one on libtorch loads LibTorch in the planner and the
// workers, and its file holds LibTorch's version.
TEST_F(EndToEnd, ABackendsModuleIsLoadedOnlyByTheProcessesThatRunIt) {
  std::vector<std::string> in_modules;
  for (const auto& b : d500::all_backends())
    if (b.built && !b.module.empty()) in_modules.push_back(b.name);
  if (in_modules.empty()) GTEST_SKIP() << "this build has no backend in a module (built without LibTorch and CUDA)";
  const bool torch = d500::find_backend("libtorch")->built;
  auto run_logged = [&](const std::string& name, const std::string& backend) {
    const fs::path logs = dir_ / ("ld-" + name);
    fs::create_directories(logs);
    const std::string campaign = write(name + ".toml", "[campaign]\nname = \"" + name +
                                                           "\"\nrepetitions = 3\nwarmups = 1\n[fixed]\n"
                                                           "workload = \"gemm\"\nbackend = \"" +
                                                           backend + "\"\nn = 16\nranks_per_node = 2\n");
    const fs::path run = dir_ / ("run-" + name);
    const std::string env = "LD_DEBUG=files LD_DEBUG_OUTPUT=" + (logs / "ld").string() + " ";
    Cmd plan = sh(env + d500_cmd("plan " + campaign + " -o " + run.string()));
    EXPECT_EQ(plan.code, 0) << plan.out;
    Cmd r = sh(env + d500_cmd("run " + run.string()));
    EXPECT_EQ(r.code, 0) << r.out;
    // Which processes loaded what: one log per process, named by its pid.
    std::map<std::string, std::string> logged;
    for (const auto& f : fs::directory_iterator(logs)) logged[f.path().filename().string()] = read_file_text(f.path());
    return std::make_pair(run, logged);
  };
  auto count = [](const std::map<std::string, std::string>& logs, const std::string& needle) {
    int n = 0;
    for (const auto& [f, text] : logs) n += text.find(needle) != std::string::npos;
    return n;
  };
  auto [run, logs] = run_logged("core", "blas");
  int d500_processes = 0;  // the planner, the runner, two workers (mpirun's own are not d500's)
  for (const auto& [f, text] : logs) d500_processes += text.find("libd500core") != std::string::npos;
  EXPECT_GE(d500_processes, 4);
  EXPECT_EQ(count(logs, "libd500-"), 0) << "a module was loaded by a process that runs only blas";
  EXPECT_EQ(count(logs, "libtorch_cpu"), 0);
  EXPECT_EQ(count(logs, "libcublas"), 0);
  hid_t file = H5Fopen((run / "results" / "job-0000.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  hid_t env = H5Gopen2(file, "/env", H5P_DEFAULT);
  for (const auto& name : in_modules)
    EXPECT_NE(attr_string(env, ("version." + name).c_str()).find("not loaded: no point of this process ran on it"),
              std::string::npos)
        << name;
  EXPECT_NE(attr_string(env, "version.blas").find("OpenBLAS"), std::string::npos);
  H5Gclose(env);
  H5Fclose(file);
  if (!torch) GTEST_SKIP() << "the blas half passed; the libtorch half needs LibTorch, which this build lacks";

  auto [trun, tlogs] = run_logged("torch", "libtorch");
  EXPECT_GE(count(tlogs, "libd500-libtorch.so"), 3) << "the planner and both workers load the libtorch module";
  EXPECT_GE(count(tlogs, "libtorch_cpu"), 3);
  file = H5Fopen((trun / "results" / "job-0000.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  env = H5Gopen2(file, "/env", H5P_DEFAULT);
  EXPECT_EQ(attr_string(env, "version.libtorch").rfind("LibTorch ", 0), 0u) << attr_string(env, "version.libtorch");
  H5Gclose(env);
  H5Fclose(file);
}

// Under an address-space limit (ulimit -v) that the core fits and CUDA's libraries do not,
// d500 starts, plans CPU points and says what keeps the GPU backends out: the module that did
// not map, at the campaign's line, with what to raise.
TEST_F(EndToEnd, UnderAnAddressSpaceLimitTheCoreWorksAndAModuleWithoutRoomIsNamed) {
  const d500::BackendInfo* cuda = d500::find_backend("cuda");
  if (!cuda || !cuda->built) GTEST_SKIP() << "this build has no CUDA module (built without CUDA)";
  // The smallest limit, in steps of 256 MiB, under which the core plans a CPU campaign every time
  // (under a limit too small, OpenBLAS's threads retry their buffer forever: hence the timeout).
  // Probed with the plan itself: `d500 version` needs a few MiB less, and a limit between the two
  // (2026-11-27: version ~250 MiB, plan ~265 MiB) said nothing of the module. Eight plans in a
  // row: at the edge (256 MiB, 2026-12-07) a plan ended in std::bad_alloc in 8 to 14 runs of 20,
  // depending on where the libraries were mapped, so one success chose a limit under which the
  // test's next commands failed in about one run of four (at 512 MiB: 20 of 20 planned).
  const std::string cpu =
      write("cpu.toml", "[campaign]\nname = \"cpu\"\n[fixed]\nworkload = \"gemm\"\nbackend = \"blas\"\nn = 16\n");
  auto plans_under = [&](long kib) {
    for (int i = 0; i < 8; ++i)
      if (sh("ulimit -v " + std::to_string(kib) + "; timeout -s KILL 30 " + d500_cmd("plan --dry-run " + cpu)).code !=
          0)
        return false;
    return true;
  };
  long limit_kib = 0;
  for (long kib = 256 * 1024; kib <= 4 * 1024 * 1024 && !limit_kib; kib += 256 * 1024)
    if (plans_under(kib)) limit_kib = kib;
  ASSERT_GT(limit_kib, 0) << "d500 did not plan under 4 GiB of address space";
  const std::string ulimit = "ulimit -v " + std::to_string(limit_kib) + "; timeout -s KILL 60 ";
  Cmd plan = sh(ulimit + d500_cmd("plan --dry-run " + cpu));
  EXPECT_EQ(plan.code, 0) << limit_kib << " KiB: " << plan.out;
  const std::string gpu =
      write("gpu.toml", "[campaign]\nname = \"gpu\"\n[fixed]\nworkload = \"gemm\"\nbackend = \"cuda\"\nn = 16\n");
  Cmd refused = sh(ulimit + d500_cmd("plan --dry-run " + gpu));
  EXPECT_EQ(refused.code, 1) << limit_kib << " KiB: " << refused.out;
  EXPECT_NE(
      refused.out.find("gpu.toml:5:11: key 'backend': backend 'cuda' is in this build, in module libd500-cuda.so, "
                       "which did not load here"),
      std::string::npos)
      << refused.out;
  EXPECT_NE(refused.out.find("address space is too small for its libraries: raise the limit (ulimit -v"),
            std::string::npos)
      << refused.out;
  Cmd backends = sh(ulimit + d500_cmd("backends"));
  EXPECT_EQ(backends.code, 0) << backends.out;
  EXPECT_NE(backends.out.find("in this build, but its module did not load"), std::string::npos) << backends.out;
}

// repetitions = "auto" on 2 ranks: every point stops by the rule, all ranks after the same
// repetition; the file says why and the report's interval is the one the rule judged.
TEST_F(EndToEnd, AdaptiveRepetitionsStopTogetherAndTheFileAndReportSayWhy) {
  const std::string campaign = write("auto.toml",
                                     "[campaign]\nname = \"auto\"\nrepetitions = \"auto\"\nwarmups = 1\n"
                                     "[auto_repetitions]\nci_rel_width = 0.5\nmin = 12\nmax = 400\nmax_time = 20\n" +
                                         gemm_and_allreduce("48", "4096", 2));
  fs::path run = dir_ / "run";
  Cmd plan = sh(d500_cmd("plan " + campaign + " -o " + run.string()));
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("repetitions adaptive: repeated until the 95% exact CI of the median"), std::string::npos)
      << plan.out;
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  auto csv = read_csv(run / "results.csv");
  hid_t file = H5Fopen((run / "results" / "job-0000.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const std::vector<std::string> points = point_ids(file);
  ASSERT_EQ(points.size(), 2u);
  for (const auto& id : points) {
    hid_t g = H5Gopen2(file, ("/points/" + id).c_str(), H5P_DEFAULT);
    const long long reps = attr_int(g, "repetitions");
    const std::string why = attr_string(g, "repetitions.stopped_by");
    EXPECT_NE(attr_string(g, "repetitions.rule").find("at least 12 and at most 400"), std::string::npos) << id;
    EXPECT_EQ(attr_string(g, "status"), "complete") << id;
    H5Gclose(g);
    EXPECT_TRUE(why == "ci_width" || why == "max" || why == "max_time") << why;
    if (why == "ci_width") {
      EXPECT_GE(reps, 12) << id;
    }
    if (why == "max") {
      EXPECT_EQ(reps, 400) << id;
    }
    // Both ranks ran the same repetitions: (warm-up + reps) rows each, every rep on both.
    std::vector<Row> rows = read_samples(file, id);
    ASSERT_EQ(rows.size(), static_cast<std::size_t>(2 * (1 + reps))) << id;
    std::map<int, int> ranks_per_rep;
    std::map<int, long long> cost;
    for (const auto& s : rows) {
      ranks_per_rep[s.rep]++;
      if (!s.warmup) cost[s.rep] = std::max(cost[s.rep], s.end_ns - s.start_ns);
    }
    for (const auto& [rep_, k] : ranks_per_rep) EXPECT_EQ(k, 2) << id << " rep " << rep_;
    // The rule judged the file's own times: narrow enough exactly when it says it stopped by width.
    std::vector<std::int64_t> v;
    for (auto& [rep_, c] : cost) v.push_back(c);
    const double width = d500::median_ci_rel_width(v, 0.95);
    if (why == "ci_width") {
      EXPECT_LE(width, 0.5) << id;
    }
    ASSERT_TRUE(csv.count(id));
    EXPECT_EQ(csv[id]["n"], std::to_string(reps));
    EXPECT_EQ(csv[id]["reps_stopped_by"], why);
    EXPECT_NEAR((std::stod(csv[id]["ci_hi_s"]) - std::stod(csv[id]["ci_lo_s"])) / std::stod(csv[id]["median_s"]), width,
                1e-9);
  }
  H5Fclose(file);
  const std::string md = read_file_text(run / "report.md");
  EXPECT_NE(md.find("- Repetitions: adaptive: repeated until"), std::string::npos) << md;
  EXPECT_NE(md.find("auto: "), std::string::npos) << md;
}

// Packing by time from an earlier run: the points it measured are estimated from their own
// times, the others of a measured backend from its rates, the rest from the model; the jobs'
// estimates fit the limit less the margin; and the packed plan runs.
TEST_F(EndToEnd, PackingByTimeEstimatesFromAnEarlierRunAndThePackedPlanRuns) {
  const std::string first = write("first.toml", "[campaign]\nname = \"first\"\nrepetitions = 8\nwarmups = 2\n" +
                                                    gemm_and_allreduce("48, 64", "4096", 2));
  const fs::path before = dir_ / "before";
  ASSERT_EQ(sh(d500_cmd("plan " + first + " -o " + before.string())).code, 0);
  Cmd r = sh(d500_cmd("run " + before.string()));
  ASSERT_EQ(r.code, 0) << r.out;

  // What the earlier file says of each point, read here with the HDF5 C API: its wall time, and
  // per repetition the slowest rank's time.
  std::map<std::string, double> expect;  // id -> setup + 20 repetitions at the measured mean
  hid_t f = H5Fopen((before / "results" / "job-0000.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  for (const auto& id : point_ids(f)) {
    hid_t g = H5Gopen2(f, ("/points/" + id).c_str(), H5P_DEFAULT);
    const double seconds = attr_double(g, "seconds");
    H5Gclose(g);
    std::map<int, long long> slowest;
    for (const auto& s : read_samples(f, id)) slowest[s.rep] = std::max(slowest[s.rep], s.end_ns - s.start_ns);
    double reps = 0;
    for (auto& [rep, ns] : slowest) reps += static_cast<double>(ns) * 1e-9;
    ASSERT_EQ(slowest.size(), 10u);
    expect[id] = std::max(0.0, seconds - reps) + (3 + 17) * reps / 10;
  }
  H5Fclose(f);

  // The second campaign: the same points with 17 repetitions and 3 warm-ups, a GEMM size not
  // measured (blas: calibrated) and the reference backend (never measured: the model).
  const std::string second =
      write("second.toml",
            "[campaign]\nname = \"second\"\nrepetitions = 17\nwarmups = 3\n[packing]\njob_time = 6\n"
            "margin = 0.5\ntimes_from = [\"before\"]\n"
            "[axes]\nworkload = [\"gemm\", \"allreduce\"]\nbackend = [\"blas\", \"mpi\", \"reference\"]\n"
            "n = [48, 64, 80]\nbytes = [4096]\nranks_per_node = [2]\n"
            "[[exclude]]\nworkload = \"gemm\"\nbackend = \"mpi\"\n"
            "[[exclude]]\nworkload = \"allreduce\"\nbackend = [\"blas\", \"reference\"]\n");
  const fs::path after = dir_ / "after";
  Cmd plan = sh(d500_cmd("plan " + second + " -o " + after.string()));
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("estimates: 3 measured, 1 calibrated, 3 model"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("3 complete point(s) read from " + before.string()), std::string::npos) << plan.out;
  const std::vector<d500::PlannedPoint> planned = d500::read_points_csv(d500::RunLayout(after.string()));
  ASSERT_EQ(planned.size(), 7u);
  // Next fit in plan order, checked on the plan's own estimates: a job holds at most 3 s of them
  // (or one point), and each job's first point would not have fitted the job before. Each
  // reference point is ~2.02 s (2 s + 20 x 2 x 80^3 flops at 1 GFLOP/s), so no two share a job;
  // how many jobs the measured points need depends on how loaded the machine was when the earlier
  // run measured them (milliseconds alone, 1.8 s in all under a CI-shaped load: 3 or 4 jobs).
  std::vector<std::pair<std::string, double>> jobs;  // job id, its estimates' sum
  for (const auto& p : planned) {
    if (!jobs.empty() && jobs.back().first == p.job) {
      jobs.back().second += p.estimate_s;
      EXPECT_LE(jobs.back().second, 3.0 + 1e-3) << p.job << " over 3 s with " << p.canonical;
    } else {
      if (!jobs.empty()) {
        EXPECT_GT(jobs.back().second + p.estimate_s, 3.0 - 1e-3)
            << p.canonical << " would have fitted " << jobs.back().first;
      }
      jobs.emplace_back(p.job, p.estimate_s);
    }
  }
  EXPECT_GE(jobs.size(), 3u);
  EXPECT_NE(
      plan.out.find("packed by time: jobs of at most 3.00 s of estimates (a job's limit 6.00 s less a 50.0% margin), "
                    "next fit in plan order; " +
                    std::to_string(jobs.size()) + " jobs hold"),
      std::string::npos)
      << plan.out;
  int measured = 0;
  for (const auto& p : planned) {
    ASSERT_GE(p.estimate_s, 0) << p.canonical;
    if (auto e = expect.find(p.id); e != expect.end()) {
      ++measured;
      EXPECT_NEAR(p.estimate_s, e->second, 1e-3 + e->second * 1e-3) << p.canonical;  // points.csv keeps 4 digits
    }
    // The model: 2 s a point beside its repetitions at 1 GFLOP/s.
    if (p.canonical.find("gemm:reference") == 0) {
      EXPECT_GT(p.estimate_s, 2.0) << p.canonical;
    }
  }
  EXPECT_EQ(measured, 3);
  Cmd run = sh(d500_cmd("run " + after.string()));
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("points: 7 complete"), std::string::npos) << run.out;
}

// Issue 17: `launches = 3` runs each point in 3 separate jobs (separate mpiruns, one after the
// other), and the report gives the interval across launches beside each launch's own.
TEST_F(EndToEnd, ReplicatedLaunchesRunInSeparateJobsAndTheReportCoversThem) {
  const std::string campaign =
      write("launches.toml", "[campaign]\nname = \"launches\"\nrepetitions = 8\nwarmups = 1\nlaunches = 3\n" +
                                 gemm_and_allreduce("48", "4096", 2));
  fs::path run = dir_ / "run";
  Cmd plan = sh(d500_cmd("plan " + campaign + " -o " + run.string()));
  ASSERT_EQ(plan.code, 0) << plan.out;
  Cmd r = sh(d500_cmd("run " + run.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  // One results file per launch, each holding that launch's two points only.
  for (int launch = 1; launch <= 3; ++launch) {
    const fs::path f = run / "results" / ("job-000" + std::to_string(launch - 1) + ".h5");
    hid_t file = H5Fopen(f.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(file, 0) << f;
    const auto ids = point_ids(file);
    EXPECT_EQ(ids.size(), 2u) << f;
    for (const auto& id : ids) {
      hid_t g = H5Gopen2(file, ("/points/" + id).c_str(), H5P_DEFAULT);
      EXPECT_NE(attr_string(g, "canonical").find("launch=" + std::to_string(launch)), std::string::npos)
          << f << " " << id;
      H5Gclose(g);
    }
    H5Fclose(file);
  }
  Cmd rep = sh(d500_cmd("report " + run.string()));
  ASSERT_EQ(rep.code, 0) << rep.out;
  for (const char* point : {"gemm", "allreduce"})  // a row each in the terminal's Across launches (one backend each)
    EXPECT_TRUE(std::regex_search(rep.out, std::regex(std::string(point) + "[^\n]* 3 +[0-9.]+ [mu]?s \\[")))
        << point << rep.out;
  const std::string md = read_file_text(run / "report.md");
  EXPECT_NE(md.find("## Across launches"), std::string::npos);
  EXPECT_NE(md.find("two-stage: each launch's median, then Student's t interval"), std::string::npos);
  // The interval recomputed from the results.json launch medians.
  Cmd check = sh("/usr/bin/python3 -c \"import json, math, statistics as st; j = json.load(open('" +
                 (run / "results.json").string() +
                 "')); g = j['launches']; assert len(g) == 2, g; m = [math.log(x) for x in g[0]['launch_medians_s']]; "
                 "e = math.exp(sum(m) / 3); assert abs(e / g[0]['estimate_s'] - 1) < 1e-6, (e, g[0]); "
                 "h = 4.302652729911275 * st.stdev(m) / math.sqrt(3); "
                 "assert abs(math.exp(sum(m) / 3 - h) / g[0]['ci_s'][0] - 1) < 1e-6, g[0]; print('ok')\"");
  EXPECT_EQ(check.out, "ok\n") << check.out;
  // A campaign without launches says what its intervals do not cover.
  EXPECT_EQ(md.find("every interval covers only the variation within one launch"), std::string::npos);
}
