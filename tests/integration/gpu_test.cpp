// The GPU backends end to end. Without CUDA in the build, each test is skipped and says so.
// With it but without a visible device (this machine: CUDA to build against, no GPU), `d500
// backends` says so and a point on the GPU fails at setup alone, its job going on. With a
// device, GEMM in every dtype and each cuDNN operator validate against the double reference,
// each repetition has its device duration (CUDA events) beside the host's, and each point its
// peak device memory.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "backends/nvml.hpp"
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
  // The per-rank strings of a results file's dataset (/env/hosts, /env/devices).
  static std::vector<std::string> per_rank_strings(const fs::path& file, const char* path) {
    std::vector<std::string> out;
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return out;
    const hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d >= 0) {
      const hid_t t = H5Dget_type(d), s = H5Dget_space(d);
      const std::size_t len = H5Tget_size(t);
      const auto n = static_cast<std::size_t>(H5Sget_simple_extent_npoints(s));
      std::vector<char> buf(len * n, 0);
      if (H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0)
        for (std::size_t i = 0; i < n; ++i) out.emplace_back(buf.data() + i * len, strnlen(buf.data() + i * len, len));
      H5Sclose(s);
      H5Tclose(t);
      H5Dclose(d);
    }
    H5Fclose(f);
    return out;
  }
  // The `impl` of each step in a point's `steps` table (hdf5-schema: fixed-length, 64 bytes).
  static std::vector<std::string> step_impls(hid_t point) {
    std::vector<std::string> out;
    const hid_t d = H5Dopen2(point, "steps", H5P_DEFAULT);
    if (d < 0) return out;
    const hid_t str = H5Tcopy(H5T_C_S1), mem = H5Tcreate(H5T_COMPOUND, 64);
    H5Tset_size(str, 64);
    H5Tinsert(mem, "impl", 0, str);
    const hid_t s = H5Dget_space(d);
    const auto n = static_cast<std::size_t>(H5Sget_simple_extent_npoints(s));
    std::vector<char> buf(64 * n, 0);
    if (H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0)
      for (std::size_t i = 0; i < n; ++i) out.emplace_back(buf.data() + i * 64, strnlen(buf.data() + i * 64, 64));
    H5Sclose(s);
    H5Tclose(mem);
    H5Tclose(str);
    H5Dclose(d);
    return out;
  }
  // `d500 plan` refuses LeNet-5 for `workload` on `backend`, naming the file's backend line.
  void expect_refused_at_plan(const std::string& workload, const std::string& backend) {
    const std::string file =
        write(workload + ".toml", "[campaign]\nname = \"refused\"\n[fixed]\nworkload = \"" + workload +
                                      "\"\nnetwork = \"lenet5\"\nbackend = \"" + backend + "\"\n");
    const Cmd refused = sh(d500_cmd("plan " + file + " -o " + (dir_ / ("refused-" + workload)).string()));
    EXPECT_NE(refused.code, 0);
    EXPECT_NE(refused.out.find(workload + ".toml:6:"), std::string::npos) << refused.out;
    EXPECT_NE(refused.out.find("does not run on backend '" + backend + "'"), std::string::npos) << refused.out;
  }
  // Why this build or host cannot run cuDNN's convolutions ("" when it can).
  static std::string why_skip_convolutions() {
    if (std::string why = why_skip(true); !why.empty()) return why;
    return d500::find_backend("cuda")->supports("conv2d") ? "" : "this build's cuda backend has no cuDNN";
  }
  // The convolutions `shapes` (TOML array items) at batch 4 in every pass with every
  // cudnn_algorithms choice (18 points for two shapes), `fixed` added, planned.
  fs::path every_pass_and_choice(const std::string& name, const std::string& fixed, const std::string& shapes) {
    return planned("[campaign]\nname = \"" + name +
                   "\"\nrepetitions = 10\nwarmups = 3\n[fixed]\nworkload = \"conv2d\"\nbackend = \"cuda\"\n"
                   "n = 4\n" +
                   fixed + "[axes]\npass = [\"forward\", \"backward_data\", \"backward_filter\"]\nshape = [" + shapes +
                   "]\ncudnn_algorithms = [\"heuristic\", \"deterministic\", \"find\"]\n");
  }
  // A convolution point's pass as cudnn.algorithm begins with it: "forward ", "backward data ",
  // "backward filter ".
  static std::string pass_words(const std::string& canonical) {
    const std::size_t at = canonical.find(" pass=") + 6;
    const std::string pass = canonical.substr(at, canonical.find(' ', at) - at);
    return pass == "forward" ? "forward " : pass == "backward_data" ? "backward data " : "backward filter ";
  }
  static std::string env_attr(const fs::path& file, const char* name) {
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t g = H5Gopen2(f, "env", H5P_DEFAULT);
    std::string v = attr_string(g, name);
    H5Gclose(g);
    H5Fclose(f);
    return v;
  }
  // Each row of results.csv: where `reason(row)` is empty the point completed and validated,
  // else it failed at setup alone (backend-failed) with that text in its reason.
  using Row = std::map<std::string, std::string>;
  static void expect_outcomes(const std::map<std::string, Row>& rows,
                              const std::function<std::string(const Row&)>& reason) {
    for (const auto& [id, row] : rows) {
      SCOPED_TRACE(row.at("canonical"));
      if (const std::string why = reason(row); why.empty()) {
        EXPECT_EQ(row.at("status"), "complete") << row.at("status_reason");
        EXPECT_EQ(row.at("validation_status"), "passed");
      } else {
        EXPECT_EQ(row.at("status"), "backend-failed");
        EXPECT_NE(row.at("status_reason").find(why), std::string::npos) << row.at("status_reason");
      }
    }
  }
  // Each of the `points` points of `f`: complete, validated, with `device_rows` device durations
  // (warm-ups and repetitions); then the test's own checks of it.
  static void each_on_device(hid_t f, std::size_t points, int device_rows,
                             const std::function<void(hid_t, const std::string& canonical)>& more) {
    each_validated_point(f, points, [&](hid_t g, const std::string& id, const std::string& canonical) {
      int rows = 0;
      for (const auto& s : read_samples(f, id)) rows += s.phase == 9 && s.end_ns > s.start_ns;
      EXPECT_EQ(rows, device_rows);
      // The GPU's state over the repetitions where NVML can be read here (it comes with the driver).
      if (d500::nvml::unavailable().empty()) {
        // The energy over the span, or none where NVML's counter did not advance in it (a few ms
        // of small kernels), with the reason: never a 0 J that is only the counter's step.
        if (H5Aexists(g, "device.energy_note") > 0) {
          EXPECT_TRUE(std::isnan(attr_double(g, "device.energy_j"))) << canonical;
          EXPECT_NE(attr_string(g, "device.energy_note").find("did not advance"), std::string::npos) << canonical;
        } else {
          EXPECT_GT(attr_double(g, "device.energy_j"), 0) << canonical;
        }
        EXPECT_GE(attr_double(g, "device.capped_s"), 0) << canonical;
        EXPECT_GT(attr_double(g, "device.sm_clock_mhz_end"), 0) << canonical;
        EXPECT_GT(attr_double(g, "device.span_s"), 0) << canonical;
        EXPECT_FALSE(attr_string(g, "device.clock_event_reasons").empty()) << canonical;
      } else {
        EXPECT_EQ(H5Aexists(g, "device.throttled"), 0)
            << canonical << ": no NVML here (" << d500::nvml::unavailable() << ")";
      }
      more(g, canonical);
    });
  }
};

