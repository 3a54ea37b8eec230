// d500 on a real Slurm cluster: the single-node cluster of launchers/test-cluster.sh, started by
// a CTest fixture (SLURM_CONF names its configuration, in the cluster's directory). Jobs run the worker with
// `srun --mpi=pmix`; faults are real: a job past its time limit, a cancelled job, slurmctld down.
#include <chrono>
#include <thread>

#include "common/text.hpp"
#include "helpers.hpp"

using namespace d500test;
using d500::read_file;

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
  // No task queued, running or still finishing: a job at its time limit shows COMPLETING while
  // slurmd kills it and runs the epilog, and only then TIMEOUT.
  static bool settled(const std::string& s) { return s.find("; in flight 0;") != std::string::npos; }
  static std::string cluster() { return fs::path(std::getenv("SLURM_CONF")).parent_path().string(); }
  static Cmd cluster_cmd(const std::string& what, const std::string& arg = "") {
    return sh("bash " + std::string(D500_SOURCE_DIR) + "/launchers/test-cluster.sh " + what + " " + cluster() + " " + arg);
  }
  static std::vector<fs::path> files_in(const fs::path& d) {
    std::vector<fs::path> out;
    if (fs::is_directory(d))
      for (const auto& e : fs::directory_iterator(d)) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }
  // The Slurm id of the run's first submission.
  static std::string first_job_id(const fs::path& run) {
    return sh("awk 'NR==2{printf \"%s\", $1}' " + (run / "slurm" / "submissions.tsv").string()).out;
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
  EXPECT_NE(st.find("summary: jobs 1 COMPLETED; in flight 0; points 2/2 complete"), std::string::npos) << st;

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
  wait_status(run, [](const std::string& s) { return s.find("points: 1 complete, 0 failed (validation or backend), 1 incomplete") != std::string::npos; }, 120);
  Cmd during = sh(d500_cmd("submit --resume " + run.string()));
  EXPECT_NE(during.out.find("nothing to submit: 1 points finished, 1 queued or running"), std::string::npos) << during.out;

  std::string st = wait_status(run, settled, 180);
  EXPECT_NE(st.find("TIMEOUT"), std::string::npos) << st;
  EXPECT_NE(st.find("points: 1 complete, 0 failed (validation or backend), 1 incomplete, 0 missing"), std::string::npos) << st;
  for (const auto& e : fs::directory_iterator(run / "results")) {
    Cmd check = sh(d500_cmd("check " + e.path().string()));
    EXPECT_EQ(check.code, 0) << check.out;
    EXPECT_NE(check.out.find("1 complete, 1 incomplete; job running"), std::string::npos) << check.out;
  }
  // The job trapped Slurm's SIGTERM at the limit and recorded it itself.
  const auto records = files_in(run / "slurm" / "attempts");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_NE(read_file(records[0].string()).find("verdict=timed-out"), std::string::npos) << read_file(records[0].string());

  // Slurm forgets the job (MinJobAge), and d500 never looked at its end (no observations): the
  // job's own record still says it timed out, so the retry below gets the longer limit.
  fs::remove(run / "slurm" / "observed.tsv");
  ASSERT_EQ(cluster_cmd("min-job-age", "2").code, 0);
  const std::string id = first_job_id(run);
  bool purged = false;
  for (int i = 0; i < 120 && !purged; ++i) {
    purged = sh("scontrol show job " + id).code != 0;
    if (!purged) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_EQ(cluster_cmd("min-job-age", "3600").code, 0);
  ASSERT_TRUE(purged) << "Slurm kept job " << id;
  st = sh(d500_cmd("status " + run.string())).out;
  EXPECT_NE(st.find("TIMEOUT  limit 00:01:00  time limit reached (SIGTERM at"), std::string::npos) << st;
  EXPECT_NE(st.find("[not known to Slurm: from the job's own record]"), std::string::npos) << st;
  EXPECT_NE(st.find("DUE TO TIME LIMIT"), std::string::npos) << "the attempt's last output: " << st;

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
  EXPECT_NE(st.find("points: 1 complete, 0 failed (validation or backend), 1 incomplete, 0 missing"), std::string::npos) << st;
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
  EXPECT_NE(down.out.find("nothing was submitted"), std::string::npos) << down.out;
  EXPECT_EQ(lines(run / "slurm" / "submissions.tsv"), 0);

  Cmd up = sh(d500_cmd("submit " + run.string()));
  ASSERT_EQ(up.code, 0) << up.out;
  EXPECT_EQ(lines(run / "slurm" / "submissions.tsv"), 1);
  std::string st = wait_status(run, settled, 120);
  EXPECT_NE(st.find("points: 2 complete"), std::string::npos) << st;
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
  EXPECT_NE(st.find("points: 0 complete, 0 failed (validation or backend), 1 incomplete"), std::string::npos) << st;
  std::vector<fs::path> first;
  for (const auto& e : fs::directory_iterator(run / "results")) first.push_back(e.path());
  ASSERT_EQ(first.size(), 1u);
  Cmd check = sh(d500_cmd("check " + first[0].string()));
  EXPECT_EQ(check.code, 0) << check.out;
  // Slurm's SIGTERM at the limit (KillWait = 5 s before its SIGKILL) made the ranks checkpoint
  // before their next step: the attempt's last checkpoint is where the next one starts.
  std::string logs;
  for (const auto& e : fs::directory_iterator(run / "logs")) logs += read_file_text(e.path());
  EXPECT_NE(logs.find("SIGTERM during point"), std::string::npos) << logs;
  const long long checkpointed = last_line_number(logs, "d500:checkpoint ");
  ASSERT_GT(checkpointed, 0) << logs;

  Cmd resume = sh(d500_cmd("submit --resume " + run.string()));
  ASSERT_EQ(resume.code, 0) << resume.out;
  st = wait_status(run, [](const std::string& s) { return settled(s) && s.find("points: 1 complete") != std::string::npos; }, 300);
  EXPECT_NE(st.find("COMPLETED"), std::string::npos) << st;

  fs::path second;
  for (const auto& e : fs::directory_iterator(run / "results"))
    if (e.path() != first[0]) second = e.path();
  ASSERT_FALSE(second.empty());
  const OnePoint point(second);
  ASSERT_GE(point.group, 0);
  const hid_t g = point.group;
  EXPECT_EQ(attr_string(g, "status"), "complete");
  const long long resumed = attr_int(g, "train.resumed_at_step");
  EXPECT_GT(resumed, 0);
  EXPECT_EQ(resumed, checkpointed);
  EXPECT_NE(attr_string(g, "train.resumed_from").find(first[0].filename().string()), std::string::npos) << attr_string(g, "train.resumed_from");
  EXPECT_NE(attr_string(g, "train.stop_reason").find("time budget"), std::string::npos) << attr_string(g, "train.stop_reason");
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

// A requeue (scontrol requeue, or Slurm's own after a node failure) reruns the job under the
// same id: each attempt has its own results file and record, the log keeps both, and the
// report takes the attempt that finished.
TEST_F(Slurm, ARequeuedJobKeepsEveryAttemptAndTheReportTakesTheOneThatFinished) {
  fs::path run = plan(R"([campaign]
name = "slurm-requeue"
repetitions = 12000
warmups = 1
template = "slurm"
[slurm]
time_limit = 5
[axes]
workload = ["gemm"]
backend = ["reference"]
n = [256]
)");
  ASSERT_EQ(sh(d500_cmd("submit " + run.string())).code, 0);
  const std::string id = first_job_id(run);
  // Requeue once the first attempt has flushed samples; Slurm holds a requeued job 2 minutes,
  // which the test lifts.
  wait_status(run, [&](const std::string&) { return !files_in(run / "results").empty(); }, 60);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  Cmd rq = sh("scontrol requeue " + id + " && sleep 1 && scontrol update jobid=" + id + " StartTime=now");
  ASSERT_EQ(rq.code, 0) << rq.out;
  std::string st = wait_status(run, [](const std::string& s) { return settled(s) && s.find("COMPLETED") != std::string::npos; }, 180);
  EXPECT_NE(st.find("COMPLETED  limit 00:05:00  requeued 1x  [2 attempts]"), std::string::npos) << st;
  EXPECT_NE(st.find("points: 1 complete"), std::string::npos) << st;
  const auto results = files_in(run / "results");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].filename().string(), "job-0000.slurm-" + id + ".0.h5");
  EXPECT_EQ(results[1].filename().string(), "job-0000.slurm-" + id + ".1.h5");
  EXPECT_NE(sh(d500_cmd("check " + results[0].string())).out.find("1 incomplete"), std::string::npos);
  EXPECT_EQ(files_in(run / "slurm" / "attempts").size(), 2u);
  const std::string log = read_file(files_in(run / "logs").at(0).string());
  EXPECT_NE(log.find("d500: attempt 0 of Slurm job " + id), std::string::npos) << log;
  EXPECT_NE(log.find("DUE TO JOB REQUEUE"), std::string::npos) << log;
  EXPECT_NE(log.find("d500: attempt 1 of Slurm job " + id), std::string::npos) << log;
  ASSERT_EQ(sh(d500_cmd("report " + run.string())).code, 0);
  for (auto& [pid, row] : read_csv(run / "results.csv")) {
    EXPECT_EQ(row["status"], "complete") << pid;
    EXPECT_NE(row["file"].find(".1.h5"), std::string::npos) << row["file"];
  }
}

