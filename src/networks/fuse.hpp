#pragma once
// Graph rewrites that join nodes into one d500 runs in a single pass (the op table's internal
// operators): fewer passes over memory for the same arithmetic, bit for bit. A rewrite keeps every
// tensor id (a tensor only the joined nodes saw stays in the graph, written by nothing, with no
// storage in an executor), so that outputs, inputs, parameters and running statistics keep their
// indices.
#include <string>

#include "backends/graph.hpp"

namespace d500 {

// Each Add of two float32 operands of one shape whose result nothing reads but one Relu (and that
// is not a graph output) becomes one AddRelu node, named "<add>+<relu>", at the Add's place: the
// join of a residual network's branches. Returns how many pairs it joined.
int fuse_add_relu(Graph& g);

// Each BatchNormalization of float32 x whose output 0 nothing reads but one Relu (and that is not a
// graph output) becomes one BatchNormRelu node, named "<bn>+<relu>", at the normalisation's place,
// with its inputs, attributes and optional outputs (the running statistics): a convolutional
// network's conv-bn-relu (33 in ResNet-50, 10 in ResNet-20). Returns how many pairs it joined.
int fuse_bn_relu(Graph& g);

// A point's `fusion` (cuda's and onednn's setting): "add_relu" runs fuse_add_relu on the point's
// graph, "bn_relu" fuse_bn_relu, "add_relu+bn_relu" both; unset ("") or "off" leaves the graph as
// its model has it.
bool fuses_add_relu(const std::string& fusion);
bool fuses_bn_relu(const std::string& fusion);

}  // namespace d500
