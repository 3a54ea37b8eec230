#pragma once
// One convolution pass (forward, backward data or backward filter) through cuDNN's graph API,
// the backend descriptors that PyTorch reaches through cuDNN's frontend, as an alternative to
// the legacy calls of cudnn_conv.cpp (cudnn_api = "graph"). NCHW tensors, KCRS weights (C per
// group), in float32 (`io` CUDNN_DATA_FLOAT) or, at level 0's dtype = "bf16" / "fp16", in bfloat16
// or half (CUDNN_DATA_BFLOAT16 / CUDNN_DATA_HALF), always summed in float32 (the convolution's
// compute type). In float32 an engine configuration cuDNN marks as down-converting its inputs is
// left out, and one marked as using tensor cores (TF32) too unless `tf32` (the point's math =
// "tf32"), as PyTorch does by its allow_tf32; 16-bit tensors take every engine, tensor cores
// included, as PyTorch filters them. The configuration is chosen at setup:
// - Choice::Heuristic: the first of heuristics mode A's ranking whose execution plan builds
//   within a 1 GiB workspace (PyTorch's default path, "heuristics_instant");
// - Choice::Deterministic: the first of those without cuDNN's non-deterministic note;
// - Choice::Find: every configuration of mode A and of the fallback mode that builds, each run
//   once and then timed three times on the pass's own buffers between CUDA events, the fastest
//   taken (PyTorch's cudnn.benchmark times the same lists).
// The plan is made once, at setup, and so is its variant pack (the buffers' addresses and the
// workspace) where the buffers are known then (level 0); d500's executor gives them with each
// run (run_on), the pack made anew only when they change. A repetition is one cudnnBackendExecute.
#include <memory>
#include <string>

#include "backends/conv_geom.hpp"
#include "backends/cuda/cudnn_common.hpp"
#include "backends/op_shapes.hpp"
#include "common/error.hpp"

namespace d500::cuda {

enum class ConvPass { Forward, BackwardData, BackwardFilter };

// GraphConv's refusal when cuDNN's graph API serves the pass with no engine configuration (none
// builds within the workspace and the choice's limits, or none that built ran): d500's executor
// then runs the node through the legacy calls; level 0 fails the point with the message.
class GraphConvUnserved : public Error {
 public:
  using Error::Error;
};

// A level-0 problem's shape as the geometry GraphConv takes (square kernels, equal pads).
ConvGeom graph_geom(const ConvShape& cs);

class GraphConv {
 public:
  // `g`: the convolution (NCHW x, KCRS w with C per group, pads equal on both sides of an axis;
  // with `nhwc`, x, w and y channels-last: NHWC, KRSC, NHWC, as d500's executor keeps them with
  // memory_format = "channels_last").
  // `on`: the pass's buffers in cuDNN's forward names (a backward data pass writes dx into x, a
  // backward filter pass dw into w); Find runs the candidates on them, and run() uses them (none:
  // run_on gives them). `workspace(bytes)` returns a device buffer of that size that lives as long
  // as this object (or nullptr, to give one later with use_workspace).
  template <class Scratch>
  GraphConv(cudnnHandle_t h, const ConvGeom& g, ConvPass pass, Choice c, bool tf32, const ConvBuffers& on,
            Scratch&& workspace, cudnnDataType_t io = CUDNN_DATA_FLOAT, bool nhwc = false)
      : GraphConv(h, g, pass, c, tf32, on, io, nhwc) {
    bind(chosen_.workspace ? workspace(chosen_.workspace) : nullptr);
  }
  // The plan `like` chose, for another convolution of the same geometry, pass and choice (d500's
  // executor: a network's later nodes of that geometry), with buffers and a workspace of its
  // own: no search, the execution plan shared (a plan runs on whatever variant pack it is given).
  struct SamePlan {};
  GraphConv(SamePlan, const GraphConv& like);
  ~GraphConv();
  GraphConv(const GraphConv&) = delete;
  GraphConv& operator=(const GraphConv&) = delete;

  // One execution of the chosen plan on the stream of the handle (inside the timed region), on
  // the buffers given at setup.
  cudnnStatus_t run() const;
  // The same on `on` (d500's executor: the node's buffers); the variant pack is made anew, on
  // the host, only when they differ from the last run's.
  cudnnStatus_t run_on(const ConvBuffers& on);
  // The workspace the chosen plan runs with (at least chosen().workspace bytes; shared by the
  // passes of one node), replacing the one given at construction.
  void use_workspace(void* workspace) { bind(workspace); }
  // The choice: "forward engine 12 (graph API)", its workspace, whether deterministic, and with
  // Find its time (milliseconds, the fastest of three runs).
  const ConvAlgorithm& chosen() const { return chosen_; }
  // How the choice was made, in words, with the number of configurations considered.
  const std::string& how() const { return how_; }
  // The arithmetic the chosen engine does: "float32 arithmetic, no TF32", with tf32 whether the
  // chosen engine uses tensor cores, with 16-bit tensors their type and the float32 sums.
  std::string math() const;

 private:
  GraphConv(cudnnHandle_t h, const ConvGeom& g, ConvPass pass, Choice c, bool tf32, const ConvBuffers& on,
            cudnnDataType_t io, bool nhwc);
  void bind(void* workspace);

  struct Impl;
  std::shared_ptr<Impl> impl_;
  ConvAlgorithm chosen_;
  std::string how_;
};

}  // namespace d500::cuda