const std::string kGpuHead =
    "[campaign]\nname = \"gpu\"\nrepetitions = 20\nwarmups = 3\n[fixed]\nworkload = \"gemm\"\n";

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
  for (const char* op : {"gemm", "conv2d", "pool2d", "batchnorm", "relu", "softmax"})
    EXPECT_TRUE(b->supports(op)) << op;
  if (!no_device.empty()) {
    // Each GPU point (one per operator) fails at setup with the reason; the CPU point of the same
    // two-rank job completes. The job still records each rank's device ("none", and why) and the
    // machine's GPU as rank 0 saw it; no point claims device memory it never held.
    const auto rows = reported(
        "[campaign]\nname = \"gpu\"\nrepetitions = 5\nwarmups = 1\n[fixed]\nranks_per_node = 2\n"
        "n = 8\nc = 4\nh = 8\n[axes]\nworkload = [\"gemm\", \"pool2d\", \"batchnorm\", \"relu\", \"softmax\"]\n"
        "backend = [\"cuda\", \"blas\"]\n[[exclude]]\nbackend = \"blas\"\n"
        "workload = [\"pool2d\", \"batchnorm\", \"relu\", \"softmax\"]\n");
    ASSERT_EQ(rows.size(), 6u);
    expect_outcomes(rows, [](const Row& row) { return row.at("backend") == "cuda" ? "no CUDA device" : ""; });
    const fs::path file = dir_ / "run" / "results" / "job-0000.h5";
    EXPECT_EQ(per_rank_strings(file, "env/devices"), std::vector<std::string>(2, "none: " + no_device));
    EXPECT_EQ(env_attr(file, "machine.gpu"), "none: " + no_device);
    for (const auto& [id, row] : rows) EXPECT_EQ(row.at("device_peak_memory_bytes"), "") << row.at("canonical");
  }
  // Reduced precision is the GPU's alone, refused at plan time elsewhere, with the file's line.
  std::string out;
  Cmd plan = sh(d500_cmd("plan " + write("bf16.toml", kGpuHead + "n = 64\nbackend = \"blas\"\ndtype = \"bf16\"\n") +
                         " -o " + (dir_ / "refused").string()));
  EXPECT_NE(plan.code, 0);
  EXPECT_NE(plan.out.find("bf16.toml:"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("needs a backend that computes in reduced precision (cuda)"), std::string::npos) << plan.out;
}

TEST_F(Gpu, GemmInEveryDtypeValidatesAndEachRepetitionHasItsDeviceDuration) {
  if (const std::string why = why_skip(true); !why.empty()) GTEST_SKIP() << why;
  const fs::path run =
      planned(kGpuHead + "n = 1024\nbackend = \"cuda\"\n[axes]\ndtype = [\"fp32\", \"tf32\", \"bf16\", \"fp16\"]\n");
  const hid_t f = ran_and_checked(run);
  ASSERT_GE(f, 0);
  each_validated_point(f, 4, [&](hid_t g, const std::string& id, const std::string& canonical) {
    const long long element =
        canonical.find("dtype=bf16") != std::string::npos || canonical.find("dtype=fp16") != std::string::npos ? 2 : 4;
    EXPECT_GE(attr_int(g, "device.peak_memory_bytes"), 3 * 1024 * 1024 * element) << "A, B and C on the device";
    // The GPU's peak for the dtype (an H100 or H200 is in d500's table): no repetition's device
    // rate may pass it, or the table or the work counted is wrong.
    const double peak = attr_double(g, "device.peak_flops");
    const std::string basis = attr_string(g, "device.peak_basis");
    // fp32, the default, is left out of the canonical text.
    const std::size_t at = canonical.find("dtype=");
    const std::string dtype = at == std::string::npos ? "fp32" : canonical.substr(at + 6, 4);
    if (basis.rfind("unknown: compute capability", 0) != 0) {
      EXPECT_GT(peak, 0) << basis;
      EXPECT_NE(basis.find(" " + dtype + " FLOP/clock/SM"), std::string::npos) << basis;
    }
    std::map<int, std::pair<long long, long long>> rep;  // rep -> (op duration, device duration)
    for (const auto& s : read_samples(f, id)) {
      if (s.phase == 0) rep[s.rep].first = s.end_ns - s.start_ns;
      if (s.phase == 9) rep[s.rep].second = s.end_ns - s.start_ns;
    }
    EXPECT_EQ(rep.size(), 23u);  // 3 warm-ups and 20 repetitions, each with both rows
    for (const auto& [k, v] : rep) {
      EXPECT_GT(v.second, 0) << "repetition " << k << " has no device duration";
      EXPECT_LE(v.second, v.first) << "repetition " << k << ": the device took longer than the host's launch and wait";
      if (peak > 0 && v.second > 0) {
        EXPECT_LT(2.0 * 1024 * 1024 * 1024 / (static_cast<double>(v.second) * 1e-9), peak) << basis;
      }
    }
  });
  H5Fclose(f);
}

TEST_F(Gpu, ConvolutionsInEveryPassValidateAndRecordTheAlgorithmCudnnChose) {
  if (const std::string why = why_skip_convolutions(); !why.empty()) GTEST_SKIP() << why;
  const hid_t f =
      // cuDNN's legacy calls, asked for: the default is its graph API (the next test).
      ran_and_checked(every_pass_and_choice("gpu-conv", "cudnn_api = \"legacy\"\n",
                                            "\"resnet50/res2_3x3\", \"resnet50/res4_3x3_stride2\""));
  ASSERT_GE(f, 0);
  each_on_device(f, 18, 13, [](hid_t g, const std::string& canonical) {
    const std::string algorithm = attr_string(g, "cudnn.algorithm");
    EXPECT_EQ(algorithm.rfind(pass_words(canonical), 0), 0u) << algorithm;
    EXPECT_EQ(algorithm.find("unknown"), std::string::npos) << algorithm;
    EXPECT_GE(attr_int(g, "cudnn.workspace_bytes"), 0);
    // Level 0's default is cuDNN's first choice ("heuristic", normalised away from the id); asked
    // for, a deterministic one (cuDNN has one for every pass of these 3x3 convolutions: ALGO_1).
    const bool deterministic = canonical.find("cudnn_algorithms=deterministic") != std::string::npos;
    EXPECT_EQ(canonical.find("cudnn_algorithms=heuristic"), std::string::npos) << canonical;
    EXPECT_EQ(attr_string(g, "cudnn.choice").find("first deterministic") != std::string::npos, deterministic)
        << attr_string(g, "cudnn.choice");
    if (deterministic) {
      EXPECT_EQ(algorithm.find("non-deterministic"), std::string::npos) << algorithm;
    }
    // Found: cuDNN timed every algorithm at setup and the point keeps the winner's time.
    const bool found = canonical.find("cudnn_algorithms=find") != std::string::npos;
    EXPECT_EQ(attr_string(g, "cudnn.choice").find("cudnnFind*AlgorithmEx") != std::string::npos, found)
        << attr_string(g, "cudnn.choice");
    EXPECT_EQ(H5Aexists(g, "cudnn.found_ms") > 0, found) << canonical;
    if (found) {
      EXPECT_GT(attr_double(g, "cudnn.found_ms"), 0.0) << canonical;
    }
  });
  H5Fclose(f);
}