// A job that fails for its own reasons (here a module system the machine lacks: exit 127)
// shows its exit code and last lines in status and report, and runs again at most max_retries
// times.
TEST_F(Slurm, AFailingJobShowsItsCauseAndIsRetriedAtMostMaxRetriesTimes) {
  fs::path run = plan(R"([campaign]
name = "slurm-fail"
repetitions = 10
warmups = 1
template = "slurm"
[slurm]
time_limit = 5
max_retries = 1
modules = ["gcc/12.2"]
[axes]
workload = ["gemm"]
backend = ["reference"]
n = [64]
)");
  ASSERT_EQ(sh(d500_cmd("submit " + run.string())).code, 0);
  std::string st = wait_status(run, settled, 60);
  EXPECT_NE(st.find("FAILED (NonZeroExitCode)  limit 00:05:00  exit 127 (command not found)"), std::string::npos) << st;
  EXPECT_NE(st.find("| "), std::string::npos) << st;
  EXPECT_NE(st.find("module: command not found"), std::string::npos) << st;
  EXPECT_NE(st.find("job-failed"), std::string::npos) << st;
  Cmd again = sh(d500_cmd("submit --resume " + run.string()));
  EXPECT_NE(again.out.find("submitted job"), std::string::npos) << "one retry: " << again.out;
  wait_status(run, settled, 60);
  Cmd third = sh(d500_cmd("submit --resume " + run.string()));
  EXPECT_EQ(third.code, 0) << third.out;
  EXPECT_NE(third.out.find("job-0000: failed 2 time(s), more than max_retries = 1; not resubmitted"), std::string::npos) << third.out;
  EXPECT_NE(third.out.find("module: command not found"), std::string::npos) << third.out;
  EXPECT_NE(third.out.find("nothing to submit"), std::string::npos) << third.out;
  EXPECT_EQ(lines(run / "slurm" / "submissions.tsv"), 2);
  ASSERT_EQ(sh(d500_cmd("report " + run.string())).code, 0);
  for (auto& [pid, row] : read_csv(run / "results.csv")) {
    EXPECT_EQ(row["status"], "job-failed") << pid;
    EXPECT_NE(row["status_reason"].find("FAILED: exit 127 (command not found); last output:"), std::string::npos) << row["status_reason"];
  }
}

