#pragma once
// libtorch-native's translation of a node into ATen calls (libtorch_native.cpp holds the table):
// the type of one translation, and the families kept in files of their own.
#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/graph.hpp"

namespace d500::native {

using Tensors = std::vector<at::Tensor>;
// One node as ATen calls: inputs (undefined where absent) to outputs. `train`: the pass.
using Op = std::function<Tensors(const Node&, const Tensors&, const Graph&, bool train)>;

// The ONNX breadth beyond the networks' core (libtorch_native_ops.cpp): more activations and
// element-wise math, variadic Max/Min/Sum/Mean, PRelu, logic, reductions and arg-reductions,
// NegativeLogLikelihoodLoss, GatherElements, ScatterElements, Trilu, Tile, DepthToSpace,
// SpaceToDepth, Hardmax, IsInf, Shrink, and the recurrent RNN, GRU, LSTM.
void add_breadth_ops(std::map<std::string, Op>& t);
// Conv, MaxPool and AveragePool over three spatial axes (X [N, C, D, H, W]): ATen's 3-D calls, and
// why one cannot be translated ("" when it can).
Tensors window3d(const Node& n, const Tensors& in);
std::string window3d_untranslatable(const Node& n);

}  // namespace d500::native