// The same convolutions through cuDNN's graph API (cudnn_api = "graph"), a 1x1 among them: each
// pass validates against the double yardstick with the engine configuration its choice names,
// float32 arithmetic kept (no TF32 engine), a deterministic choice without cuDNN's
// non-deterministic note, a found one with the time it measured.
TEST_F(Gpu, ConvolutionsThroughCudnnsGraphApiValidateAndNameTheirEngine) {
  if (const std::string why = why_skip_convolutions(); !why.empty()) GTEST_SKIP() << why;
  const hid_t f = ran_and_checked(every_pass_and_choice("gpu-graph", "cudnn_api = \"graph\"\n",
                                                        "\"resnet50/res2_3x3\", \"resnet50/res2_1x1_reduce\""));
  ASSERT_GE(f, 0);
  each_on_device(f, 18, 13, [](hid_t g, const std::string& canonical) {
    EXPECT_NE(canonical.find("cudnn_api=graph"), std::string::npos) << canonical;
    const std::string algorithm = attr_string(g, "cudnn.algorithm"), choice = attr_string(g, "cudnn.choice");
    EXPECT_EQ(algorithm.rfind(pass_words(canonical) + "engine ", 0), 0u) << algorithm;
    EXPECT_NE(algorithm.find("(graph API"), std::string::npos) << algorithm;
    EXPECT_NE(choice.find("cuDNN's graph API"), std::string::npos) << choice;
    EXPECT_NE(choice.find("without TF32"), std::string::npos) << choice;
    EXPECT_GE(attr_int(g, "cudnn.workspace_bytes"), 0);
    if (canonical.find("cudnn_algorithms=deterministic") != std::string::npos) {
      EXPECT_EQ(algorithm.find("non-deterministic"), std::string::npos) << algorithm;
    }
    const bool found = canonical.find("cudnn_algorithms=find") != std::string::npos;
    EXPECT_EQ(H5Aexists(g, "cudnn.found_ms") > 0, found) << canonical;
    if (found) {
      EXPECT_GT(attr_double(g, "cudnn.found_ms"), 0.0) << canonical;
    }
  });
  H5Fclose(f);
}

// math = "tf32": convolutions (the legacy calls and the graph API, in every pass) and a training
// step of d500's executor may use TF32 tensor cores, validate within the tolerance widened for
// TF32's rounding, and say both. d500's executor calls cuDNN's graph API with cudnn_api = "graph".
// dtype = "bf16" and "fp16" (level 0) and math = "bf16" (the executor), each through both APIs: they
// validate within the 16-bit types' widened tolerance and say so; the executor's matrix products
// name CUBLAS_COMPUTE_32F_FAST_16BF; each point's peak is its type's.
TEST_F(Gpu, ReducedMathAndTheGraphApiValidateAtLevelZeroAndInTheExecutorAndSaySo) {
  if (const std::string why = why_skip_convolutions(); !why.empty()) GTEST_SKIP() << why;
  const hid_t f = ran_and_checked(planned(
      "[campaign]\nname = \"gpu-tf32\"\nrepetitions = 10\nwarmups = 3\n[fixed]\nworkload = \"conv2d\"\nbackend = \"cuda\"\nn = 8\n"
      "math = \"tf32\"\n[axes]\npass = [\"forward\", \"backward_data\", \"backward_filter\"]\n"
      "shape = [\"resnet50/res2_3x3\", \"resnet50/res2_1x1_reduce\"]\ncudnn_api = [\"legacy\", \"graph\"]\n"));
  ASSERT_GE(f, 0);
  each_on_device(f, 12, 13, [](hid_t g, const std::string& canonical) {
    EXPECT_NE(canonical.find("math=tf32"), std::string::npos) << canonical;
    const std::string choice = attr_string(g, "cudnn.choice");
    EXPECT_NE(choice.find("math = tf32"), std::string::npos) << choice;
    EXPECT_EQ(choice.find("without TF32"), std::string::npos) << choice;
    EXPECT_NE(attr_string(g, "validation_method").find("math = tf32"), std::string::npos)
        << attr_string(g, "validation_method");
    EXPECT_GT(attr_double(g, "validation_tolerance"), 8 * std::ldexp(1.0, -11)) << canonical;
  });
  H5Fclose(f);
  // dtype = "bf16" and "fp16" at level 0: cuDNN's 16-bit configurations through its legacy calls
  // and its graph API, validated within 9u.
  const hid_t half = ran_and_checked(planned(
      "[campaign]\nname = \"gpu-16bit\"\nrepetitions = 10\nwarmups = 3\n[fixed]\nworkload = \"conv2d\"\nbackend = \"cuda\"\nn = 8\n"
      "shape = \"resnet50/res2_3x3\"\n[axes]\npass = [\"forward\", \"backward_data\", \"backward_filter\"]\ndtype = [\"bf16\", \"fp16\"]\n"
      "cudnn_api = [\"legacy\", \"graph\"]\n"));
  ASSERT_GE(half, 0);
  each_on_device(half, 12, 13, [](hid_t g, const std::string& canonical) {
    const std::string dtype = canonical.find("dtype=bf16") != std::string::npos ? "bf16" : "fp16";
    const bool graph = canonical.find("cudnn_api=graph") != std::string::npos;
    const std::string choice = attr_string(g, "cudnn.choice");
    EXPECT_NE(choice.find((graph ? "tensor cores allowed (dtype = " : "CUDNN_TENSOR_OP_MATH (dtype = ") + dtype),
              std::string::npos)
        << choice;
    EXPECT_EQ(choice.find("graph API") != std::string::npos, graph) << choice;
    EXPECT_NE(attr_string(g, "validation_method").find("dtype = " + dtype), std::string::npos)
        << attr_string(g, "validation_method");
    const std::string basis = attr_string(g, "device.peak_basis");
    EXPECT_TRUE(basis.find(" " + dtype + " FLOP/clock/SM") != std::string::npos || basis.rfind("unknown: ", 0) == 0)
        << basis;
  });
  H5Fclose(half);
  const hid_t net =
      ran_and_checked(planned("[campaign]\nname = \"gpu-tf32-net\"\nrepetitions = 3\nwarmups = 1\n[fixed]\n"
                              "workload = \"network\"\nbackend = \"cuda\"\nbatch = 32\nnetwork = \"resnet20-cifar\"\n"
                              "pass = \"training\"\n[axes]\nmath = [\"fp32\", \"tf32\", \"bf16\"]\n"
                              "cudnn_api = [\"legacy\", \"graph\"]\n"));
  ASSERT_GE(net, 0);
  each_on_device(net, 6, 4, [](hid_t g, const std::string& canonical) {
    const std::string math = canonical.find("math=tf32") != std::string::npos   ? "tf32"
                             : canonical.find("math=bf16") != std::string::npos ? "bf16"
                                                                                : "fp32";
    const std::string method = attr_string(g, "validation_method");
    EXPECT_EQ(method.find("math = tf32") != std::string::npos, math == "tf32") << method;
    EXPECT_EQ(method.find("math = bf16") != std::string::npos, math == "bf16") << method;
    if (math == "bf16") {
      EXPECT_GT(attr_double(g, "validation_tolerance"), 9 * std::ldexp(1.0, -8)) << canonical;
      EXPECT_NE(method.find("activations the step keeps in bfloat16"), std::string::npos) << method;
    }
    // The step's bound is the arithmetic the point allows (the executor records the GPU's peak).
    const std::string basis = attr_string(g, "device.peak_basis");
    EXPECT_TRUE(basis.find(" " + math + " FLOP/clock/SM") != std::string::npos || basis.rfind("unknown: ", 0) == 0)
        << basis;
    const bool graph = canonical.find("cudnn_api=graph") != std::string::npos;
    int convolutions = 0;
    for (const std::string& impl : step_impls(g)) {
      if (impl.rfind("cuda cublas", 0) == 0) {
        EXPECT_EQ(impl.find("32F_FAST_16BF") != std::string::npos, math == "bf16") << impl;
      }
      if (impl.find("convolution") == std::string::npos) continue;
      ++convolutions;
      // math = "bf16": the activations between them stored in bfloat16 too (bf16_storage).
      const std::string words = math == "bf16" ? "cuda cudnn bf16 convolution (" : "cuda cudnn convolution (";
      EXPECT_EQ(impl.rfind(words + (graph ? "graph engines f" : "algos f"), 0), 0u) << impl;
    }
    EXPECT_GE(convolutions, 2) << canonical;
  });
  H5Fclose(net);
}

