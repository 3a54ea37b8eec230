#pragma once
// Level 3: data-parallel training schemes over MPI, and the communication layer that counts
// what each rank sends and receives. The workload (workloads/level2/train.cpp, registered as
// `distributed`) runs a worker's step as data, forward, backward, then the scheme:
//
//   allreduce          gradients averaged by one MPI_Allreduce after backward (consistent);
//                      with communication = "nccl", on the device: the runner's device
//                      gradients copied into one device buffer, one DeviceCollective mean
//                      (ncclAllReduce, ncclAvg), copied back
//   allreduce-overlap  gradients in buckets (bucket_bytes), each MPI_Iallreduce started as soon
//                      as backward has made its gradients final, polled after every backward
//                      step (Open MPI makes no progress on its own), waited for after backward
//                      (consistent): PyTorch DDP's and Horovod's scheme; with communication =
//                      "nccl", each bucket copied on the device and its mean started on the
//                      collective's own stream behind an event, the host never waiting in backward
//   ps-sync            a parameter server: ps_servers = 0 puts it on rank 0, which trains too
//                      (MPI_Reduce of the gradients to it, its optimizer, MPI_Bcast of the
//                      parameters); ps_servers = k > 0 makes ranks 0..k-1 dedicated servers,
//                      each owning a contiguous shard of the parameters (workers send each
//                      shard to its server, which averages, applies its optimizer and sends the
//                      shard back) (consistent); with communication = "nccl" and
//                      ps_servers = 0, on the device: the gradients' mean reduced to rank 0 by
//                      the DeviceCollective (ncclReduce, ncclAvg), rank 0's own optimizer, its
//                      parameters broadcast (ncclBroadcast)
//   ps-async           dedicated servers that apply each worker's gradient (scaled by 1 /
//                      workers) the moment it arrives, in arrival order, and answer a pull with
//                      the shard as it then is; a worker pulls every staleness + 1 steps and
//                      computes on its own copy in between (inconsistent)
//   model-averaging    local steps, parameters averaged by MPI_Allreduce every
//                      average_interval steps (inconsistent between averages); with
//                      communication = "nccl", the runner's device parameters copied into one
//                      device buffer, one DeviceCollective mean, copied back
//   dpsgd              D-PSGD on a ring: after each local step a worker averages its parameters
//                      with its two ring neighbours' (1/3 each; 1/2 with one neighbour)
//                      (inconsistent); with communication = "nccl", the device parameters sent
//                      and received by DeviceCollective::exchange, averaged on the device
//
// Phases: `wait` is an MPI_Barrier over the scheme's ranks before a synchronous exchange (the
// time a rank waits for the slowest), so that `communication` holds the exchange alone;
// packing gradients into one buffer and averaging them are `update` (local arithmetic). Where
// no barrier is taken (the overlapped buckets, D-PSGD's neighbours, ps-async), waiting is part
// of `communication`.
//
// Volume: counted by this layer, per call, as the bytes this rank hands to MPI and gets back:
// point-to-point exactly; a collective by its textbook algorithm (allreduce: ring, 2 (p-1)/p
// of the buffer sent and received; reduce/bcast: a flat tree, the root receiving or sending
// (p-1) buffers), since the MPI library picks its own algorithm.
#include <mpi.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/collective.hpp"
#include "backends/graph.hpp"
#include "backends/optimizer.hpp"
#include "metrics/metrics.hpp"

