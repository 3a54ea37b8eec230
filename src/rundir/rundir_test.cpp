// The run directory's layout, its points.csv, and the Slurm submission records: what is
// written is read back, and damage is an error naming the file, line and column.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "common/error.hpp"
#include "common/text.hpp"
#include "rundir/attempts.hpp"
#include "rundir/layout.hpp"
#include "rundir/lock.hpp"
#include "rundir/state.hpp"
#include "rundir/submissions.hpp"

namespace fs = std::filesystem;

namespace d500 {
namespace {

class RunDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("d500-rundir-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void put(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(RunDirTest, LayoutNamesEveryFileAndListsJobsAndResults) {
  const RunLayout d((dir_ / "run" / "").string());  // a trailing slash names the same directory
  EXPECT_EQ(d.root(), dir_ / "run");
  EXPECT_EQ(d.job_spec("job-0001"), dir_ / "run" / "jobs" / "job-0001.toml");
  EXPECT_EQ(d.results_file("job-0001"), dir_ / "run" / "results" / "job-0001.h5");
  EXPECT_EQ(d.submit_list(3), dir_ / "run" / "slurm" / "submit-3.list");
  EXPECT_EQ(RunLayout::of_spec(d.job_spec("job-0001").string()).root(), d.root());
  EXPECT_NE(error_of([&] { d.require_plan("run"); }).find("run: not a d500 plan directory (no plan.toml)"),
            std::string::npos);

  for (const char* f : {"job-0001.sh", "job-0000.sh", "job-0000.toml", "job-0000.status"}) put(d.jobs_dir() / f, "");
  EXPECT_EQ(d.job_ids(), (std::vector<std::string>{"job-0000", "job-0001"}));
  for (const char* f : {"job-0000.h5", "job-0000.h5.prev-1", "notes.txt", "job-0001.slurm-7.h5"})
    put(d.results_dir() / f, "");
  const auto files = d.results_files();
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(fs::path(files[0]).filename(), "job-0000.h5");
  EXPECT_EQ(fs::path(files[1]).filename(), "job-0000.h5.prev-1");

  put(d.plan_file(), "[plan]\nlauncher = \"slurm\"\n");
  EXPECT_EQ(d.launcher(), "slurm");
  put(d.plan_file(), "[plan\nlauncher = 1\n");
  EXPECT_NE(error_of([&] { d.launcher(); }).find(d.plan_file().string() + ":1:"), std::string::npos);
}

TEST_F(RunDirTest, PointsCsvReadsQuotedCanonicalTextAndRefusesADamagedRow) {
  const RunLayout d(dir_.string());
  put(d.points_csv(),
      "point_id,job_id,level,canonical\nabc,job-0000,0,gemm:blas n=64\n"
      "def,job-0001,1,\"custom:x library=\"\"/a,b.so\"\"\"\n");
  auto pts = read_points_csv(d);
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[1].canonical, "custom:x library=\"/a,b.so\"");
  EXPECT_EQ(pts[1].level, 1);
  EXPECT_EQ(canonical_head(pts[0].canonical).backend, "blas");
  put(d.points_csv(), "point_id,job_id,level,canonical\nabc,job-0000,0,gemm:blas n=64\nbroken\n");
  EXPECT_NE(error_of([&] { read_points_csv(d); }).find(d.points_csv().string() + ":3:1: damaged row"),
            std::string::npos);
  // Since packing by time: an estimate column (empty when not estimated) before the canonical text.
  put(d.points_csv(),
      "point_id,job_id,level,estimate_s,canonical\nabc,job-0000,0,12.5,gemm:blas n=64\n"
      "def,job-0001,1,,\"custom:x library=\"\"/a,b.so\"\"\"\n");
  pts = read_points_csv(d);
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0].estimate_s, 12.5);
  EXPECT_EQ(pts[0].canonical, "gemm:blas n=64");
  EXPECT_EQ(pts[1].estimate_s, -1);
  EXPECT_EQ(pts[1].canonical, "custom:x library=\"/a,b.so\"");
  put(d.points_csv(), "point_id,job_id,level,estimate_s,canonical\nabc,job-0000,0,gemm:blas n=64\n");
  EXPECT_NE(error_of([&] { read_points_csv(d); }).find("damaged row (expected id,job,level,estimate_s,canonical)"),
            std::string::npos);
}