// cuDNN's other operators, each pass and mode: validated against the double reference, each
// repetition with its device duration, the call cuDNN made recorded, and the device memory the
// point held, at least its own tensors. The job records the rank's device and the GPU's facts.
TEST_F(Gpu, EveryCudnnOperatorValidatesInEachPassAndRecordsTheDeviceMemoryItHeld) {
  if (const std::string why = why_skip(true); !why.empty()) GTEST_SKIP() << why;
  if (!d500::find_backend("cuda")->supports("pool2d")) GTEST_SKIP() << "this build's cuda backend has no cuDNN";
  const fs::path run = planned(
      "[campaign]\nname = \"gpu-ops\"\nrepetitions = 10\nwarmups = 2\n[fixed]\nbackend = \"cuda\"\nn = 16\nc = 32\nh = 28\n[axes]\n"
      "workload = [\"pool2d\", \"pool2d\", \"pool2d\", \"pool2d\", \"batchnorm\", \"batchnorm\", \"batchnorm\", \"relu\", \"relu\", "
      "\"softmax\", \"softmax\"]\n"
      "pass = [\"forward\", \"backward\", \"forward\", \"backward\", \"forward\", \"forward\", \"backward\", \"forward\", \"backward\", "
      "\"forward\", \"backward\"]\n"
      "mode = [\"max\", \"max\", \"avg\", \"avg\", \"training\", \"inference\", \"training\", \"max\", \"max\", \"max\", \"max\"]\n"
      "[[zip]]\naxes = [\"workload\", \"pass\", \"mode\"]\n");
  const hid_t f = ran_and_checked(run);
  ASSERT_GE(f, 0);
  each_on_device(f, 11, 12, [](hid_t g, const std::string& canonical) {
    EXPECT_EQ(attr_string(g, "cudnn.choice").rfind("cudnn", 0), 0u) << attr_string(g, "cudnn.choice");
    const long long x_bytes = 4LL * 16 * 32 * (canonical.rfind("softmax:", 0) == 0 ? 1 : 28 * 28);
    EXPECT_GE(attr_int(g, "device.peak_memory_bytes"), x_bytes);
  });
  H5Fclose(f);
  const fs::path file = run / "results" / "job-0000.h5";
  const auto devices = per_rank_strings(file, "env/devices");
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].rfind("cuda:0 of ", 0), 0u) << devices[0];
  EXPECT_NE(devices[0].find(", GPU-"), std::string::npos) << devices[0];
  EXPECT_FALSE(env_attr(file, "machine.gpu_model").empty());
  // NVML's facts of the GPU, or why there are none.
  if (d500::nvml::unavailable().empty()) {
    EXPECT_FALSE(env_attr(file, "machine.gpu_nvml_driver").empty());
    EXPECT_GT(std::atof(env_attr(file, "machine.gpu_sm_clock_mhz_max").c_str()), 0)
        << env_attr(file, "machine.gpu_sm_clock_mhz_max");
  } else {
    EXPECT_EQ(env_attr(file, "machine.gpu_nvml"), "unavailable: " + d500::nvml::unavailable());
  }
}

// NCCL's collectives: without a device a point fails alone with the reason; off_cache (the
// host's caches) is refused for it at plan time; with a device, each collective validates on one
// rank per GPU, and two ranks on one GPU fail together with the reason.
TEST_F(Gpu, NcclCollectivesFailAloneWithoutADeviceAndValidateWithOne) {
  const d500::BackendInfo* b = d500::find_backend("nccl");
  if (!b || !b->built)
    GTEST_SKIP() << "this build has no nccl backend: " << (b ? b->not_built_reason : std::string("unknown"));
  const std::string no_device = b->no_device();
  const std::string head =
      "[campaign]\nname = \"nccl\"\nrepetitions = 10\nwarmups = 2\n[fixed]\nbytes = 65536\nranks_per_node = 1\n";
  Cmd refused = sh(d500_cmd(
      "plan " + write("cold.toml", head + "workload = \"allreduce\"\nbackend = \"nccl\"\noff_cache = \"64M\"\n") +
      " -o " + (dir_ / "refused").string()));
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.out.find("keeps its buffers on the GPU: leave off_cache unset"), std::string::npos) << refused.out;
  // One and two ranks: two ranks on a host with one GPU would share it, which NCCL refuses; the
  // ranks agree on that before joining NCCL and fail together, saying why, never hanging.
  int gpus = 0;
  for (const auto& [k, v] : b->device_facts())
    if (k == "gpu_count") gpus = std::stoi(v);
  const auto rows = reported(
      std::string(head).replace(head.find("ranks_per_node = 1\n"), 19, "") +
      "[axes]\nranks_per_node = [1, 2]\nworkload = [\"allreduce\", \"allgather\", \"broadcast\", \"reduce_scatter\"]\n"
      "backend = [\"nccl\", \"mpi\"]\nbuffers = [\"\", \"in-place\"]\n[[exclude]]\nbuffers = \"in-place\"\n"
      "workload = [\"allgather\", \"broadcast\", \"reduce_scatter\"]\n");
  ASSERT_EQ(rows.size(), 20u);
  expect_outcomes(rows, [&](const Row& row) -> std::string {
    const bool shared = row.at("ranks") == "2" && gpus < 2;
    if (row.at("backend") == "mpi" || (no_device.empty() && !shared)) return "";
    return no_device.empty() ? "would share the GPU at" : "no CUDA device";
  });
}

