#pragma once
// Named shape sets that ship with d500: a campaign sets `shape = "resnet50/res4_3x3"` instead of
// the sizes, or sweeps a whole set with `shape = ["resnet50/*"]` in [axes].
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/value.hpp"

namespace d500 {

struct NamedShape {
  std::string name;                            // "set/layer"
  std::map<std::string, std::int64_t> values;  // parameter -> value
  int count = 1;                               // how often the shape occurs in its model
};

// The distinct convolutions of ResNet-50 v1.5 (torchvision: stride on the 3x3 convolution),
// 224x224 input; the batch size stays a parameter.
const std::vector<NamedShape>& resnet50_convolutions();
// DeepBench's training GEMMs without transposes (baidu-research/DeepBench, gemm_problems.h).
const std::vector<NamedShape>& deepbench_gemms();

std::vector<std::string> shape_names(const std::vector<NamedShape>& set);

// normalize: fills the parameters the named shape gives that are still -1 ("not given").
void apply_named_shape(Params& p, const std::vector<NamedShape>& set);
// check: "" when the point agrees with its named shape; otherwise which parameter contradicts it.
std::string check_named_shape(const Params& p, const std::vector<NamedShape>& set);

}  // namespace d500