TEST_F(RunDirTest, SubmissionsRoundTripAndCancellationsHaveTheirOwnHeader) {
  const RunLayout d(dir_.string());
  record_submission(d, {42, "array", 30, "afterany:41", {"/r/jobs/job-0000.toml", "/r/jobs/job-0001.r1.toml"}, "T1"});
  record_submission(d, {43, "analysis", 10, "", {}, "T2"});
  const auto subs = read_submissions(d);
  ASSERT_EQ(subs.size(), 2u);
  EXPECT_EQ(subs[0].slurm_id, 42u);
  EXPECT_EQ(subs[0].dependency, "afterany:41");
  EXPECT_EQ(base_job(subs[0].specs[1]), "job-0001");
  EXPECT_TRUE(subs[1].specs.empty());
  EXPECT_EQ(subs[1].dependency, "");

  record_cancellation(d, 42, "T3");
  const std::string text = read_file(d.cancellations_file().string());
  EXPECT_EQ(text, "# slurm_id\tcancelled_utc\n42\tT3\n");  // not the submissions' header
}

TEST_F(RunDirTest, ADamagedSubmissionsLineNamesFileLineAndColumn) {
  const RunLayout d(dir_.string());
  const std::string f = d.submissions_file().string();
  put(d.submissions_file(), "# header\n42\tjob\t30\t-\tT\t/a.toml\n4x2\tjob\t30\t-\tT\t/b.toml\n");
  std::string e = error_of([&] { read_submissions(d); });
  EXPECT_NE(e.find(f + ":3:1: damaged submissions record: column 'slurm_id' is \"4x2\""), std::string::npos) << e;
  put(d.submissions_file(), "42\tjob\tsoon\t-\tT\t/a.toml\n");
  e = error_of([&] { read_submissions(d); });
  EXPECT_NE(e.find(f + ":1:8: damaged submissions record: column 'time_limit_min' is \"soon\""), std::string::npos)
      << e;
  put(d.submissions_file(), "42\tjob\t30\t-\tT\n");
  e = error_of([&] { read_submissions(d); });
  EXPECT_NE(e.find(f + ":1:1: damaged submissions record: 5 columns, expected 6"), std::string::npos) << e;
  put(d.submissions_file(), "42\tjobs\t30\t-\tT\t/a.toml\n");
  e = error_of([&] { read_submissions(d); });
  EXPECT_NE(e.find("kind \"jobs\"; valid: job, array, analysis"), std::string::npos) << e;
}

TEST_F(RunDirTest, ScanningReportsEveryUnreadableFileWithItsReasonAndMissingPoints) {
  const RunLayout d(dir_.string());
  put(d.results_file("job-0000"), "not hdf5 at all");
  const RunState st = scan_results(d);
  EXPECT_TRUE(st.files.empty());
  ASSERT_EQ(st.unreadable.size(), 1u);
  EXPECT_NE(st.unreadable[0].find("job-0000.h5: not an HDF5 file"), std::string::npos) << st.unreadable[0];
  EXPECT_EQ(st.of("abc").outcome, Outcome::Missing);
  const PointCounts c = count_planned({{"abc", "job-0000", "x:y", 0}, {"def", "job-0000", "x:y", 0}}, st);
  EXPECT_EQ(c.count(Outcome::Missing), 2);
  EXPECT_EQ(c.text(), "2 missing");
}

