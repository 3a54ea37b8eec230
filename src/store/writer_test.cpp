// The writer's agreement of the ranks' point attributes: run by the unit suite on one rank, and
// by CTest's unit_writer_2_ranks on two, where rank 1 holds values of its own.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>

#include "common/mpi_check.hpp"
#include "store/reader.hpp"
#include "store/writer.hpp"

namespace d500 {
namespace {

TEST(Writer, RankZerosAttributesAndStepsAreWrittenAndEveryOtherRanksOwnChoiceIsNamed) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string path = bcast_string(
      rank == 0
          ? (std::filesystem::temp_directory_path() / ("d500-writer-" + std::to_string(getpid()) + ".h5")).string()
          : "",
      MPI_COMM_WORLD);
  {
    EnvRecord env;
    env.host = "host" + std::to_string(rank);
    ResultWriter w(path, MPI_COMM_WORLD, JobIdentity{"job", "writer-test", "hash", 1, size}, env);
    ResultWriter::PointMeta meta;
    // A found algorithm that differs on rank 1, a count that does, a measurement (a real: rank
    // 0's, never compared) and a fact every rank agrees on.
    meta.attributes = {{"cudnn.algorithm", std::string(rank == 0 ? "IMPLICIT_GEMM" : "WINOGRAD")},
                       {"cudnn.workspace_bytes", std::int64_t{rank == 0 ? 0 : 4096}},
                       {"cudnn.found_ms", 1.0 + rank},
                       {"cudnn.choice", std::string("find")}};
    w.begin_point(PointIdentity{"p1", "conv2d:cuda n=1", 0, {}}, 0, 0, 1, meta);
    // A level-1 step table: the convolution's implementation differs on rank 1.
    StepTimes st;
    st.steps = {
        StepInfo{"conv", "Conv", "forward",
                 rank == 0 ? "cuda cudnn convolution (algos f1, found)" : "cuda cudnn convolution (algos f6, found)",
                 1e6},
        StepInfo{"relu", "Relu", "forward", "cuda cudnn activation", 1e3}};
    st.repetitions = 1;
    st.ns = {1000, 10};
    w.step_times(st);
    w.point_attributes({{"cudnn.deterministic", rank == 0}});
    w.end_point(Outcome::Complete, "", 0.1);
    w.finish("complete");
  }
  if (rank == 0) {
    const JobResult j = read_job_file(path);
    ASSERT_EQ(j.points.size(), 1u);
    const auto& f = j.points[0].facts;
    EXPECT_EQ(std::get<std::string>(f.at("cudnn.algorithm")), "IMPLICIT_GEMM");
    EXPECT_EQ(std::get<std::int64_t>(f.at("cudnn.workspace_bytes")), 0);
    EXPECT_EQ(std::get<double>(f.at("cudnn.found_ms")), 1.0);
    ASSERT_EQ(j.points[0].steps.size(), 2u);
    EXPECT_EQ(j.points[0].steps[0].impl, "cuda cudnn convolution (algos f1, found)");
    if (size == 1) {
      EXPECT_EQ(f.count("ranks_differ"), 0u);
    } else {
      std::string want;
      for (int r = 1; r < size; ++r)
        want += std::string(want.empty() ? "" : "; ") + "cudnn.algorithm: rank " + std::to_string(r) +
                " has WINOGRAD; cudnn.workspace_bytes: rank " + std::to_string(r) + " has 4096";
      for (int r = 1; r < size; ++r)
        want += "; step 0 impl: rank " + std::to_string(r) + " has cuda cudnn convolution (algos f6, found)";
      for (int r = 1; r < size; ++r) want += "; cudnn.deterministic: rank " + std::to_string(r) + " has false";
      ASSERT_EQ(f.count("ranks_differ"), 1u);
      EXPECT_EQ(std::get<std::string>(f.at("ranks_differ")), want);
    }
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace d500