// LibTorch's own executor on the GPU (libtorch-cuda). Without a CUDA LibTorch (Debian's is
// CPU-only) or a device, `d500 backends` says why, a point on it fails alone with the reason
// while the same network on the CPU completes, and the job records why per rank; level 3 on it
// is refused at plan time. With both, a network validates in inference and training against the
// double reference, and training runs with LibTorch's optimizer and d500's.
TEST_F(Gpu, LibTorchsExecutorOnTheGpuValidatesOrSaysWhyItCannotRun) {
  const d500::BackendInfo* b = d500::find_backend("libtorch-cuda");
  if (!b || !b->built)
    GTEST_SKIP() << "this build has no libtorch-cuda backend: " << (b ? b->not_built_reason : std::string("unknown"));
  const std::string no_device = b->no_device();
  expect_refused_at_plan("distributed", "libtorch-cuda");
  if (!no_device.empty()) {
    Cmd list = sh(d500_cmd("backends"));
    EXPECT_NE(list.out.find("built, no CUDA device: its points fail at setup on this host (" + no_device + ")"),
              std::string::npos)
        << list.out;
    const auto rows = reported(
        "[campaign]\nname = \"lt\"\nrepetitions = 3\nwarmups = 1\n[fixed]\nworkload = \"network\"\n"
        "network = \"lenet5\"\nbatch = 8\n[axes]\nbackend = [\"libtorch-cuda\", \"libtorch-native\"]\n");
    ASSERT_EQ(rows.size(), 2u);
    expect_outcomes(rows, [&](const Row& row) {
      return row.at("backend") == "libtorch-cuda" ? "libtorch-cuda: " + no_device : "";
    });
    EXPECT_EQ(per_rank_strings(dir_ / "run" / "results" / "job-0000.h5", "env/devices"),
              std::vector<std::string>{"none: " + no_device});
    return;
  }
  const auto rows = reported(
      "[campaign]\nname = \"lt\"\nrepetitions = 5\nwarmups = 2\n[fixed]\nnetwork = \"lenet5\"\n"
      "backend = \"libtorch-cuda\"\nbatch = 32\ndataset = \"synthetic\"\nsynthetic_samples = 512\nsteps = 10\n"
      "eval_interval_steps = 0\neval_samples = 64\noptimizer = \"momentum\"\n[axes]\n"
      "workload = [\"network\", \"network\", \"train\", \"train\"]\npass = [\"inference\", \"training\", \"inference\", \"training\"]\n"
      "optimizer_impl = [\"reference\", \"native\", \"native\", \"reference\"]\n"
      "[[zip]]\naxes = [\"workload\", \"pass\", \"optimizer_impl\"]\n");
  ASSERT_EQ(rows.size(), 4u);
  expect_outcomes(rows, [](const Row&) { return std::string(); });
  const auto devices = per_rank_strings(dir_ / "run" / "results" / "job-0000.h5", "env/devices");
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].rfind("cuda:0 of ", 0), 0u) << devices[0];
}

