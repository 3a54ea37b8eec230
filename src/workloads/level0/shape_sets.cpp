#include "workloads/level0/shape_sets.hpp"

namespace d500 {

namespace {

NamedShape conv(const char* name, std::int64_t c, std::int64_t hw, std::int64_t k, std::int64_t rs, std::int64_t stride,
                std::int64_t pad, int count) {
  return {std::string("resnet50/") + name,
          {{"c", c}, {"h", hw}, {"w", hw}, {"k", k}, {"r", rs}, {"s", rs}, {"stride", stride}, {"pad", pad}},
          count};
}

const NamedShape* find(const std::vector<NamedShape>& set, const std::string& name) {
  for (const auto& s : set)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace

const std::vector<NamedShape>& resnet50_convolutions() {
  // name, input channels, input height = width, output channels, kernel, stride, padding, uses.
  // The projection shortcut of stage 2 has the shape of res2_1x1_expand (counted there).
  static const std::vector<NamedShape> set = {
      conv("conv1", 3, 224, 64, 7, 2, 3, 1),
      conv("res2_1x1_reduce_first", 64, 56, 64, 1, 1, 0, 1),
      conv("res2_1x1_reduce", 256, 56, 64, 1, 1, 0, 2),
      conv("res2_3x3", 64, 56, 64, 3, 1, 1, 3),
      conv("res2_1x1_expand", 64, 56, 256, 1, 1, 0, 4),
      conv("res3_1x1_reduce_first", 256, 56, 128, 1, 1, 0, 1),
      conv("res3_3x3_stride2", 128, 56, 128, 3, 2, 1, 1),
      conv("res3_1x1_expand", 128, 28, 512, 1, 1, 0, 4),
      conv("res3_projection", 256, 56, 512, 1, 2, 0, 1),
      conv("res3_1x1_reduce", 512, 28, 128, 1, 1, 0, 3),
      conv("res3_3x3", 128, 28, 128, 3, 1, 1, 3),
      conv("res4_1x1_reduce_first", 512, 28, 256, 1, 1, 0, 1),
      conv("res4_3x3_stride2", 256, 28, 256, 3, 2, 1, 1),
      conv("res4_1x1_expand", 256, 14, 1024, 1, 1, 0, 6),
      conv("res4_projection", 512, 28, 1024, 1, 2, 0, 1),
      conv("res4_1x1_reduce", 1024, 14, 256, 1, 1, 0, 5),
      conv("res4_3x3", 256, 14, 256, 3, 1, 1, 5),
      conv("res5_1x1_reduce_first", 1024, 14, 512, 1, 1, 0, 1),
      conv("res5_3x3_stride2", 512, 14, 512, 3, 2, 1, 1),
      conv("res5_1x1_expand", 512, 7, 2048, 1, 1, 0, 3),
      conv("res5_projection", 1024, 14, 2048, 1, 2, 0, 1),
      conv("res5_1x1_reduce", 2048, 7, 512, 1, 1, 0, 2),
      conv("res5_3x3", 512, 7, 512, 3, 1, 1, 2),
  };
  return set;
}

const std::vector<NamedShape>& deepbench_gemms() {
  static const std::vector<NamedShape> set = [] {
    // (m, n, k) of DeepBench's training set with a_t = b_t = false; the very large-k (500000)
    // and n = 24000/48000 language-model problems are left out to keep the set runnable on one
    // node in minutes.
    const std::int64_t mnk[][3] = {
        {1760, 16, 1760},   {1760, 32, 1760},   {1760, 64, 1760},   {1760, 128, 1760}, {1760, 7000, 1760},
        {2048, 16, 2048},   {2048, 32, 2048},   {2048, 64, 2048},   {2048, 128, 2048}, {2048, 7000, 2048},
        {2560, 16, 2560},   {2560, 32, 2560},   {2560, 64, 2560},   {2560, 128, 2560}, {2560, 7000, 2560},
        {4096, 16, 4096},   {4096, 32, 4096},   {4096, 64, 4096},   {4096, 128, 4096}, {4096, 7000, 4096},
        {5124, 9124, 1760}, {35, 8457, 1760},   {5124, 9124, 2048}, {35, 8457, 2048},  {5124, 9124, 2560},
        {35, 8457, 2560},   {5124, 9124, 4096}, {35, 8457, 4096},   {7680, 16, 2560},  {7680, 32, 2560},
        {7680, 64, 2560},   {7680, 128, 2560},  {3072, 16, 1024},   {3072, 32, 1024},  {3072, 64, 1024},
        {3072, 128, 1024},  {1024, 700, 512},   {512, 16, 512},     {1024, 16, 512},   {512, 32, 512},
        {1024, 32, 512},
    };
    std::vector<NamedShape> out;
    for (const auto& s : mnk)
      out.push_back(
          {"deepbench/train_" + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]),
           {{"m", s[0]}, {"n", s[1]}, {"k", s[2]}},
           1});
    return out;
  }();
  return set;
}

std::vector<std::string> shape_names(const std::vector<NamedShape>& set) {
  std::vector<std::string> out{""};  // "": sizes given directly
  for (const auto& s : set) out.push_back(s.name);
  return out;
}

void apply_named_shape(Params& p, const std::vector<NamedShape>& set) {
  const NamedShape* s = find(set, std::get<std::string>(p.at("shape")));
  if (!s) return;
  for (const auto& [key, v] : s->values)
    if (std::get<std::int64_t>(p.at(key)) == -1) p[key] = Value{v};
}

std::string check_named_shape(const Params& p, const std::vector<NamedShape>& set) {
  const NamedShape* s = find(set, std::get<std::string>(p.at("shape")));
  if (!s) return "";
  for (const auto& [key, v] : s->values) {
    const auto have = std::get<std::int64_t>(p.at(key));
    if (have != v)
      return "'" + key + "' is " + std::to_string(have) + " but shape \"" + s->name + "\" has " + key + " = " +
             std::to_string(v) + ": leave '" + key + "' out, or drop 'shape'";
  }
  return "";
}

}  // namespace d500
