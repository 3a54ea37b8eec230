// The metrics layer's vocabularies: phases, outcomes and the worker's progress lines, each
// spelt once and read back by the same code.
#include <gtest/gtest.h>

#include "metrics/metrics.hpp"
#include "metrics/outcome.hpp"
#include "metrics/progress.hpp"

namespace d500 {
namespace {

TEST(Phase, NamesRoundTripAndAreStoredInOrder) {
  EXPECT_EQ(phase_names_csv(), "op,data,forward,backward,update,communication,wait,evaluation,checkpoint,device");
  for (int i = 0; i < kPhaseCount; ++i) {
    Phase p{};
    ASSERT_TRUE(parse_phase(phase_name(static_cast<Phase>(i)), p));
    EXPECT_EQ(static_cast<int>(p), i);
  }
  Phase p{};
  EXPECT_FALSE(parse_phase("allreduce", p));
  EXPECT_STREQ(phase_name(static_cast<Phase>(200)), "unknown");
  // Adding the phase did not grow a sample: the recorder's buffer per repetition is unchanged.
  EXPECT_EQ(sizeof(Sample), 48u);
}

TEST(Outcome, NamesRoundTripAndOnlyTheWorkersOutcomesAreFileStatuses) {
  for (Outcome o : {Outcome::Complete, Outcome::Incomplete, Outcome::FailedValidation, Outcome::BackendFailed,
                    Outcome::TimedOut, Outcome::Cancelled, Outcome::NodeFailed, Outcome::JobFailed, Outcome::Missing}) {
    auto back = parse_outcome(outcome_name(o));
    ASSERT_TRUE(back.has_value()) << outcome_name(o);
    EXPECT_EQ(*back, o);
  }
  EXPECT_STREQ(file_status(Outcome::Incomplete), "running");
  EXPECT_EQ(outcome_from_file_status("running"), Outcome::Incomplete);
  EXPECT_EQ(outcome_from_file_status("backend-failed"), Outcome::BackendFailed);
  // The launchers' outcomes are never written by a worker: in a file they mean damage.
  EXPECT_FALSE(outcome_from_file_status("timed-out").has_value());
  EXPECT_FALSE(outcome_from_file_status("missing").has_value());
  EXPECT_FALSE(outcome_from_file_status("Complete").has_value());
  EXPECT_TRUE(is_final(Outcome::BackendFailed));
  EXPECT_FALSE(is_final(Outcome::TimedOut));
  EXPECT_GT(outcome_preference(Outcome::Complete), outcome_preference(Outcome::FailedValidation));
  EXPECT_GT(outcome_preference(Outcome::BackendFailed), outcome_preference(Outcome::Incomplete));
  EXPECT_GT(outcome_preference(Outcome::Incomplete), outcome_preference(Outcome::Missing));
}

TEST(Progress, LinesRoundTripAndOtherOutputIsNotProgress) {
  auto p = parse_progress_line(progress_point_line(3, 12, "gemm:blas n=64 threads=1"));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, ProgressLine::Point);
  EXPECT_EQ(p->index, 3);
  EXPECT_EQ(p->count, 12);
  EXPECT_EQ(p->canonical, "gemm:blas n=64 threads=1");
  p = parse_progress_line(progress_flushed_line(2, 2, 123456789012LL));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, ProgressLine::Flushed);
  EXPECT_EQ(p->rows, 123456789012LL);
  EXPECT_EQ(progress_done_line(1, 2, Outcome::BackendFailed, 0.256), "d500:done 1/2 backend-failed 0.26s");
  p = parse_progress_line("d500:done 1/2 backend-failed 0.26s");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->outcome, Outcome::BackendFailed);
  EXPECT_DOUBLE_EQ(p->seconds, 0.26);
  p = parse_progress_line(progress_checkpoint_line(4, 9, 1500));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, ProgressLine::Checkpoint);
  EXPECT_EQ(p->index, 4);
  EXPECT_EQ(p->rows, 1500);
  EXPECT_EQ(progress_resumed_line(1, 1, 20), "d500:resumed 1/1 20");
  p = parse_progress_line("d500:resumed 1/1 20");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, ProgressLine::Resumed);
  EXPECT_EQ(p->rows, 20);
  EXPECT_EQ(progress_skipped_line(2, 3, Outcome::Complete, "/r/results/job-0000.slurm-7.0.h5"),
            "d500:skipped 2/3 complete /r/results/job-0000.slurm-7.0.h5");
  p = parse_progress_line(progress_skipped_line(2, 3, Outcome::FailedValidation, "/r/a b.h5"));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, ProgressLine::Skipped);
  EXPECT_EQ(p->index, 2);
  EXPECT_EQ(p->outcome, Outcome::FailedValidation);
  EXPECT_EQ(p->canonical, "/r/a b.h5");
  for (const char* other : {"", "d500:point", "d500:point x/2 a", "d500:skipped 1/2 complete",
                            "d500:skipped 1/2 exploded f.h5", "d500:done 1/2 exploded 1s", "d500:pointy 1/2 a",
                            "error: d500:point 1/2 a", "d500:flushed 1/ 5", "d500:checkpoint /2 5"})
    EXPECT_FALSE(parse_progress_line(other)) << other;
}

}  // namespace
}  // namespace d500