// LibTorch as its users run it on a GPU: strict float32 by default (LibTorch's own default lets
// cuDNN use TF32), TF32, bf16 autocast, channels_last and cudnn.benchmark, each point saying
// which in its `executor` attribute, and each training step validating against the double
// reference within its math's tolerance.
TEST_F(Gpu, LibTorchOnTheGpuRunsEachMathAndLayoutAsPyTorchUsersSetThem) {
  const d500::BackendInfo* b = d500::find_backend("libtorch-cuda");
  if (!b || !b->built)
    GTEST_SKIP() << "this build has no libtorch-cuda backend: " << (b ? b->not_built_reason : std::string("unknown"));
  if (const std::string why = b->no_device(); !why.empty()) GTEST_SKIP() << why;
  const auto rows = reported(
      "[campaign]\nname = \"ltm\"\nrepetitions = 4\nwarmups = 1\n[fixed]\nworkload = \"network\"\nnetwork = \"lenet5\"\n"
      "backend = \"libtorch-cuda\"\nbatch = 32\npass = \"training\"\n[axes]\n"
      "math = [\"fp32\", \"tf32\", \"bf16\", \"bf16\"]\nmemory_format = [\"nchw\", \"channels_last\", \"nchw\", \"channels_last\"]\n"
      "cudnn_algorithms = [\"deterministic\", \"find\", \"find\", \"heuristic\"]\n"
      "[[zip]]\naxes = [\"math\", \"memory_format\", \"cudnn_algorithms\"]\n");
  ASSERT_EQ(rows.size(), 4u);
  expect_outcomes(rows, [](const Row&) { return std::string(); });
  const hid_t f = H5Fopen((dir_ / "run" / "results" / "job-0000.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  std::set<std::string> said;
  for (const auto& id : point_ids(f)) {
    const hid_t g = H5Gopen2(f, ("/points/" + id).c_str(), H5P_DEFAULT);
    const std::string canonical = attr_string(g, "canonical"), executor = attr_string(g, "executor");
    const bool bf16 = canonical.find("math=bf16") != std::string::npos,
               tf32 = canonical.find("math=tf32") != std::string::npos;
    EXPECT_NE(executor.find(bf16   ? "bf16 autocast"
                            : tf32 ? "TF32 allowed"
                                   : "strict float32 (TF32 off)"),
              std::string::npos)
        << executor;
    EXPECT_NE(executor.find(canonical.find("channels_last") != std::string::npos ? ", channels_last" : ", NCHW"),
              std::string::npos)
        << executor;
    said.insert(executor.substr(executor.rfind(", ") + 2));
    H5Gclose(g);
  }
  H5Fclose(f);
  EXPECT_EQ(said, (std::set<std::string>{"deterministic cuDNN", "cudnn.benchmark", "cuDNN's heuristic choice"}));
}

// LibTorch training on the GPU as a PyTorch loop runs it: the step's passes and optimizer
// without waits between them (one at the step's end), the next batch made and copied beside the
// step, SGD's family as torch.optim runs it there (foreach), the other rules torch::optim's; each
// optimizer agrees with d500's reference over its check's steps and the step validates.
TEST_F(Gpu, LibTorchTrainsOnTheGpuAsAPyTorchLoopDoesAndItsOptimizersAgreeWithTheReference) {
  const d500::BackendInfo* b = d500::find_backend("libtorch-cuda");
  if (!b || !b->built)
    GTEST_SKIP() << "this build has no libtorch-cuda backend: " << (b ? b->not_built_reason : std::string("unknown"));
  if (const std::string why = b->no_device(); !why.empty()) GTEST_SKIP() << why;
  const fs::path run = planned(
      "[campaign]\nname = \"ltt\"\n[fixed]\nworkload = \"train\"\nnetwork = \"lenet5\"\nbackend = \"libtorch-cuda\"\n"
      "batch = 32\ndataset = \"synthetic\"\nsynthetic_samples = 256\nsteps = 12\neval_interval_steps = 5\n"
      "eval_samples = 64\nweight_decay = 0.01\noptimizer_impl = \"native\"\n[axes]\n"
      "optimizer = [\"sgd\", \"momentum\", \"nesterov\", \"adam\"]\n");
  const hid_t f = ran_and_checked(run);
  ASSERT_GE(f, 0);
  each_validated_point(f, 4, [&](hid_t g, const std::string& id, const std::string& canonical) {
    EXPECT_EQ(attr_int(g, "train.steps"), 12) << canonical;
    const std::string opt = attr_string(g, "train.optimizer");
    EXPECT_NE(opt.find(canonical.find("optimizer=adam") != std::string::npos ? "torch::optim" : "foreach"),
              std::string::npos)
        << opt;
    EXPECT_NE(attr_string(g, "executor").find("without waits between them"), std::string::npos)
        << attr_string(g, "executor");
    EXPECT_NE(attr_string(g, "train.timing").find("copies it to the device on a stream beside"), std::string::npos)
        << attr_string(g, "train.timing");
    // Forward, backward and update: the device's times between the step's events, each step.
    std::map<int, int> phases;
    for (const auto& s : read_samples(f, id))
      if (s.phase != 0 && s.end_ns > s.start_ns) ++phases[s.phase];
    for (const d500::Phase p : {d500::Phase::Data, d500::Phase::Forward, d500::Phase::Backward, d500::Phase::Update})
      EXPECT_EQ(phases[static_cast<int>(p)], 12) << canonical << ": phase " << static_cast<int>(p);
  });
  H5Fclose(f);
}

// d500's own executor on the GPU (levels 1 and 2): the network lives in device memory, cuBLAS
// and cuDNN run the nodes they cover, the rest falls back through host mirrors; d500's optimizers
// train the host's copies of the parameters. Level 3 on it is refused at plan time. Without a
// device, each cuda point fails alone with the reason and the host point beside it completes.
// cuda_graph = "step": LeNet-5's training step recorded once as a CUDA Graph (the second step)
// and replayed follows the step run pass by pass bit for bit (deterministic cuDNN algorithms),
// validates, and times each replayed step as one device row instead of forward, backward and
// update; a network with a node cuDNN lacks here is refused at setup, naming it.
TEST_F(Gpu, ARecordedTrainingStepFollowsThePassByPassCurveAndIsTimedAsOneDeviceRow) {
  if (const std::string why = why_skip(false); !why.empty()) GTEST_SKIP() << why;
  if (!d500::find_backend("cuda")->no_device().empty())
    GTEST_SKIP() << "no GPU here: " << d500::find_backend("cuda")->no_device();
  const fs::path run = planned(
      "[campaign]\nname = \"graph\"\nrepetitions = 1\nwarmups = 2\n[fixed]\nworkload = \"train\"\nnetwork = \"lenet5\"\n"
      "backend = \"cuda\"\nbatch = 32\ndataset = \"synthetic\"\nsynthetic_samples = 512\nsteps = 12\n"
      "eval_interval_steps = 4\neval_samples = 64\noptimizer = \"momentum\"\noptimizer_impl = \"native\"\nseed = 5\n"
      "[axes]\ncuda_graph = [\"off\", \"step\"]\n");
  const hid_t f = ran_and_checked(run);
  ASSERT_GE(f, 0);
  std::vector<double> losses;
  each_validated_point(f, 2, [&](hid_t g, const std::string& id, const std::string& canonical) {
    EXPECT_EQ(attr_int(g, "train.steps"), 12) << canonical;
    losses.push_back(attr_double(g, "train.final_loss"));
    std::map<int, int> rows;
    for (const auto& smp : read_samples(f, id)) ++rows[smp.phase];
    const bool recorded = canonical.find("cuda_graph=step") != std::string::npos;
    EXPECT_EQ(attr_string(g, "train.timing").find("recorded (cuda_graph") != std::string::npos, recorded)
        << attr_string(g, "train.timing");
    if (recorded) {
      EXPECT_EQ(rows[2], 1) << "forward timed at the first step only, which runs pass by pass";
      EXPECT_EQ(rows[9], 11) << "one device row per replayed step";
    } else {
      EXPECT_EQ(rows[2], 12);
      EXPECT_EQ(rows[9], 0);
    }
  });
  H5Fclose(f);
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_EQ(losses[0], losses[1]) << "the replayed steps compute what the passes do";
}

// memory_format = "channels_last" on cuda: ResNet-20's training step (convolutions, batch
// normalisations, ReLUs, residual additions, the global pool) validates through both cuDNN APIs
// in float32 and bf16 with its activations NHWC, each convolution, normalisation and pooling saying
// so (the first convolution turning the NCHW input), each residual join one AddRelu node on d500's
// kernel (fusion's default), and a training run follows the NCHW curve.
TEST_F(Gpu, ChannelsLastKeepsResNetsActivationsNhwcAndValidatesThroughBothCudnnApis) {
  if (const std::string why = why_skip_convolutions(); !why.empty()) GTEST_SKIP() << why;
  const hid_t net = ran_and_checked(planned(
      "[campaign]\nname = \"gpu-nhwc\"\nrepetitions = 3\nwarmups = 1\n[fixed]\nworkload = \"network\"\n"
      "backend = \"cuda\"\nbatch = 32\nnetwork = \"resnet20-cifar\"\npass = \"training\"\n"
      "memory_format = \"channels_last\"\n[axes]\nmath = [\"fp32\", \"bf16\"]\ncudnn_api = [\"legacy\", \"graph\"]\n"));
  ASSERT_GE(net, 0);
  each_on_device(net, 4, 4, [](hid_t, const std::string&) {});
  each_validated_point(net, 4, [&](hid_t g, const std::string&, const std::string& canonical) {
    // math = "bf16" keeps the activations in bfloat16 too (bf16_storage), where the GPU's cuDNN
    // takes bfloat16 normalisations and poolings (else the job's log says why not).
    const bool half = canonical.find("math=bf16") != std::string::npos;
    EXPECT_EQ(attr_string(g, "executor").find("activations and their gradients in bfloat16") != std::string::npos, half)
        << attr_string(g, "executor");
    int convolutions = 0, turned = 0, norms = 0, joins = 0;
    for (const std::string& impl : step_impls(g)) {
      joins += impl.rfind("cuda d500 kernel (add and relu in one pass", 0) == 0;
      EXPECT_EQ(impl.find("cuda cudnn convolution"), std::string::npos) << "an NCHW convolution: " << impl;
      if (impl.rfind("cuda cudnn nhwc", 0) == 0) {
        ++convolutions;
        EXPECT_EQ(impl.rfind(half ? "cuda cudnn nhwc bf16 conv" : "cuda cudnn nhwc conv", 0), 0u) << impl;
        turned += impl.find(" conv from nchw (") != std::string::npos;
      }
      if (impl.find("batch normalisation") != std::string::npos || impl.find("batchnorm") != std::string::npos) {
        ++norms;
        EXPECT_NE(impl.find("NHWC"), std::string::npos) << impl;
        EXPECT_EQ(impl.find("bfloat16") != std::string::npos, half) << impl;
      }
      if (half && (impl.find("relu") != std::string::npos || impl.find("pool") != std::string::npos)) {
        EXPECT_NE(impl.find("bfloat16"), std::string::npos) << impl;
      }
    }
    EXPECT_GE(convolutions, 2 * 19) << canonical;
    EXPECT_EQ(turned, 2) << "the first convolution's input, forward and backward: " << canonical;
    EXPECT_GE(norms, 2 * 19) << canonical;
    // fusion = "add_relu" (the default): each residual join one node, NHWC too, in both passes.
    EXPECT_NE(canonical.find("fusion=add_relu"), std::string::npos) << canonical;
    EXPECT_EQ(attr_int(g, "executor.fused_add_relu"), 9) << canonical;
    EXPECT_EQ(joins, 2 * 9) << canonical;
  });
  H5Fclose(net);
  const hid_t f = ran_and_checked(planned(
      "[campaign]\nname = \"gpu-nhwc-train\"\nrepetitions = 1\nwarmups = 2\n[fixed]\nworkload = \"train\"\n"
      "network = \"resnet20-cifar\"\nbackend = \"cuda\"\nbatch = 32\ndataset = \"synthetic\"\nsynthetic_samples = 512\n"
      "steps = 12\neval_interval_steps = 4\neval_samples = 64\noptimizer = \"momentum\"\noptimizer_impl = \"native\"\n"
      "seed = 5\ncudnn_algorithms = \"deterministic\"\n[axes]\nmemory_format = [\"nchw\", \"channels_last\"]\n"));
  ASSERT_GE(f, 0);
  std::vector<double> losses;
  each_validated_point(f, 2, [&](hid_t g, const std::string&, const std::string&) {
    losses.push_back(attr_double(g, "train.final_loss"));
  });
  H5Fclose(f);
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_NEAR(losses[1], losses[0], 1e-3 * std::abs(losses[0]) + 1e-4)
      << "NHWC sums in another order than NCHW, float32's rounding apart over 12 steps";
}

TEST_F(Gpu, DsExecutorRunsNetworksOnTheGpuAndValidatesOrSaysWhyItCannot) {
  if (const std::string why = why_skip(false); !why.empty()) GTEST_SKIP() << why;
  const std::string no_device = d500::find_backend("cuda")->no_device();
  const d500::BackendInfo* nccl = d500::find_backend("nccl");
  const bool with_nccl = nccl && nccl->built;
  {  // d500's device optimizer has every rule through its fused kernel (nvcc); a build without nvcc
     // has SGD's family only, and refuses adam at plan time, naming the line
    const std::string file =
        write("adam.toml",
              "[campaign]\nname = \"adam\"\n[fixed]\nworkload = \"train\"\nbackend = \"cuda\"\n"
              "dataset = \"synthetic\"\nsteps = 2\noptimizer = \"adam\"\noptimizer_impl = \"native\"\n");
    const Cmd planned_adam = sh(d500_cmd("plan " + file + " -o " + (dir_ / "plan-adam").string()));
#ifdef D500_HAVE_CUDA_KERNELS
    EXPECT_EQ(planned_adam.code, 0) << planned_adam.out;
#else
    EXPECT_NE(planned_adam.code, 0);
    EXPECT_NE(planned_adam.out.find("adam.toml:"), std::string::npos) << planned_adam.out;
    EXPECT_NE(planned_adam.out.find("d500's device optimizer, which in this build"), std::string::npos)
        << planned_adam.out;
#endif
    // cuDNN's choice of algorithms is cuda's alone: on another backend the key is refused.
    const std::string other =
        write("algos.toml",
              "[campaign]\nname = \"algos\"\n[fixed]\nworkload = \"network\"\nbackend = \"reference\"\n"
              "network = \"lenet5\"\nbatch = 2\ncudnn_algorithms = \"heuristic\"\n");
    const Cmd refused = sh(d500_cmd("plan " + other + " -o " + (dir_ / "refused-algos").string()));
    EXPECT_NE(refused.code, 0);
    EXPECT_NE(refused.out.find("'cudnn_algorithms' is only for backends \"cuda\" and \"libtorch-cuda\""),
              std::string::npos)
        << refused.out;
  }
  if (!no_device.empty()) {
    // Level 1 and level 3 (averaged on the GPU by NCCL when the build has it) fail at setup alone.
    const auto rows = reported(
        "[campaign]\nname = \"l1\"\nrepetitions = 3\nwarmups = 1\n[fixed]\nnetwork = \"lenet5\"\nbatch = 8\n"
        "dataset = \"synthetic\"\nsynthetic_samples = 64\nsteps = 2\n[axes]\n"
        "workload = [\"network\", \"network\", \"distributed\"]\nbackend = [\"cuda\", \"reference\", \"cuda\"]\n"
        "communication = [\"mpi\", \"mpi\", \"" +
        std::string(with_nccl ? "nccl" : "mpi") +
        "\"]\n"
        "[[zip]]\naxes = [\"workload\", \"backend\", \"communication\"]\n");
    ASSERT_EQ(rows.size(), 3u);
    expect_outcomes(rows, [&](const Row& row) {
      return row.at("backend") == "cuda" ? "no CUDA device on this host (" + no_device + ")" : "";
    });
    return;
  }
  // Every operator the built-in CNNs use, in both passes: LeNet-5 (convolutions, max pooling,
  // Gemm, ReLU) and ResNet-20 (batch normalisation with running or batch statistics, residual
  // adds, global average pooling). Each repetition has the device's own duration of the step; each
  // point the device memory it held (at least its weights) and the executor's device in its
  // description. A training step with cuDNN's heuristic first choices (cudnn_algorithms =
  // "heuristic", PyTorch's default) validates too; its pooling says when it adds with atomics.
  // Convolutions through cuDNN's legacy calls, asked for (the default graph API: ReducedMath...).
  const fs::path run = planned(
      "[campaign]\nname = \"l1\"\nrepetitions = 5\nwarmups = 2\n[fixed]\nworkload = \"network\"\n"
      "backend = \"cuda\"\nbatch = 32\ncudnn_api = \"legacy\"\n[axes]\n"
      "network = [\"lenet5\", \"resnet20-cifar\", \"lenet5\", \"resnet20-cifar\", \"lenet5\", \"resnet20-cifar\"]\n"
      "pass = [\"inference\", \"inference\", \"training\", \"training\", \"training\", \"training\"]\n"
      "cudnn_algorithms = [\"deterministic\", \"deterministic\", \"deterministic\", \"deterministic\", \"heuristic\", \"find\"]\n"
      "[[zip]]\naxes = [\"network\", \"pass\", \"cudnn_algorithms\"]\n");
  const hid_t f = ran_and_checked(run);
  ASSERT_GE(f, 0);
  each_on_device(f, 6, 7, [](hid_t g, const std::string& canonical) {
    EXPECT_NE(attr_string(g, "executor").find(" on cuda:0, "), std::string::npos) << attr_string(g, "executor");
    EXPECT_GE(attr_int(g, "device.peak_memory_bytes"), attr_int(g, "network.weight_bytes")) << canonical;
    // The executor's default is "deterministic", normalised away from the id.
    EXPECT_EQ(canonical.find("cudnn_algorithms=deterministic"), std::string::npos) << canonical;
    const bool heuristic = canonical.find("cudnn_algorithms=heuristic") != std::string::npos;
    const bool found = canonical.find("cudnn_algorithms=find") != std::string::npos;
    // Every convolution on cuDNN, each with deterministic algorithms (these small ones have them),
    // unless the point asked for cuDNN's first or fastest choices.
    int convolutions = 0, pools = 0;
    for (const std::string& impl : step_impls(g)) {
      if (impl.find("pooling") != std::string::npos) {
        ++pools;
        // LeNet-5's are max pools (deterministic unless asked otherwise); ResNet-20's a global average.
        if (canonical.find("network=lenet5") != std::string::npos) {
          EXPECT_EQ(impl.find("atomics") != std::string::npos, heuristic || found) << impl;
        }
      }
      if (impl.find("convolution") == std::string::npos) continue;
      ++convolutions;
      EXPECT_EQ(impl.rfind("cuda cudnn convolution (algos f", 0), 0u) << impl;
      EXPECT_EQ(impl.find(", found") != std::string::npos, found) << impl;
      if (!heuristic && !found) {
        EXPECT_NE(impl.find(", deterministic)"), std::string::npos) << impl;
      }
    }
    EXPECT_GE(convolutions, 2) << canonical;
    EXPECT_GE(pools, 1) << canonical;
#ifdef D500_HAVE_CUDA_KERNELS
    // LeNet-5's every node runs on the GPU, its training loss on d500's own kernels: no step
    // stops for the host.
    if (canonical.find("network=lenet5") != std::string::npos) {
      bool loss = false;
      for (const std::string& impl : step_impls(g)) {
        EXPECT_EQ(impl.find("fallback"), std::string::npos) << impl;
        loss = loss || impl == "cuda d500 kernels (SoftmaxCrossEntropyLoss)";
      }
      EXPECT_EQ(loss, canonical.find("pass=training") != std::string::npos) << canonical;
    }
#endif
  });
  H5Fclose(f);
#ifdef D500_HAVE_CUDA_KERNELS
  // The transformer encoder trained a step, validated against the double yardstick: its
  // embedding, broadcast arithmetic, GELU's Erf, the attention's transposes, its layer
  // normalisations and the mean pooling (ReduceMean) on d500's own kernels: no step stops for the
  // host.
  fs::remove_all(run);
  const hid_t ft = ran_and_checked(
      planned("[campaign]\nname = \"l1t\"\nrepetitions = 3\nwarmups = 1\n[fixed]\nworkload = \"network\"\n"
              "backend = \"cuda\"\nnetwork = \"transformer-encoder\"\nbatch = 2\npass = \"training\"\n"));
  ASSERT_GE(ft, 0);
  each_on_device(ft, 1, 4, [](hid_t g, const std::string& canonical) {
    std::map<std::string, int> kernels;
    for (const std::string& impl : step_impls(g)) {
      EXPECT_EQ(impl.find("fallback"), std::string::npos) << canonical << ": " << impl;
      ++kernels[impl];
    }
    for (const char* k : {"gather", "layer normalisation", "Erf", "ReduceMean", "transpose", "broadcast Add",
                          "broadcast Mul", "broadcast Div"})
      EXPECT_GE(kernels[std::string("cuda d500 kernels (") + k + ")"], 1) << k;
  });
  H5Fclose(ft);
#endif
  // Level 2: LeNet-5 trained on the GPU by d500's momentum optimizer on the host's copies and by
  // its device optimizer (checked against the reference over its first steps), validated like
  // every training point.
  fs::remove_all(run);  // the next campaign plans into the same directory
  // With nvcc, Adam by the device optimizer's fused kernel too (its first steps checked against
  // the reference's, as every native optimizer's are).
#ifdef D500_HAVE_CUDA_KERNELS
  const std::string optimizers = "\"momentum\", \"momentum\", \"adam\"",
                    optimizer_impls = "\"reference\", \"native\", \"native\"";
  const std::size_t l2_points = 3;
#else
  const std::string optimizers = "\"momentum\", \"momentum\"", optimizer_impls = "\"reference\", \"native\"";
  const std::size_t l2_points = 2;
#endif
  const auto trained = reported(
      "[campaign]\nname = \"l2\"\n[fixed]\nworkload = \"train\"\nnetwork = \"lenet5\"\nbackend = \"cuda\"\n"
      "batch = 32\ndataset = \"synthetic\"\nsynthetic_samples = 512\nsteps = 10\neval_interval_steps = 0\n"
      "eval_samples = 64\nlr = 0.002\n[axes]\noptimizer = [" +
      optimizers + "]\noptimizer_impl = [" + optimizer_impls +
      "]\n[[zip]]\naxes = [\"optimizer\", \"optimizer_impl\"]\n");
  ASSERT_EQ(trained.size(), l2_points);
  expect_outcomes(trained, [](const Row&) { return std::string(); });

  // Level 3 on one rank: the allreduce over MPI (through the host's copies) and, with NCCL, on
  // the device, plain and in buckets started during backward, and model averaging on the device
  // (at step 8), and ps-sync's server on rank 0 on the device, follow level 2's curve bit for bit
  // (the mean over one rank is the rank's own, and
  // the executor's cuDNN algorithms are deterministic); with NCCL and the device optimizer too,
  // nothing of the step goes through the host, and it validates.
  fs::remove_all(run);
  const std::string works =
      with_nccl
          ? "\"train\", \"distributed\", \"distributed\", \"distributed\", \"distributed\", \"distributed\", \"distributed\""
          : "\"train\", \"distributed\"";
  const std::string comms =
      with_nccl ? "\"mpi\", \"mpi\", \"nccl\", \"nccl\", \"nccl\", \"nccl\", \"nccl\"" : "\"mpi\", \"mpi\"";
  const std::string schemes =
      with_nccl
          ? "\"allreduce\", \"allreduce\", \"allreduce\", \"allreduce-overlap\", \"model-averaging\", \"allreduce\", \"ps-sync\""
          : "\"allreduce\", \"allreduce\"";
  const std::string impls =
      with_nccl ? "\"reference\", \"reference\", \"reference\", \"reference\", \"reference\", \"native\", \"reference\""
                : "\"reference\", \"reference\"";
  const fs::path l3 = planned(
      "[campaign]\nname = \"l3\"\nrepetitions = 1\n[fixed]\nnetwork = \"lenet5\"\nbackend = \"cuda\"\n"
      "batch = 32\ndataset = \"synthetic\"\nsynthetic_samples = 512\nsteps = 12\neval_interval_steps = 4\n"
      "eval_samples = 64\noptimizer = \"momentum\"\nseed = 5\ncheckpoint_interval = 0\nbucket_bytes = 65536\n[axes]\nworkload = [" +
      works + "]\ncommunication = [" + comms + "]\nscheme = [" + schemes + "]\noptimizer_impl = [" + impls +
      "]\n[[zip]]\naxes = [\"workload\", \"communication\", \"scheme\", \"optimizer_impl\"]\n");
  const hid_t f3 = ran_and_checked(l3);
  ASSERT_GE(f3, 0);
  std::vector<std::pair<double, double>> finals;
  each_validated_point(f3, with_nccl ? 7 : 2, [&](hid_t g, const std::string&, const std::string& canonical) {
    EXPECT_EQ(attr_int(g, "train.steps"), 12) << canonical;
    if (canonical.find("communication=nccl") != std::string::npos) {
      EXPECT_NE(attr_string(g, "dist.method").find("ncclAllReduce"), std::string::npos)
          << attr_string(g, "dist.method");
    }
    if (canonical.find("scheme=ps-sync") != std::string::npos) {
      EXPECT_NE(attr_string(g, "dist.method").find("reduced to rank 0"), std::string::npos)
          << attr_string(g, "dist.method");
    }
    if (canonical.find("optimizer_impl=native") != std::string::npos) {
      EXPECT_NE(attr_string(g, "train.optimizer").find("device optimizer"), std::string::npos)
          << attr_string(g, "train.optimizer");
    } else {
      finals.emplace_back(attr_double(g, "train.final_loss"), attr_double(g, "train.final_accuracy"));
    }
  });
  H5Fclose(f3);
  for (const auto& fl : finals) {
    EXPECT_EQ(fl.first, finals.at(0).first);
    EXPECT_EQ(fl.second, finals.at(0).second);
  }
}