// Exactly once: two concurrent submits of one run make one submission; a submit whose RPC meets
// a hung controller (stopped, not down) times out although Slurm accepts the job when it wakes,
// and `submit --resume` finds that job by the run's tag and records it instead of submitting again.
TEST_F(Slurm, ExactlyOnceUnderConcurrentSubmitsAndAHungController) {
  const std::string campaign = kHead + "[slurm]\ntime_limit = 5\n[axes]\nworkload = [\"gemm\"]\nbackend = [\"blas\"]\nn = [40]\n";
  fs::path run = plan(campaign);
  Cmd both = sh("(" + d500_cmd("submit " + run.string()) + ") & (" + d500_cmd("submit " + run.string()) + "); wait");
  EXPECT_EQ(lines(run / "slurm" / "submissions.tsv"), 1) << both.out;
  wait_status(run, settled, 60);

  fs::remove_all(run);
  run = plan(campaign);
  const fs::path hook = dir_ / "hang.sh";
  std::ofstream(hook) << "#!/bin/sh\nexec bash " << D500_SOURCE_DIR << "/launchers/test-cluster.sh hang-controller " << cluster() << "\n";
  fs::permissions(hook, fs::perms::owner_all);
  Cmd hung = sh("D500_TEST_HOOK_BEFORE_SUBMIT=" + hook.string() + " " + d500_cmd("submit " + run.string()));
  ASSERT_EQ(cluster_cmd("resume-controller").code, 0);
  EXPECT_EQ(hung.code, 1) << hung.out;
  EXPECT_NE(hung.out.find("timed out"), std::string::npos) << hung.out;
  EXPECT_NE(hung.out.find("finds by this run's tag"), std::string::npos) << hung.out;
  EXPECT_EQ(lines(run / "slurm" / "submissions.tsv"), 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  Cmd resume = sh(d500_cmd("submit --resume " + run.string()));
  EXPECT_EQ(resume.code, 0) << resume.out;
  EXPECT_NE(resume.out.find("with this run's tag"), std::string::npos) << resume.out;
  EXPECT_EQ(resume.out.find("submitted job"), std::string::npos) << resume.out;
  EXPECT_EQ(lines(run / "slurm" / "submissions.tsv"), 1);
  const std::string st = wait_status(run, settled, 60);
  EXPECT_NE(st.find("points: 1 complete"), std::string::npos) << st;
  EXPECT_EQ(files_in(run / "results").size(), 1u) << "one job ran";
}

// `d500 submit` gives Slurm what the #SBATCH lines say, as sbatch does: the Daint template's
// --hint=nomultithread and --cpus-per-task reach the job (its resources and its environment).
// A throttled array shows libslurm's reason, and a task cancelled while pending reads CANCELLED.
TEST_F(Slurm, SubmitCarriesWhatSbatchCarriesAndSlurmsOwnReasons) {
  fs::path run = plan(R"([campaign]
name = "slurm-same"
repetitions = 6000
warmups = 1
template = "daint"
points_per_job = 1
[slurm]
time_limit = 5
partition = "debug"
cpus_per_task = 1
throttle = 1
[axes]
workload = ["gemm"]
backend = ["reference"]
n = [256, 255, 254]
)");
  ASSERT_EQ(sh(d500_cmd("submit " + run.string())).code, 0);
  const std::string id = first_job_id(run);
  std::string st = wait_status(run, [](const std::string& s) { return s.find("RUNNING") != std::string::npos; }, 60);
  EXPECT_NE(st.find("PENDING (JobArrayTaskLimit)"), std::string::npos) << st;
  ASSERT_EQ(sh("scancel " + id + "_2").code, 0);
  Cmd by_hand = sh("cd " + run.string() + " && sbatch --parsable jobs/job-0000.sh");
  ASSERT_EQ(by_hand.code, 0) << by_hand.out;
  const std::string hand_id = by_hand.out.substr(0, by_hand.out.find_first_of("\n;"));
  st = wait_status(run, settled, 120);
  EXPECT_NE(st.find(id + "_2  job-0002  CANCELLED (cancelled before it started"), std::string::npos) << st;
  wait_status(run, [&](const std::string&) { return sh("scontrol show job " + hand_id).out.find("COMPLETED") != std::string::npos; }, 60);
  // The resources Slurm gave both ways, field by field.
  auto fields = [](const std::string& job) {
    std::map<std::string, std::string> f;
    std::istringstream in(sh("scontrol -o show job " + job).out);
    for (std::string w; in >> w;) {
      const auto eq = w.find('=');
      if (eq != std::string::npos) f[w.substr(0, eq)] = w.substr(eq + 1);
    }
    return f;
  };
  auto mine = fields(id + "_0"), theirs = fields(hand_id);
  for (const char* k : {"NumNodes", "NumCPUs", "NumTasks", "CPUs/Task", "ReqB:S:C:T", "NtasksPerN:B:S:C", "MinCPUsNode",
                        "MinMemoryNode", "Features", "OverSubscribe", "Partition", "TRES", "Contiguous"}) {
    EXPECT_FALSE(theirs[k].empty()) << k;
    EXPECT_EQ(mine[k], theirs[k]) << k;
  }
  EXPECT_EQ(theirs["ReqB:S:C:T"], "0:0:*:1") << "--hint=nomultithread: one thread per core";
  // The environment each job's worker recorded.
  std::map<std::string, std::map<std::string, std::string>> env;
  for (const auto& f : files_in(run / "results")) {
    const std::string name = f.filename().string();
    const std::string who = name.find(".slurm-" + hand_id + ".") != std::string::npos ? "sbatch"
                            : name.rfind("job-0000.", 0) == 0                          ? "d500"
                                                                                      : "";
    if (who.empty()) continue;
    hid_t h = H5Fopen(f.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(h, 0);
    hid_t g = H5Gopen2(h, "env", H5P_DEFAULT);
    for (const char* v : {"OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK", "SLURM_HINT", "SLURM_THREADS_PER_CORE", "SLURM_NTASKS_PER_NODE"}) {
      const std::string a = std::string("env.") + v;
      env[who][v] = H5Aexists(g, a.c_str()) > 0 ? attr_string(g, a.c_str()) : "(unset)";
    }
    H5Gclose(g);
    H5Fclose(h);
  }
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env["d500"], env["sbatch"]);
  EXPECT_EQ(env["d500"]["SLURM_CPUS_PER_TASK"], "1");
  EXPECT_EQ(env["d500"]["OMP_NUM_THREADS"], "1");
  EXPECT_EQ(env["d500"]["SLURM_HINT"], "nomultithread");
}

// On the three-node cluster (launchers/test-cluster.sh start DIR 3: each slurmd in its own
// network and UTS namespace): the Daint template's 2-node job through `d500 submit` and
// `srun --mpi=pmix`, its ranks on two hosts; then a node killed under a running 2-node job, which
// Slurm ends NODE_FAIL, and `submit --resume` runs the job again on the other two nodes.
TEST_F(Slurm, MultiNodeCampaignAcrossHostsAndAFailedNodeIsExcludedOnResume) {
  // CTest's fixture starts it beside the single-node cluster: <build>/test-cluster-3.
  const std::string multi = (fs::path(cluster()).parent_path() / "test-cluster-3" / "slurm.conf").string();
  ASSERT_TRUE(fs::exists(multi)) << multi << ": run through ctest (the slurm_cluster fixture starts both clusters)";
  const char* conf = multi.c_str();
  setenv("SLURM_CONF", conf, 1);
  fs::path run = plan(R"([campaign]
name = "slurm-two-nodes"
repetitions = 50
warmups = 2
template = "daint"
[slurm]
time_limit = 5
partition = "debug"
[axes]
workload = ["allreduce"]
backend = ["mpi"]
bytes = [65536]
nodes = [2]
ranks_per_node = [1]
)");
  ASSERT_EQ(sh(d500_cmd("submit " + run.string())).code, 0);
  std::string st = wait_status(run, settled, 120);
  EXPECT_NE(st.find("points: 1 complete"), std::string::npos) << st;
  const auto results = files_in(run / "results");
  ASSERT_EQ(results.size(), 1u);
  Cmd hosts = sh("/usr/bin/python3 -c \"import h5py; print(' '.join(h.decode() for h in h5py.File('" + results[0].string() +
                 "', 'r')['env/hosts'][:]))\"");
  ASSERT_EQ(hosts.code, 0) << hosts.out;
  std::istringstream hs(hosts.out);
  std::vector<std::string> per_rank{std::istream_iterator<std::string>(hs), std::istream_iterator<std::string>()};
  ASSERT_EQ(per_rank.size(), 2u) << hosts.out;
  EXPECT_NE(per_rank[0], per_rank[1]) << "rank 0 and rank 1 on two hosts: " << hosts.out;
  for (const auto& h : per_rank) EXPECT_EQ(h.rfind("d500n", 0), 0u) << h;
  std::cout << "hosts per rank: " << hosts.out;

  // A long 2-node job that Slurm may not requeue (the template says --no-requeue): its second node dies.
  const fs::path tpl = dir_ / "tpl";
  fs::create_directories(tpl);
  std::string text = read_file(std::string(D500_SOURCE_DIR) + "/templates/slurm.sh.in");
  text.replace(text.find("#SBATCH --open-mode=append\n"), 27, "#SBATCH --open-mode=append\n#SBATCH --no-requeue\n");
  std::ofstream(tpl / "norequeue.sh.in") << text;
  fs::path long_run = dir_ / "long";
  const std::string c = write("long.toml", R"([campaign]
name = "slurm-node-fail"
repetitions = 1000000
warmups = 1
template = "norequeue"
templates_dir = "tpl"
[slurm]
time_limit = 5
[axes]
workload = ["allreduce"]
backend = ["mpi"]
bytes = [4096]
nodes = [2]
ranks_per_node = [1]
)");
  ASSERT_EQ(sh(d500_cmd("plan " + c + " -o " + long_run.string())).code, 0);
  ASSERT_EQ(sh(d500_cmd("submit " + long_run.string())).code, 0);
  wait_status(long_run, [](const std::string& s) { return s.find("RUNNING") != std::string::npos; }, 60);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const std::string id = first_job_id(long_run);
  const std::string nodelist = sh("squeue -h -o %N -j " + id).out;
  const std::string victim = nodelist.find("[") != std::string::npos
                                 ? "d500n" + nodelist.substr(nodelist.find_first_of(",-") + 1, 1)
                                 : nodelist.substr(0, nodelist.find('\n'));
  Cmd kill = sh("bash " + std::string(D500_SOURCE_DIR) + "/launchers/test-cluster.sh fail-node " +
                fs::path(conf).parent_path().string() + " " + victim);
  ASSERT_EQ(kill.code, 0) << kill.out;
  st = wait_status(long_run, [](const std::string& s) { return s.find("NODE_FAIL") != std::string::npos; }, 120);
  EXPECT_NE(st.find("node failure on " + victim), std::string::npos) << "only the failed node, not " << nodelist << ": " << st;
  Cmd resume = sh(d500_cmd("submit --resume " + long_run.string()));
  EXPECT_EQ(resume.code, 0) << resume.out;
  EXPECT_NE(resume.out.find("excluding node " + victim + " (--exclude): job " + id + " ended NODE_FAIL on it"), std::string::npos)
      << resume.out;
  std::string second;
  {
    std::istringstream in(read_file((long_run / "slurm" / "submissions.tsv").string()));
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') second = line.substr(0, line.find('\t'));
  }
  ASSERT_NE(second, id);
  wait_status(long_run, [](const std::string& s) { return s.find("RUNNING") != std::string::npos; }, 60);
  const std::string job = sh("scontrol -o show job " + second).out;
  EXPECT_NE(job.find("ExcNodeList=" + victim), std::string::npos) << job;
  EXPECT_EQ(job.find(" NodeList=" + victim), std::string::npos) << job;
  EXPECT_EQ(sh(d500_cmd("cancel " + long_run.string())).code, 0);
  wait_status(long_run, settled, 60);
  // The node comes back for whatever runs next.
  sh("scontrol update nodename=" + victim + " state=resume; D500_TEST_SLURMCTLD_PORT=16827 bash " + std::string(D500_SOURCE_DIR) +
     "/launchers/test-cluster.sh start " + fs::path(conf).parent_path().string() + " 3");
}
