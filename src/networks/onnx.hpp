#pragma once
// ONNX models in and out, through the ONNX library (Debian libonnx-dev): a model file is parsed,
// checked by ONNX's checker and shape inference, given a static batch, and converted into
// d500's graph (backends/graph.hpp), where d500's own shape inference runs over every node
// (cross-checked with ONNX's), constant subgraphs (shape computations on int64 tensors) are
// folded, and anything d500 cannot run is refused with the node, the operator, the opset and what
// this build supports -- at plan time, never mid-job.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backends/graph.hpp"

namespace d500 {

struct LoadOptions {
  // The batch to run: replaces axis 0 of every data input when the model leaves it symbolic or
  // at 1, and must equal it otherwise. <= 0: keep the model's (which must then be fixed).
  std::int64_t batch = -1;
  // Graph inputs given values at load time (by name): they become constants, not inputs, so
  // that a shape or an axis a test passes as an input is known statically. Never trainable.
  std::map<std::string, std::vector<std::byte>> fixed_inputs;
  // false: a built-in network's seeded weights are left 0, for a load that reads only shapes
  // and sizes (the planner's checks and memory estimates: generating ResNet-50's 25 M values
  // took a third of each load). A model file is read whole either way.
  bool weights = true;
};

// What a model file says about itself before d500 changes anything.
struct ModelFacts {
  int opset = 0;                     // after conversion
  int converted_from = 0;            // the model's own opset when ONNX's version converter upgraded it
  std::int64_t declared_batch = -1;  // axis 0 of the first data input; -1: symbolic
  std::string producer;              // producer_name producer_version
  std::vector<std::string> ops;      // the operator types of its nodes, as written (before folding)
  int nodes = 0;                     // its main graph's nodes, as written (before folding)
  std::string file_hash;             // FNV-1a 64 (hex) of the .onnx file's bytes; "" when loaded from memory
};

// Loads `path` (an .onnx file; external data beside it is read too). Throws d500::Error that
// names the file and, for a node, its name, operator and opset.
Graph load_onnx_file(const std::string& path, const LoadOptions& opt, ModelFacts* facts = nullptr);
// The same from a serialized model in memory (`what` names it in errors).
Graph load_onnx_bytes(const std::string& bytes, const std::string& what, const LoadOptions& opt,
                      ModelFacts* facts = nullptr);

// d500's shape inference and constant folding over a graph whose tensors' types and shapes are
// known for inputs and constants: fills every other tensor's, folds nodes whose inputs are known
// at load time (never float computations on the model's weights, which stay trainable), and
// drops nodes and constants no output depends on. Used by the loader and when d500 appends nodes
// (the training loss).
void infer_and_fold(Graph& g, const std::string& what);

}  // namespace d500