TEST(BetterRecord, PrefersTheBetterOutcomeThenTheNewerFile) {
  PointState complete{Outcome::Complete, "", "a.h5", "2026-01-01T00:00:00Z"};
  PointState failed{Outcome::FailedValidation, "", "b.h5", "2026-02-01T00:00:00Z"};
  PointState newer{Outcome::Complete, "", "c.h5", "2026-03-01T00:00:00Z"};
  EXPECT_TRUE(better_record(complete, failed));
  EXPECT_FALSE(better_record(failed, complete));
  EXPECT_TRUE(better_record(newer, complete));
  EXPECT_FALSE(better_record(complete, newer));
}

// One runner per run directory (issue 18, item 6). Open-file-description locks conflict
// between two opens even in one process, so one test process can play both runners.
TEST_F(RunDirTest, OneRunnerAtATimeAndTheRefusalNamesTheHolder) {
  const RunLayout d(dir_.string());
  std::optional<RunLock> first(RunLock::acquire(d, "d500 run"));
  const std::string e = error_of([&] { RunLock::acquire(d, "d500 submit"); });
  EXPECT_NE(e.find("in use by `d500 run` (pid " + std::to_string(getpid()) + " on host "), std::string::npos) << e;
  EXPECT_NE(e.find("run.lock"), std::string::npos) << e;
  const LockHolder h = read_lock_file((dir_ / "run.lock").string());
  EXPECT_EQ(h.pid, getpid());
  EXPECT_EQ(h.command, "d500 run");
  first.reset();  // released: the next runner may start
  EXPECT_NO_THROW(RunLock::acquire(d, "d500 run"));
}

TEST_F(RunDirTest, ARankThatOutlivesItsRunnerIsFoundByItsLock) {
  const RunLayout d(dir_.string());
  pid_t rank = -1;
  {
    RunLock runner = RunLock::acquire(d, "d500 run");
    setenv("D500_RUN_LOCK", runner.path().c_str(), 1);
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    rank = fork();
    ASSERT_GE(rank, 0);
    if (rank == 0) {  // a rank: closes the runner's descriptor as mpirun does, holds its byte, lives on
      for (int fd = 3; fd < 1024; ++fd)
        if (fd != ready[1]) close(fd);
      hold_rank_lock();
      char c = 'x';
      if (write(ready[1], &c, 1) != 1) _exit(1);
      for (;;) pause();
    }
    unsetenv("D500_RUN_LOCK");
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    close(ready[0]);
    close(ready[1]);
  }  // the runner is gone; the rank runs on
  std::string e = error_of([&] { RunLock::acquire(d, "d500 run"); });
  EXPECT_NE(e.find("ranks of an earlier run still run here (pid " + std::to_string(rank)), std::string::npos) << e;
  EXPECT_NE(e.find("kill -TERM " + std::to_string(rank)), std::string::npos) << e;
  kill(rank, SIGKILL);
  waitpid(rank, nullptr, 0);
  EXPECT_NO_THROW(RunLock::acquire(d, "d500 run"));
}

TEST_F(RunDirTest, AJobGroupWhoseRunnerIsGoneIsFoundByItsRecord) {
  const RunLayout d(dir_.string());
  pid_t job = fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    setpgid(0, 0);
    for (;;) pause();
  }
  setpgid(job, job);
  {
    RunLock runner = RunLock::acquire(d, "d500 run");
    runner.set_job("job-0003", job);
    // The runner dies without clearing its record (as kill -9 leaves it): keep the file as is.
    fs::copy_file(runner.path(), dir_ / "kept", fs::copy_options::overwrite_existing);
  }
  fs::copy_file(dir_ / "kept", dir_ / "run.lock", fs::copy_options::overwrite_existing);
  std::string e = error_of([&] { RunLock::acquire(d, "d500 run"); });
  EXPECT_NE(e.find("its job's processes still run (job job-0003, process group " + std::to_string(job)),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("kill -TERM -- -" + std::to_string(job)), std::string::npos) << e;
  kill(job, SIGKILL);
  waitpid(job, nullptr, 0);
  EXPECT_NO_THROW(RunLock::acquire(d, "d500 run"));
}

