// d500 on a real Slurm cluster: the single-node cluster of launchers/test-cluster.sh, started by
// a CTest fixture (SLURM_CONF names its configuration, in the cluster's directory). Jobs run the worker with
// `srun --mpi=pmix`; faults are real: a job past its time limit, a cancelled job, slurmctld down.
#include <chrono>
#include <thread>

#include "helpers.hpp"

using namespace d500test;

namespace {

class Slurm : public ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    if (!std::getenv("SLURM_CONF")) GTEST_FAIL() << "SLURM_CONF unset: run through ctest (the slurm fixture starts the cluster)";
  }
  fs::path plan(const std::string& campaign) {
    std::string c = write("c.toml", campaign);
    fs::path run = dir_ / "run";
    Cmd p = sh(d500_cmd("plan " + c + " -o " + run.string()));
    EXPECT_EQ(p.code, 0) << p.out;
    return run;
  }
  // Polls `d500 status` until `done(output)` or the deadline; returns the last output.
  std::string wait_status(const fs::path& run, const std::function<bool(const std::string&)>& done, int seconds) {
    std::string out;
    for (int i = 0; i < seconds * 2; ++i) {
      out = sh(d500_cmd("status " + run.string())).out;
      if (done(out)) return out;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    ADD_FAILURE() << "gave up waiting after " << seconds << " s; last status:\n" << out;
    return out;
  }
  static bool settled(const std::string& s) {
    return s.find("PENDING") == std::string::npos && s.find("RUNNING") == std::string::npos;
  }
  static int lines(const fs::path& f) {
    std::ifstream in(f);
    int n = 0;
    for (std::string l; std::getline(in, l);) n += !l.empty() && l[0] != '#';
    return n;
  }
};

const std::string kHead = R"([campaign]
name = "slurm-e2e"
repetitions = 6
warmups = 1
template = "slurm"
)";

}  // namespace

TEST_F(Slurm, PlanSubmitStatusReportEndToEnd) {
  fs::path run = plan(kHead + "[slurm]\npartition = \"debug\"\ntime_limit = \"00:05:00\"\n" +
                      gemm_and_allreduce("64", "4096", 2));
  Cmd sub = sh(d500_cmd("submit " + run.string()));
  ASSERT_EQ(sub.code, 0) << sub.out;
  EXPECT_NE(sub.out.find("submitted job"), std::string::npos) << sub.out;
  EXPECT_EQ(lines(run / "slurm" / "submissions.tsv"), 1);
  std::string st = wait_status(run, settled, 120);
  EXPECT_NE(st.find("summary: jobs 1 COMPLETED; points 2/2 done"), std::string::npos) << st;

  // The worker ran under srun with 2 ranks, and the file knows its Slurm job.
  fs::path h5;
  for (const auto& e : fs::directory_iterator(run / "results")) h5 = e.path();
  EXPECT_NE(h5.filename().string().find(".slurm-"), std::string::npos) << h5;
  hid_t f = H5Fopen(h5.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_EQ(attr_int(f, "ranks"), 2);
  hid_t env = H5Gopen2(f, "env", H5P_DEFAULT);
  EXPECT_GT(H5Aexists(env, "env.SLURM_JOB_ID"), 0);
  H5Gclose(env);
  H5Fclose(f);

  Cmd rep = sh(d500_cmd("report " + run.string()));
  EXPECT_EQ(rep.code, 0) << rep.out;
  auto csv = read_csv(run / "results.csv");
  for (auto& [id, row] : csv) EXPECT_EQ(row["status"], "complete") << id;

  // Submitting twice is refused; resuming finds nothing left and submits nothing.
  Cmd again = sh(d500_cmd("submit " + run.string()));
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.out.find("already submitted"), std::string::npos) << again.out;
  Cmd resume = sh(d500_cmd("submit --resume " + run.string()));
  EXPECT_EQ(resume.code, 0) << resume.out;
  EXPECT_NE(resume.out.find("nothing to submit: 2 points finished"), std::string::npos) << resume.out;
  EXPECT_EQ(lines(run / "slurm" / "submissions.tsv"), 1);
}