namespace d500 {

struct SchemeSpec {
  std::string name = "allreduce";
  std::int64_t bucket_bytes = 4 << 20;  // allreduce-overlap
  std::int64_t average_interval = 8;    // model-averaging
  int ps_servers = 0;                   // ps-*: dedicated server ranks (0: rank 0 serves and trains)
  int staleness = 0;                    // ps-async: steps a worker computes between pulls
  // Where the exchange runs: "mpi" (host buffers: a device runner's gradients go through the
  // host's copies) or "nccl" (allreduce and allreduce-overlap: the device's gradients averaged on
  // the device by the DeviceCollective the workload hands to Scheme::make; model-averaging and
  // dpsgd: the device's parameters; ps-sync with ps_servers = 0: the gradients reduced to rank 0
  // and its parameters broadcast on the device).
  std::string communication = "mpi";
};

const std::vector<std::string>& scheme_names();
// Whether every worker holds the same parameters after every step.
bool scheme_consistent(const std::string& name);
// Why `s` cannot run on `ranks` ranks ("" when it can).
std::string scheme_check(const SchemeSpec& s, int ranks);

// A worker's parameters and gradients, as the runner holds them (gradient storage may move
// between steps and is asked for each time).
class ModelAccess {
 public:
  virtual ~ModelAccess() = default;
  virtual std::size_t count() const = 0;
  virtual std::int64_t numel(std::size_t k) const = 0;
  virtual float* param(std::size_t k) = 0;
  virtual float* grad(std::size_t k) = 0;  // nullptr: none this step (zero)
  virtual void params_changed() = 0;
  // During backward: f(ready) after each backward step (GraphRunner::on_gradients_ready); false
  // when the runner cannot say.
  virtual bool on_gradients_ready(std::function<void(std::span<const std::size_t>)> f) = 0;
  // Where the runner keeps its tensors on a device (communication = "nccl"): the memory, the
  // gradient's device storage, and the notice that a scheme rewrote it there.
  virtual DeviceMemory* device() { return nullptr; }
  virtual float* device_grad(std::size_t) { return nullptr; }
  virtual void device_grads_changed() {}
  // The parameters' device storage (made current first), and the notice that a scheme rewrote it.
  virtual float* device_param(std::size_t) { return nullptr; }
  virtual void device_params_changed() {}
};

// A scheme's view of a graph runner's parameters and gradients (their count and sizes from `a`).
class RunnerModel final : public ModelAccess {
 public:
  RunnerModel(GraphRunner& r, const ParamAccess& a) : r_(r), a_(a) {}
  std::size_t count() const override { return a_.count(); }
  std::int64_t numel(std::size_t k) const override { return a_.numel(k); }
  float* param(std::size_t k) override { return r_.parameter(k); }
  // GraphRunner: the gradient's storage may be written between backward and the optimizer.
  float* grad(std::size_t k) override { return const_cast<float*>(r_.parameter_gradient(k)); }
  void params_changed() override { r_.parameters_changed(); }
  bool on_gradients_ready(std::function<void(std::span<const std::size_t>)> f) override {
    return r_.on_gradients_ready(std::move(f));
  }
  DeviceMemory* device() override { return r_.device_memory(); }
  float* device_grad(std::size_t k) override { return r_.device_gradient(k); }
  void device_grads_changed() override { r_.device_gradients_changed(); }
  float* device_param(std::size_t k) override { return r_.device_parameter(k); }
  void device_params_changed() override { r_.device_parameters_changed(); }

 private:
  GraphRunner& r_;
  const ParamAccess& a_;
};

// A step's phases, added up over the step and marked once each (one row per phase and step).
class PhaseTally {
 public:
  void add(Phase p, std::int64_t t0, std::int64_t t1) {
    auto i = static_cast<std::size_t>(p);
    if (!seen_[i]) start_[i] = t0, seen_[i] = true;
    dur_[i] += t1 - t0;
  }
  template <class Mark>
  void mark(const Mark& m) {
    for (std::size_t i = 0; i < seen_.size(); ++i)
      if (seen_[i]) m(static_cast<Phase>(i), start_[i], start_[i] + dur_[i]);
    seen_.fill(false);
    dur_.fill(0);
  }

 private:
  std::array<bool, kPhaseCount> seen_{};
  std::array<std::int64_t, kPhaseCount> start_{}, dur_{};
};

struct CommCounts {
  std::int64_t sent = 0, received = 0, calls = 0;
};

class Scheme {
 public:
  // Collective over `comm`. `opt` is what a server's optimizer applies (ps-*). `device`: the
  // collective over the model's device memory that communication = "nccl" runs (required then).
  static std::unique_ptr<Scheme> make(const SchemeSpec& s, MPI_Comm comm, ModelAccess& model, const OptimizerSpec& opt,
                                      DeviceCollective* device = nullptr);
  virtual ~Scheme();