// The job's own record of an attempt: templates/slurm-attempt.bash run by bash as a Slurm job
// script runs it, its step sent SIGTERM as Slurm sends it at the time limit or on scancel.
TEST_F(RunDirTest, AnAttemptRecordsItsStartItsSigtermAndItsExitAndOutlivesSlurm) {
  const RunLayout run(dir_.string());
  const std::string lib = std::string(D500_SOURCE_DIR) + "/templates/slurm-attempt.bash";
  auto job = [&](const std::string& env, const std::string& body) {
    const std::string script = "cd " + shell_quote(dir_.string()) + " && source " + shell_quote(lib) + "\n" + body;
    const std::string cmd =
        env + " bash -c " + shell_quote(script) + " >> " + shell_quote((dir_ / "job.out").string()) + " 2>&1";
    return std::system(cmd.c_str());
  };
  // Attempt 0 of job 41 (task 3 of array 40) is sent SIGTERM 0 s into a 5 s limit: within 10 s
  // of the limit, so it timed out. Attempt 1 is terminated 0 s into an hour: cancelled.
  job("SLURM_JOB_ID=41 SLURM_ARRAY_JOB_ID=40 SLURM_ARRAY_TASK_ID=3 D500_TIME_LIMIT_S=5",
      "d500_step bash -c 'echo working; sleep 0.1'; exit 3");
  job("SLURM_JOB_ID=41 SLURM_ARRAY_JOB_ID=40 SLURM_ARRAY_TASK_ID=3 SLURM_RESTART_COUNT=1 D500_TIME_LIMIT_S=3600",
      "trap 'd500_on_term' TERM; (sleep 0.3; kill -TERM $$) & d500_step bash -c 'echo step output; sleep 1'");
  job("SLURM_JOB_ID=42 D500_TIME_LIMIT_S=1",
      "(sleep 0.3; kill -TERM $$) & d500_step bash -c 'echo d500-worker: rank 4 on d500n3 crashed with SIGSEGV "
      "in point 1/4 795a962f134f024d; for i in 1 2 3 4 5 6; do echo srun: error: task $i: Killed; done; "
      "echo last words; sleep 1'");
  const auto all = read_attempts(run);
  ASSERT_EQ(all.size(), 3u) << read_file((dir_ / "job.out").string());
  EXPECT_EQ(all[0].task, (TaskKey{40, 3}));
  EXPECT_EQ(all[0].attempt, 0);
  ASSERT_TRUE(all[0].exit_code.has_value());
  EXPECT_EQ(*all[0].exit_code, 3);
  EXPECT_FALSE(all[0].terminated);
  EXPECT_EQ(all[1].attempt, 1);
  EXPECT_TRUE(all[1].terminated);
  EXPECT_FALSE(all[1].timed_out) << "SIGTERM long before the limit";
  EXPECT_EQ(all[2].task, (TaskKey{42, 0}));
  EXPECT_TRUE(all[2].timed_out) << "SIGTERM at the limit";
  ASSERT_TRUE(all[2].exit_code.has_value());
  EXPECT_EQ(*all[2].exit_code, 143) << "the step ended by the signal, its status is the script's";
  EXPECT_EQ(std::count_if(all.begin(), all.end(), [](const AttemptRecord& a) { return a.task == TaskKey{40, 3}; }), 2);
  EXPECT_EQ(all[2].log, fs::weakly_canonical(dir_ / "job.out").string());
  // Each attempt's output is the part of the shared log after its own marker line.
  const auto tail = attempt_output_tail(all[1], 5);
  ASSERT_FALSE(tail.empty());
  EXPECT_EQ(tail.front(), "step output") << "attempt 0's lines are not attempt 1's";

  // Slurm has purged every job: the records alone say how each ended.
  const std::map<TaskKey, ObservedState> none;
  TaskEnd e = resolve_task_end({42, 0}, std::nullopt, false, none, all);
  EXPECT_EQ(e.state, "TIMEOUT");
  EXPECT_EQ(e.source, "job record");
  EXPECT_NE(e.cause.find("time limit reached (SIGTERM at"), std::string::npos) << e.cause;
  EXPECT_EQ(e.tail.back(), "last words");
  // A rank's crash note, six lines before the last five, leads the tail and is the last word.
  ASSERT_EQ(e.tail.size(), 6u);
  EXPECT_EQ(e.tail.front(), "d500-worker: rank 4 on d500n3 crashed with SIGSEGV in point 1/4 795a962f134f024d");
  EXPECT_EQ(e.tail[1], "srun: error: task 3: Killed");
  EXPECT_EQ(last_words(e), e.tail.front());
  EXPECT_EQ(attempt_output_tail(all[2], 8).front(), e.tail.front()) << "not twice when it is among the last lines";
  EXPECT_EQ(attempt_output_tail(all[2], 8).size(), 8u);
  e = resolve_task_end({40, 3}, std::nullopt, false, none, all);
  EXPECT_EQ(e.state, "CANCELLED") << "the last attempt decides";
  EXPECT_EQ(e.attempts, 2);
  // What d500 saw Slurm say comes before the job's word; Slurm's live answer before both.
  ObservedState seen;
  seen.task = {40, 3};
  seen.state = "NODE_FAIL";
  seen.nodes = "nid00007";
  record_observed(run, seen);
  const auto observed = read_observed(run);
  e = resolve_task_end({40, 3}, std::nullopt, false, observed, all);
  EXPECT_EQ(e.state, "NODE_FAIL");
  EXPECT_EQ(e.source, "observed");
  EXPECT_EQ(e.cause, "node failure on nid00007");
  ObservedState live = seen;
  live.state = "FAILED";
  live.exit_code = 134;
  e = resolve_task_end({40, 3}, live, true, observed, all);
  EXPECT_EQ(e.cause, "exit 134 (128 + SIGABRT)");
  // Requeued after that: it runs again under its old id, and Slurm's word now wins.
  live.state = "RUNNING";
  live.restarts = 1;
  e = resolve_task_end({40, 3}, live, false, observed, all);
  EXPECT_EQ(e.state, "RUNNING");
  EXPECT_EQ(e.cause, "requeued 1x");
  EXPECT_EQ(exit_text(127, 0), "exit 127 (command not found)");
  EXPECT_EQ(exit_text(0, 9), "signal SIGKILL");
  EXPECT_EQ(outcome_of_slurm_state("OUT_OF_MEMORY"), Outcome::JobFailed);
  EXPECT_EQ(outcome_of_slurm_state("PREEMPTED"), Outcome::NodeFailed);
  EXPECT_FALSE(outcome_of_slurm_state("COMPLETED").has_value());
}

