#pragma once
// Where d500's graph executor keeps a network's tensors when its backend computes on a device
// (level 1 on `cuda`): weights, inputs, the planned arena and the parameters' gradients are
// allocated here, and the executor's own data movement (micro-batch inputs, the loss's seed,
// gradients handed through views, the sums of gradient contributions) goes through these calls,
// never through a host pointer. Everything is ordered on the memory's one stream, which the
// backend's node kernels (NodeProblem::device) enqueue their work on too. A node the backend has
// no kernel for runs on the reference through host mirrors: its tensors are downloaded, computed
// on the host and uploaded (the executor says so per node: "reference (fallback, through host)").
#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/optimizer_rule.hpp"
#include "common/error.hpp"

namespace d500 {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Untimed, at setup: zeroed device memory of `bytes` (at least 1), and its release.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  // Host <-> device copies; they return once the data has arrived (work enqueued before them is
  // finished first).
  virtual void upload(void* device, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* device, std::size_t bytes) = 0;
  // Untimed, at setup: host memory that upload() will read again and again (a training batch),
  // page-locked where the device can, so that each copy runs at the link's speed without staging,
  // until this DeviceMemory ends (the host memory must outlive it). Never throws: a device that
  // cannot pin copies as before.
  virtual void pin(const void* /*host*/, std::size_t /*bytes*/) noexcept {}
  // A host-to-device copy beside the computation (on a copy stream of its own) into `staged`:
  // enqueued, it runs while the work already on the memory's stream computes, once what an
  // earlier take_beside() enqueued has read `staged`. take_beside(dst, staged, bytes) returns
  // once every such copy is done (the host memory may then be written again) and enqueues on the
  // stream the device-to-device copy of `staged` into `dst`. false where the device has no such
  // stream (nothing is copied then).
  virtual bool upload_beside(void* /*staged*/, const void* /*host*/, std::size_t /*bytes*/) { return false; }
  virtual void take_beside(void* dst, const void* staged, std::size_t bytes) { copy(dst, staged, bytes); }
  // Enqueued on the stream: a device-to-device copy, zeroing, and over float32 y[i] += alpha x[i]
  // (the executor's gradient sums, alpha 1) and x[i] *= alpha (with axpy, the device optimizer's
  // arithmetic: SGD with momentum is nothing else).
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void zero(void* p, std::size_t bytes) = 0;
  virtual void axpy(float alpha, const float* x, float* y, std::int64_t n) = 0;
  virtual void scale(float alpha, float* x, std::int64_t n) = 0;
  // Enqueued: y[i] += x[i] over n elements stored in bfloat16 (a gradient's contributions with
  // math = "bf16", BackendInfo::bf16_storage), each sum rounded to nearest even as
  // dev::add_bf16. A device whose backend stores no bfloat16 tensors need not have it.
  virtual void add_bf16(const void* /*x*/, void* /*y*/, std::int64_t /*n*/) {
    throw Error(describe() + " has no bfloat16 addition (its backend stores no bfloat16 tensors)");
  }
  // Enqueued: one optimizer step over n float32 elements of a parameter p with gradient g and the
  // rule's state a and b (nullptr where the rule keeps none: rule_has_a, rule_has_b), each
  // element as apply_rule computes it (optimizer_rule.hpp), in one pass. A device without such a
  // kernel says false to has_optimizer_step(); d500's device optimizer then composes SGD's family
  // from axpy and scale, and has no other rule.
  virtual bool has_optimizer_step() const { return false; }
  virtual void optimizer_step(const StepRule& r, float* p, const float* g, float* a, float* b, std::int64_t n);
  // Waits until everything enqueued is done: the end of every forward and backward call (and of
  // each step, when steps are timed one by one on a device without marks).
  virtual void synchronize() = 0;
  // The device in words ("cuda:0, NVIDIA H100 80GB HBM3").
  virtual std::string describe() const = 0;
  // The device's own duration of the work enqueued between start_timing() and stop_timing()
  // (events on the stream; stop_timing() waits for the second), ns; -1 where it cannot say.
  virtual void start_timing() {}
  virtual std::int64_t stop_timing() { return -1; }
  // The device memory in use beyond what it was just before this memory was made (its context
  // made): the largest seen so far, sampled now; -1 where it cannot say. With what the method
  // counts, in words.
  virtual std::int64_t peak_bytes() const { return -1; }
  // Per-step device timing without a wait between steps: reserve_marks(n) makes n events
  // (untimed; false where the device has none), mark(i) records event i on the stream, and once
  // the stream has been waited for, mark_ns(i, j) is the device's time from mark i to mark j.
  virtual bool reserve_marks(std::size_t) { return false; }
  virtual void mark(std::size_t) {}
  virtual std::int64_t mark_ns(std::size_t, std::size_t) { return -1; }
  // A recording of the work enqueued on the stream, replayed as one unit (a CUDA Graph): after
  // begin_capture() the calls that enqueue (copy, zero, axpy, scale, optimizer_step and the node
  // kernels' launches) are recorded, not run, until end_capture(); replay() enqueues the whole
  // recording again, with the pointers and scalars it was recorded with. Nothing that waits for
  // the device or copies to or from the host may come in between (upload, download, synchronize,
  // allocate: the device refuses it, and the recording with it). can_capture() is false where the
  // device cannot record (the calls then throw).
  virtual bool can_capture() const { return false; }
  virtual void begin_capture() { throw Error(describe() + " cannot record its work (no graphs)"); }
  virtual void end_capture() { throw Error(describe() + " cannot record its work (no graphs)"); }
  virtual void replay() { throw Error(describe() + " cannot record its work (no graphs)"); }
  // The stream everything here is ordered on, as the device's runtime names it (a cudaStream_t),
  // for a library that enqueues work of its own on it (NCCL in level 3); nullptr where there is
  // none.
  virtual void* native_stream() const { return nullptr; }
};

inline void DeviceMemory::optimizer_step(const StepRule&, float*, const float*, float*, float*, std::int64_t) {
  throw Error(describe() + " has no optimizer kernel (has_optimizer_step() is false)");
}

}  // namespace d500