  const SchemeSpec& spec() const { return spec_; }
  bool consistent() const { return scheme_consistent(spec_.name); }
  bool is_server() const { return worker_ < 0; }
  int worker() const { return worker_; }  // index among the workers; -1: a dedicated server
  int workers() const { return workers_; }
  int servers() const { return servers_; }

  // Worker, before the step's backward pass (the overlapped scheme arms its buckets).
  virtual void before_backward() {}
  // Worker, after backward, before its optimizer: gradients averaged in place (or, on a
  // parameter server, the update done and the parameters back). `lr`: the step's learning rate
  // (a colocated server's optimizer).
  virtual void after_backward(double lr, PhaseTally& t) = 0;
  // Whether the worker's own optimizer applies the update (a parameter server's does not).
  virtual bool local_update() const { return true; }
  // Worker, after its optimizer step number `step` (1-based): model averaging, neighbours.
  virtual void after_update(std::int64_t /*step*/, PhaseTally&) {}
  // A dedicated server's step: its part of one training step of every worker.
  virtual void serve(double /*lr*/, PhaseTally&) {}
  // Collective: the model an evaluation judges, flat in the network's parameter order; false
  // when every worker's own parameters are it (consistent schemes).
  virtual bool evaluation_model(std::vector<float>& flat);
  // Optimizer state on a server (ps-*), which a worker's checkpoint does not hold.
  virtual bool has_server_state() const { return false; }

  const CommCounts& counts() const { return counts_; }
  // How the volume was counted and what the scheme does, in words.
  virtual std::string describe() const = 0;
  // Whether communication overlaps backward, in words ("" when the scheme does not try).
  virtual std::string overlap() const { return ""; }
  std::int64_t parameters() const { return total_; }

 protected:
  Scheme(const SchemeSpec& s, MPI_Comm comm, ModelAccess& model);
  // Flat copies of the worker's gradients or parameters, and back.
  void pack_grad(std::size_t k, float* flat);  // parameter k's gradient (zero when none) at its offset
  void pack_grads(float* flat);
  void unpack_grads(const float* flat, float scale);
  void pack_params(float* flat);
  void unpack_params(const float* flat);
  // The same on the model's device (communication = "nccl"), into and out of a flat device
  // buffer: a gradient's copy enqueued on the device's stream (zeros when none), and every
  // gradient back from it, waited for and announced (ModelAccess::device_grads_changed).
  void pack_device_grad(std::size_t k, float* flat);
  void unpack_device_grads(const float* flat);
  // The parameters into a flat device buffer (enqueued), and back from it (waited for, announced).
  void pack_device_params(float* flat);
  void unpack_device_params(const float* flat);
  // Collective: the mean of every rank's parameters (schemes without servers).
  bool mean_of_workers(std::vector<float>& flat);
  // A barrier over the scheme's ranks, timed as `wait`.
  void barrier(PhaseTally& t);
  // Bytes a rank sends (and receives) in a ring allreduce of n floats over the scheme's ranks.
  std::int64_t ring_bytes(std::int64_t n) const;
  // Barrier (wait), then an allreduce of the whole flat vector (communication); returns its end.
  std::int64_t synchronous_allreduce(float* flat, PhaseTally& t);
  // The same on the device: barrier, then the collective's mean of the flat device buffer.
  std::int64_t synchronous_device_allreduce(DeviceCollective& dc, float* flat, PhaseTally& t);
  void count(std::int64_t sent, std::int64_t received) {
    counts_.sent += sent;
    counts_.received += received;
    ++counts_.calls;
  }

  SchemeSpec spec_;
  // The scheme's exchanges run on its own duplicate of the workload's communicator, named
  // "d500 scheme <name>", so that a tool (a PMPI layer, MPI_T) can tell them from the harness's
  // synchronisation, the store's I/O and the evaluation, which stay on world_.
  MPI_Comm world_, comm_ = MPI_COMM_NULL;
  ModelAccess& model_;
  int rank_ = 0, size_ = 1, worker_ = 0, workers_ = 1, servers_ = 0;
  std::vector<std::int64_t> offset_;  // of each parameter in the flat vector
  std::int64_t total_ = 0;
  CommCounts counts_;
};

// A 64-bit FNV-1a hash of the worker's parameters' bytes.
std::uint64_t parameter_hash(ModelAccess& m);

}  // namespace d500