// --signal=TERM@S (D500_SIGNAL_BEFORE_S): Slurm signals the job's steps before the limit, not the
// batch shell; the step ends by SIGTERM, and the record says the job ended on that signal, which
// d500 reads as its time limit whatever Slurm calls the end. A step ending so without a signal
// before the limit asked for is the step's own failure.
TEST_F(RunDirTest, AStepEndedBySlurmsSignalBeforeTheLimitIsRecordedAsTheTimeLimit) {
  const RunLayout run(dir_.string());
  const std::string lib = std::string(D500_SOURCE_DIR) + "/templates/slurm-attempt.bash";
  auto job = [&](const std::string& env, const std::string& body) {
    const std::string script = "cd " + shell_quote(dir_.string()) + " && source " + shell_quote(lib) + "\n" + body;
    return std::system(
        (env + " bash -c " + shell_quote(script) + " >> " + shell_quote((dir_ / "job.out").string()) + " 2>&1")
            .c_str());
  };
  const std::string step = "d500_step bash -c 'kill -TERM $$'";  // a step that ends by SIGTERM at once
  job("SLURM_JOB_ID=50 D500_TIME_LIMIT_S=60 D500_SIGNAL_BEFORE_S=15", step);
  job("SLURM_JOB_ID=51 D500_TIME_LIMIT_S=60", step);
  job("SLURM_JOB_ID=52 D500_TIME_LIMIT_S=600 D500_SIGNAL_BEFORE_S=15", step);  // 585 s early: not that signal
  // Without --signal Slurm signals the step and the batch shell separately at the limit: the
  // step may die of its SIGTERM before the shell's arrives (a loaded node, job 53).
  job("SLURM_JOB_ID=53 D500_TIME_LIMIT_S=5", step);
  const auto all = read_attempts(run);
  ASSERT_EQ(all.size(), 4u) << read_file((dir_ / "job.out").string());
  EXPECT_TRUE(all[3].timed_out) << "the step's SIGTERM within 10 s of the limit, recorded by=step";
  ASSERT_TRUE(all[3].exit_code.has_value());
  EXPECT_EQ(*all[3].exit_code, 143);
  EXPECT_TRUE(all[0].timed_out);
  EXPECT_EQ(all[0].signal_before_s, 15);
  ASSERT_TRUE(all[0].exit_code.has_value());
  EXPECT_EQ(*all[0].exit_code, 143);
  EXPECT_FALSE(all[1].terminated) << "no signal asked for: the step's own end";
  EXPECT_FALSE(all[2].terminated) << "long before the signal was due";
  EXPECT_NE(
      read_file((dir_ / "job.out").string()).find("the job step ended on Slurm's SIGTERM 15 s before the time limit"),
      std::string::npos);
  EXPECT_NE(read_file((dir_ / "job.out").string()).find("the job step ended on Slurm's SIGTERM at the time limit"),
            std::string::npos);
  ObservedState live;
  live.task = {50, 0};
  live.state = "FAILED";
  live.exit_code = 143;
  const TaskEnd e = resolve_task_end({50, 0}, live, true, {}, all);
  EXPECT_EQ(e.state, "TIMEOUT");
  EXPECT_NE(e.cause.find("15 s before the limit (signal_before_limit)"), std::string::npos) << e.cause;
  live.task = {51, 0};
  EXPECT_EQ(resolve_task_end({51, 0}, live, true, {}, all).state, "FAILED");
}