TEST_F(Slurm, TimedOutJobKeepsItsSamplesAndResumeRerunsOnlyWhatIsLeftThenCancel) {
  // A quick point, then one that would run for an hour: the 1-minute limit kills the job.
  fs::path run = plan(R"([campaign]
name = "slurm-timeout"
repetitions = 100000
warmups = 1
template = "slurm"
[slurm]
time_limit = 1
retry_time_factor = 2
max_retries = 1
[axes]
workload = ["gemm"]
backend = ["blas", "reference"]
n = [16, 480]
[[zip]]
axes = ["backend", "n"]
)");
  Cmd sub = sh(d500_cmd("submit " + run.string()));
  ASSERT_EQ(sub.code, 0) << sub.out;
  // While the slow point runs, resume submits nothing: the point is queued or running.
  wait_status(run, [](const std::string& s) { return s.find("points: 1 done, 1 incomplete") != std::string::npos; }, 120);
  Cmd during = sh(d500_cmd("submit --resume " + run.string()));
  EXPECT_NE(during.out.find("nothing to submit: 1 points finished, 1 queued or running"), std::string::npos) << during.out;

  std::string st = wait_status(run, settled, 180);
  EXPECT_NE(st.find("TIMEOUT"), std::string::npos) << st;
  EXPECT_NE(st.find("points: 1 done, 1 incomplete, 0 missing"), std::string::npos) << st;
  for (const auto& e : fs::directory_iterator(run / "results")) {
    Cmd check = sh(d500_cmd("check " + e.path().string()));
    EXPECT_EQ(check.code, 0) << check.out;
    EXPECT_NE(check.out.find("1 complete, 1 incomplete; job running"), std::string::npos) << check.out;
  }

  // Resume: only the unfinished point, with the limit doubled.
  Cmd resume = sh(d500_cmd("submit --resume " + run.string()));
  ASSERT_EQ(resume.code, 0) << resume.out;
  EXPECT_NE(resume.out.find("time limit 00:02:00"), std::string::npos) << resume.out;
  std::string spec = sh("cat " + (run / "jobs" / "job-0000.r1.toml").string()).out;
  EXPECT_EQ(spec.find("gemm:blas"), std::string::npos) << spec;
  EXPECT_NE(spec.find("gemm:reference"), std::string::npos) << spec;
  EXPECT_EQ(lines(run / "slurm" / "submissions.tsv"), 2);

  wait_status(run, [](const std::string& s) { return s.find("RUNNING") != std::string::npos; }, 60);
  Cmd cancel = sh(d500_cmd("cancel " + run.string()));
  EXPECT_EQ(cancel.code, 0) << cancel.out;
  EXPECT_NE(cancel.out.find("1 submission(s) cancelled"), std::string::npos) << cancel.out;
  st = wait_status(run, settled, 60);
  EXPECT_NE(st.find("CANCELLED"), std::string::npos) << st;
  EXPECT_NE(st.find("points: 1 done, 1 incomplete, 0 missing"), std::string::npos) << st;
}

TEST_F(Slurm, ControllerDownAtSubmitRecordsNothingAndALaterSubmitDoesNotDuplicate) {
  fs::path run = plan(kHead + R"(
[slurm]
time_limit = 5
[axes]
workload = ["gemm"]
backend = ["blas"]
n = [32, 48]
)");
  // The cluster's directory holds its slurm.conf.
  const std::string cluster = fs::path(std::getenv("SLURM_CONF")).parent_path().string();
  const std::string script = std::string(D500_SOURCE_DIR) + "/launchers/test-cluster.sh";
  ASSERT_EQ(sh("bash " + script + " stop-controller " + cluster).code, 0);
  Cmd down = sh(d500_cmd("submit " + run.string()));
  ASSERT_EQ(sh("bash " + script + " start-controller " + cluster).code, 0);
  EXPECT_EQ(down.code, 1) << down.out;
  EXPECT_NE(down.out.find("is slurmctld running"), std::string::npos) << down.out;
  EXPECT_NE(down.out.find("0 of 1 submission(s) were accepted"), std::string::npos) << down.out;
  EXPECT_EQ(lines(run / "slurm" / "submissions.tsv"), 0);

  Cmd up = sh(d500_cmd("submit " + run.string()));
  ASSERT_EQ(up.code, 0) << up.out;
  EXPECT_EQ(lines(run / "slurm" / "submissions.tsv"), 1);
  std::string st = wait_status(run, settled, 120);
  EXPECT_NE(st.find("points: 2 done"), std::string::npos) << st;
}

