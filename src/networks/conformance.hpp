#pragma once
// Conformance with ONNX's backend tests: cases in the ONNX backend-test layout (a directory with
// model.onnx and test_data_set_N/ holding input_K.pb and output_K.pb TensorProtos), run through
// an executor and compared with the expected outputs as ONNX's own runner compares them
// (numpy's allclose, rtol 1e-3, atol 1e-7; exact for integers and booleans).
#include <ostream>
#include <string>
#include <vector>

#include "backends/registry.hpp"

namespace d500 {

struct ConformanceCase {
  std::string name, dir;
  std::vector<std::string> ops;  // operator types the model uses (before folding)
  enum class Result { Pass, Fail, CannotRun } result = Result::CannotRun;
  double worst_rel_error = 0;  // max |got - want| / max(|want|, 1e-30) over every output element
  std::string detail;          // why it failed or cannot run
};

struct ConformanceSummary {
  std::vector<ConformanceCase> cases;
  int passed = 0, failed = 0, cannot_run = 0;
};

// Finds cases under each of `roots` (a case directory itself, or a directory of them), runs them
// on `backend` (d500's executor on its kernels, or its own executor when it is one), and writes
// one line per case and a summary per operator to `out`.
ConformanceSummary run_conformance(const std::vector<std::string>& roots, const BackendInfo& backend, std::ostream& out,
                                   int threads = 1);

}  // namespace d500