// A batch job started by `#!/usr/bin/env bash` has no `module` on many sites: d500_module_init
// defines it from the site's script (the first that does, of the one named and the usual
// places), and says what it tried when none does (exit 127, as a missing command).
TEST_F(RunDirTest, ModulesAreInitialisedFromTheSitesScriptOrTheJobSaysWhatItTried) {
  const std::string lib = std::string(D500_SOURCE_DIR) + "/templates/slurm-attempt.bash";
  std::ofstream(dir_ / "init.sh") << "module() { echo \"module $*\"; }\n";
  auto job = [&](const std::string& body) {
    const std::string script =
        "set -euo pipefail; cd " + shell_quote(dir_.string()) + " && source " + shell_quote(lib) + "\n" + body;
    const std::string out = (dir_ / "out.txt").string();
    const int rc =
        std::system(("env -u MODULESHOME bash -c " + shell_quote(script) + " > " + shell_quote(out) + " 2>&1").c_str());
    return std::make_pair(WEXITSTATUS(rc), read_file(out));
  };
  auto [rc, out] = job("d500_module_init " + shell_quote((dir_ / "init.sh").string()) + "; module load PrgEnv-gnu");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("module load PrgEnv-gnu"), std::string::npos) << out;
  std::tie(rc, out) = job("d500_module_init " + shell_quote((dir_ / "missing.sh").string()) + "; echo not reached");
  EXPECT_EQ(rc, 127) << out;
  EXPECT_NE(
      out.find("has no `module` command and none of " + (dir_ / "missing.sh").string() + " /etc/profile.d/modules.sh"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("set [slurm] module_init"), std::string::npos) << out;
  EXPECT_EQ(out.find("not reached"), std::string::npos) << out;
}

}  // namespace
}  // namespace d500
