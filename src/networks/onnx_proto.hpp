#pragma once
// The ONNX library's types, for the files of networks/ that build or read protobuf messages
// (onnx.cpp, builtin.cpp, conformance.cpp); everything else sees only d500's Graph.
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "networks/onnx.hpp"

namespace d500 {

DType from_onnx_type(int onnx_type);
std::string onnx_type_name(int onnx_type);
// A TensorProto's values as bytes of its d500 type (external data read from base_dir).
std::vector<std::byte> tensor_bytes(const onnx::TensorProto& t, const std::string& what, const std::string& base_dir);
// Loads a model built in memory (the built-in networks), as load_onnx_file does a file.
Graph load_onnx_model(onnx::ModelProto& m, const std::string& what, const LoadOptions& opt,
                      ModelFacts* facts = nullptr);

}  // namespace d500