// The issue's case: a training run killed at its Slurm time limit resumes with `submit --resume`
// from its checkpoint, and its time budget counts training time across the two attempts.
TEST_F(Slurm, ATrainingRunKilledAtItsTimeLimitResumesFromItsCheckpointAndSpendsItsBudgetOnce) {
  // 150 s of training: the 1-minute limit (enforced within about 30 s by slurmctld) ends the
  // first attempt part-way, whatever the speed; the second (3 minutes) has time for the rest.
  fs::path run = plan(R"([campaign]
name = "slurm-train"
repetitions = 1
warmups = 2
template = "slurm"
[slurm]
time_limit = 1
retry_time_factor = 3
max_retries = 1
[fixed]
workload = "train"
network = "lenet5"
backend = "reference"
dataset = "synthetic"
synthetic_samples = 4096
batch = 32
epochs = 0
time_budget = 150
eval_interval_steps = 200
eval_samples = 128
checkpoint_interval = 5
seed = 4
)");
  Cmd sub = sh(d500_cmd("submit " + run.string()));
  ASSERT_EQ(sub.code, 0) << sub.out;
  std::string st = wait_status(run, settled, 240);
  EXPECT_NE(st.find("TIMEOUT"), std::string::npos) << st;
  EXPECT_NE(st.find("points: 0 done, 1 incomplete"), std::string::npos) << st;
  std::vector<fs::path> first;
  for (const auto& e : fs::directory_iterator(run / "results")) first.push_back(e.path());
  ASSERT_EQ(first.size(), 1u);
  Cmd check = sh(d500_cmd("check " + first[0].string()));
  EXPECT_EQ(check.code, 0) << check.out;

  Cmd resume = sh(d500_cmd("submit --resume " + run.string()));
  ASSERT_EQ(resume.code, 0) << resume.out;
  st = wait_status(run, [](const std::string& s) { return settled(s) && s.find("points: 1 done") != std::string::npos; }, 300);
  EXPECT_NE(st.find("COMPLETED"), std::string::npos) << st;

  fs::path second;
  for (const auto& e : fs::directory_iterator(run / "results"))
    if (e.path() != first[0]) second = e.path();
  ASSERT_FALSE(second.empty());
  hid_t f = H5Fopen(second.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const std::vector<std::string> ids = point_ids(f);
  ASSERT_EQ(ids.size(), 1u);
  hid_t g = H5Gopen2(f, ("points/" + ids[0]).c_str(), H5P_DEFAULT);
  EXPECT_EQ(attr_string(g, "status"), "complete");
  const long long resumed = attr_int(g, "train.resumed_at_step");
  EXPECT_GT(resumed, 0);
  EXPECT_NE(attr_string(g, "train.resumed_from").find(first[0].filename().string()), std::string::npos) << attr_string(g, "train.resumed_from");
  EXPECT_NE(attr_string(g, "train.stop_reason").find("time budget"), std::string::npos) << attr_string(g, "train.stop_reason");
  H5Gclose(g);
  H5Fclose(f);
  // The budget is spent once: 150 s of training across both attempts, plus at most the last step.
  Cmd secs = sh("/usr/bin/python3 -c \"\nimport h5py\ng = list(h5py.File('" + second.string() + "', 'r')['points'].values())[0]\n"
                "e = g['events'][:]\nsteps = list(e['step'])\nprint(g.attrs['train.training_seconds'], int(all(a < b for a, b in zip(steps, steps[1:]))), "
                "int(steps[0] == 200))\n\"");
  ASSERT_EQ(secs.code, 0) << secs.out;
  double training_s = 0;
  int increasing = 0, from_the_start = 0;
  ASSERT_EQ(std::sscanf(secs.out.c_str(), "%lf %d %d", &training_s, &increasing, &from_the_start), 3) << secs.out;
  EXPECT_GE(training_s, 150.0);
  EXPECT_LT(training_s, 150.5);
  EXPECT_EQ(increasing, 1) << "the curve's steps, copied then continued, rise";
  EXPECT_EQ(from_the_start, 1) << "the curve starts at the first attempt's first evaluation";
}
