// The GPU backends end to end. Without CUDA in the build, each test is skipped and says so.
// With it but without a visible device (this machine: CUDA to build against, no GPU), `d500
// backends` says so and a point on the GPU fails at setup alone, its job going on. With a
// device, GEMM in every dtype validates against the double reference and each repetition has
// its device duration (CUDA events) beside the host's.
#include <cstdlib>

#include "backends/registry.hpp"
#include "helpers.hpp"

using namespace d500test;

namespace {

class Gpu : public ScratchDirTest {
 protected:
  // Why this build cannot run the cuda backend's tests ("" when it can); `need_device`: the test
  // needs a visible GPU too.
  static std::string why_skip(bool need_device) {
    const d500::BackendInfo* b = d500::find_backend("cuda");
    if (!b || !b->built) return "this build has no cuda backend: " + (b ? b->not_built_reason : std::string("unknown"));
    if (need_device && b->no_device) {
      if (const std::string why = b->no_device(); !why.empty()) return "no CUDA device visible here (" + why + ")";
    }
    return "";
  }
};

const std::string kHead = "[campaign]\nname = \"gpu\"\nrepetitions = 20\nwarmups = 3\n[fixed]\nworkload = \"gemm\"\n";

}  // namespace

TEST_F(Gpu, ABuildWithCudaListsItAndAPointWithoutADeviceFailsAloneWithTheReason) {
  if (const std::string why = why_skip(false); !why.empty()) GTEST_SKIP() << why;
  const d500::BackendInfo* b = d500::find_backend("cuda");
  const std::string no_device = b->no_device();
  Cmd list = sh(d500_cmd("backends"));
  ASSERT_EQ(list.code, 0) << list.out;
  EXPECT_NE(list.out.find("  cuda: cuBLAS"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("CUDA runtime "), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("built, no CUDA device") != std::string::npos, !no_device.empty()) << list.out;
  if (!no_device.empty()) {
    // The GPU point fails at setup with the reason; the CPU point of the same job completes.
    const auto rows = reported(kHead + "n = 64\n[axes]\nbackend = [\"cuda\", \"blas\"]\n");
    ASSERT_EQ(rows.size(), 2u);
    for (const auto& [id, row] : rows) {
      if (row.at("backend") == "cuda") {
        EXPECT_EQ(row.at("status"), "backend-failed");
        EXPECT_NE(row.at("status_reason").find("no CUDA device"), std::string::npos) << row.at("status_reason");
      } else {
        EXPECT_EQ(row.at("status"), "complete");
      }
    }
  }
  // Reduced precision is the GPU's alone, refused at plan time elsewhere, with the file's line.
  std::string out;
  Cmd plan = sh(d500_cmd("plan " + write("bf16.toml", kHead + "n = 64\nbackend = \"blas\"\ndtype = \"bf16\"\n") + " -o " +
                         (dir_ / "refused").string()));
  EXPECT_NE(plan.code, 0);
  EXPECT_NE(plan.out.find("bf16.toml:"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("needs a backend that multiplies in reduced precision (cuda)"), std::string::npos) << plan.out;
}

TEST_F(Gpu, GemmInEveryDtypeValidatesAndEachRepetitionHasItsDeviceDuration) {
  if (const std::string why = why_skip(true); !why.empty()) GTEST_SKIP() << why;
  const fs::path run = planned(kHead + "n = 1024\nbackend = \"cuda\"\n[axes]\ndtype = [\"fp32\", \"tf32\", \"bf16\", \"fp16\"]\n");
  const hid_t f = ran_and_checked(run);
  ASSERT_GE(f, 0);
  const auto ids = point_ids(f);
  ASSERT_EQ(ids.size(), 4u);
  for (const auto& id : ids) {
    hid_t g = H5Gopen2(f, ("points/" + id).c_str(), H5P_DEFAULT);
    SCOPED_TRACE(attr_string(g, "canonical"));
    EXPECT_EQ(attr_string(g, "status"), "complete");
    EXPECT_EQ(attr_string(g, "validation_status"), "passed");
    std::map<int, std::pair<long long, long long>> rep;  // rep -> (op duration, device duration)
    for (const auto& s : read_samples(f, id)) {
      if (s.phase == 0) rep[s.rep].first = s.end_ns - s.start_ns;
      if (s.phase == 9) rep[s.rep].second = s.end_ns - s.start_ns;
    }
    EXPECT_EQ(rep.size(), 23u);  // 3 warm-ups and 20 repetitions, each with both rows
    for (const auto& [k, v] : rep) {
      EXPECT_GT(v.second, 0) << "repetition " << k << " has no device duration";
      EXPECT_LE(v.second, v.first) << "repetition " << k << ": the device took longer than the host's launch and wait";
    }
    H5Gclose(g);
  }
  H5Fclose(f);
}

TEST_F(Gpu, ConvolutionsInEveryPassValidateAndRecordTheAlgorithmCudnnChose) {
  if (const std::string why = why_skip(true); !why.empty()) GTEST_SKIP() << why;
  const d500::BackendInfo* b = d500::find_backend("cuda");
  if (!b->supports("conv2d")) GTEST_SKIP() << "this build's cuda backend has no cuDNN";
  const fs::path run = planned("[campaign]\nname = \"gpu-conv\"\nrepetitions = 10\nwarmups = 3\n[fixed]\nworkload = \"conv2d\"\n"
                               "backend = \"cuda\"\nn = 4\n[axes]\npass = [\"forward\", \"backward_data\", \"backward_filter\"]\n"
                               "shape = [\"resnet50/res2_3x3\", \"resnet50/res4_3x3_stride2\"]\n");
  const hid_t f = ran_and_checked(run);
  ASSERT_GE(f, 0);
  const auto ids = point_ids(f);
  ASSERT_EQ(ids.size(), 6u);
  for (const auto& id : ids) {
    hid_t g = H5Gopen2(f, ("points/" + id).c_str(), H5P_DEFAULT);
    const std::string canonical = attr_string(g, "canonical");
    SCOPED_TRACE(canonical);
    EXPECT_EQ(attr_string(g, "status"), "complete");
    EXPECT_EQ(attr_string(g, "validation_status"), "passed");
    const std::string pass = canonical.substr(canonical.find(" pass=") + 6, canonical.find(' ', canonical.find(" pass=") + 6) - canonical.find(" pass=") - 6);
    const std::string algorithm = attr_string(g, "cudnn.algorithm");
    EXPECT_EQ(algorithm.rfind(pass == "forward" ? "forward " : pass == "backward_data" ? "backward data " : "backward filter ", 0), 0u) << algorithm;
    EXPECT_EQ(algorithm.find("unknown"), std::string::npos) << algorithm;
    EXPECT_GE(attr_int(g, "cudnn.workspace_bytes"), 0);
    int device_rows = 0;
    for (const auto& s : read_samples(f, id)) device_rows += s.phase == 9 && s.end_ns > s.start_ns;
    EXPECT_EQ(device_rows, 13);
    H5Gclose(g);
  }
  H5Fclose(f);
}

// NCCL's collectives: without a device a point fails alone with the reason; off_cache (the
// host's caches) is refused for it at plan time; with a device, each collective validates on one
// rank per GPU with its device durations (one GPU here: NCCL refuses two ranks on one device).
TEST_F(Gpu, NcclCollectivesFailAloneWithoutADeviceAndValidateWithOne) {
  const d500::BackendInfo* b = d500::find_backend("nccl");
  if (!b || !b->built) GTEST_SKIP() << "this build has no nccl backend: " << (b ? b->not_built_reason : std::string("unknown"));
  const std::string no_device = b->no_device();
  const std::string head = "[campaign]\nname = \"nccl\"\nrepetitions = 10\nwarmups = 2\n[fixed]\nbytes = 65536\nranks_per_node = 1\n";
  Cmd refused = sh(d500_cmd("plan " + write("cold.toml", head + "workload = \"allreduce\"\nbackend = \"nccl\"\noff_cache = \"64M\"\n") +
                            " -o " + (dir_ / "refused").string()));
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.out.find("keeps its buffers on the GPU: leave off_cache unset"), std::string::npos) << refused.out;
  const auto rows = reported(head + "[axes]\nworkload = [\"allreduce\", \"allgather\", \"broadcast\", \"reduce_scatter\"]\n"
                                    "backend = [\"nccl\", \"mpi\"]\nbuffers = [\"\", \"in-place\"]\n[[exclude]]\nbuffers = \"in-place\"\n"
                                    "workload = [\"allgather\", \"broadcast\", \"reduce_scatter\"]\n");
  ASSERT_EQ(rows.size(), 10u);
  for (const auto& [id, row] : rows) {
    SCOPED_TRACE(row.at("canonical"));
    if (row.at("backend") == "mpi" || no_device.empty()) {
      EXPECT_EQ(row.at("status"), "complete");
      EXPECT_EQ(row.at("validation_status"), "passed");
    } else {
      EXPECT_EQ(row.at("status"), "backend-failed");
      EXPECT_NE(row.at("status_reason").find("no CUDA device"), std::string::npos) << row.at("status_reason");
    }
  }
}
