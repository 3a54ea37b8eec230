// Level 3's schemes and their counted communication (see distributed.hpp for what each does).
#include "training/distributed.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "common/mpi_check.hpp"

namespace d500 {

namespace {

// Tags of the parameter servers' messages.
constexpr int kTagPush = 301, kTagPushPull = 302, kTagParams = 303;

}  // namespace

const std::vector<std::string>& scheme_names() {
  static const std::vector<std::string> n = {"allreduce", "allreduce-overlap", "ps-sync",
                                             "ps-async",  "model-averaging",   "dpsgd"};
  return n;
}

bool scheme_consistent(const std::string& name) {
  return name == "allreduce" || name == "allreduce-overlap" || name == "ps-sync";
}

std::string scheme_check(const SchemeSpec& s, int ranks) {
  if (std::find(scheme_names().begin(), scheme_names().end(), s.name) == scheme_names().end())
    return "unknown scheme " + s.name;
  const bool ps = s.name == "ps-sync" || s.name == "ps-async";
  if (!ps && s.ps_servers != 0)
    return "ps_servers applies to the parameter-server schemes (ps-sync, ps-async) only; scheme here: " + s.name;
  if (s.name == "ps-async" && s.ps_servers < 1)
    return "ps-async needs dedicated server ranks (ps_servers >= 1): a server on a training rank would answer only between its own steps";
  if (ps && s.ps_servers >= ranks)
    return "ps_servers = " + std::to_string(s.ps_servers) + " leaves no worker among " + std::to_string(ranks) +
           " ranks: ranks (nodes x ranks_per_node) must exceed ps_servers";
  if (s.bucket_bytes < 4) return "bucket_bytes must hold at least one float (4 bytes)";
  if (s.average_interval < 1) return "average_interval is a step count >= 1";
  if (s.staleness < 0) return "staleness is a step count >= 0";
  if (s.communication != "mpi" && s.communication != "nccl")
    return "communication is \"mpi\" or \"nccl\"; got \"" + s.communication + "\"";
  if (s.communication == "nccl" && s.name == "ps-async")
    return "communication = \"nccl\" does not run ps-async: its servers answer each worker as its gradient arrives, a receive from any "
           "rank, which NCCL lacks (use communication = \"mpi\")";
  if (s.communication == "nccl" && s.name == "ps-sync" && s.ps_servers > 0)
    return "communication = \"nccl\" runs ps-sync with its server on rank 0 (ps_servers = 0): dedicated servers apply d500's reference "
           "optimizer to host shards and exchange them over MPI (use communication = \"mpi\"); ps_servers here: " +
           std::to_string(s.ps_servers);
  return "";
}

Scheme::Scheme(const SchemeSpec& s, MPI_Comm comm, ModelAccess& model) : spec_(s), world_(comm), model_(model) {
  mpi_check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup", "the scheme's own communicator");
  const std::string name = "d500 scheme " + s.name + " ps_servers=" + std::to_string(s.ps_servers);
  mpi_check(MPI_Comm_set_name(comm_, name.c_str()), "MPI_Comm_set_name", "the scheme's own communicator");
  mpi_check(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank", "scheme");
  mpi_check(MPI_Comm_size(comm, &size_), "MPI_Comm_size", "scheme");
  servers_ = s.ps_servers;
  workers_ = size_ - servers_;
  worker_ = rank_ - servers_;
  for (std::size_t k = 0; k < model.count(); ++k) {
    offset_.push_back(total_);
    total_ += model.numel(k);
  }
}

Scheme::~Scheme() {
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Scheme::pack_grad(std::size_t k, float* flat) {
  const float* g = model_.grad(k);
  const auto n = static_cast<std::size_t>(model_.numel(k));
  if (g)
    std::memcpy(flat + offset_[k], g, n * sizeof(float));
  else
    std::fill(flat + offset_[k], flat + offset_[k] + n, 0.0f);
}

void Scheme::pack_grads(float* flat) {
  for (std::size_t k = 0; k < offset_.size(); ++k) pack_grad(k, flat);
}

void Scheme::unpack_grads(const float* flat, float scale) {
  for (std::size_t k = 0; k < offset_.size(); ++k) {
    float* g = model_.grad(k);
    if (!g) continue;
    const float* src = flat + offset_[k];
    for (std::int64_t i = 0; i < model_.numel(k); ++i) g[i] = src[i] * scale;
  }
}

void Scheme::pack_device_grad(std::size_t k, float* flat) {
  const auto bytes = static_cast<std::size_t>(model_.numel(k)) * sizeof(float);
  if (const float* g = model_.device_grad(k))
    model_.device()->copy(flat + offset_[k], g, bytes);
  else
    model_.device()->zero(flat + offset_[k], bytes);
}

void Scheme::unpack_device_grads(const float* flat) {
  DeviceMemory& d = *model_.device();
  for (std::size_t k = 0; k < offset_.size(); ++k)
    if (float* g = model_.device_grad(k))
      d.copy(g, flat + offset_[k], static_cast<std::size_t>(model_.numel(k)) * sizeof(float));
  d.synchronize();
  model_.device_grads_changed();
}

void Scheme::pack_device_params(float* flat) {
  DeviceMemory& d = *model_.device();
  for (std::size_t k = 0; k < offset_.size(); ++k) {
    const float* p = model_.device_param(k);
    if (!p)
      throw Error("scheme " + spec_.name + ": the model has no device storage for parameter " + std::to_string(k));
    d.copy(flat + offset_[k], p, static_cast<std::size_t>(model_.numel(k)) * sizeof(float));
  }
}

void Scheme::unpack_device_params(const float* flat) {
  DeviceMemory& d = *model_.device();
  for (std::size_t k = 0; k < offset_.size(); ++k)
    d.copy(model_.device_param(k), flat + offset_[k], static_cast<std::size_t>(model_.numel(k)) * sizeof(float));
  d.synchronize();
  model_.device_params_changed();
}

void Scheme::pack_params(float* flat) {
  for (std::size_t k = 0; k < offset_.size(); ++k)
    std::memcpy(flat + offset_[k], model_.param(k), static_cast<std::size_t>(model_.numel(k)) * sizeof(float));
}

void Scheme::unpack_params(const float* flat) {
  for (std::size_t k = 0; k < offset_.size(); ++k)
    std::memcpy(model_.param(k), flat + offset_[k], static_cast<std::size_t>(model_.numel(k)) * sizeof(float));
  model_.params_changed();
}

std::int64_t Scheme::ring_bytes(std::int64_t n) const { return size_ > 1 ? 2 * (size_ - 1) * n * 4 / size_ : 0; }

std::int64_t Scheme::synchronous_allreduce(float* flat, PhaseTally& t) {
  barrier(t);
  const std::int64_t t0 = now_ns();
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, flat, static_cast<int>(total_), MPI_FLOAT, MPI_SUM, comm_), "MPI_Allreduce",
            "averaging over the ranks");
  count(ring_bytes(total_), ring_bytes(total_));
  const std::int64_t t1 = now_ns();
  t.add(Phase::Communication, t0, t1);
  return t1;
}

std::int64_t Scheme::synchronous_device_allreduce(DeviceCollective& dc, float* flat, PhaseTally& t) {
  barrier(t);
  const std::int64_t t0 = now_ns();
  dc.allreduce_mean(flat, static_cast<std::size_t>(total_));
  count(ring_bytes(total_), ring_bytes(total_));
  const std::int64_t t1 = now_ns();
  t.add(Phase::Communication, t0, t1);
  return t1;
}

void Scheme::barrier(PhaseTally& t) {
  const std::int64_t t0 = now_ns();
  mpi_check(MPI_Barrier(comm_), "MPI_Barrier", "waiting for the other ranks");
  t.add(Phase::Wait, t0, now_ns());
}

bool Scheme::evaluation_model(std::vector<float>&) { return false; }

bool Scheme::mean_of_workers(std::vector<float>& flat) {
  flat.resize(static_cast<std::size_t>(total_));
  pack_params(flat.data());
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(total_), MPI_FLOAT, MPI_SUM, world_),
            "MPI_Allreduce", "the evaluated model (mean of the workers')");
  for (float& v : flat) v /= static_cast<float>(size_);
  return true;
}

namespace {

// A flat float32 buffer of `n` elements in a device memory, released with it.
class DeviceFlat {
 public:
  DeviceFlat(DeviceMemory& m, std::int64_t n)
      : m_(m),
        p_(static_cast<float*>(m.allocate(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * sizeof(float)))) {}
  ~DeviceFlat() { m_.release(p_); }
  DeviceFlat(const DeviceFlat&) = delete;
  DeviceFlat& operator=(const DeviceFlat&) = delete;
  float* get() const { return p_; }

 private:
  DeviceMemory& m_;
  float* p_;
};

// Gradients averaged by one allreduce after backward.
class AllreduceScheme final : public Scheme {
 public:
  AllreduceScheme(const SchemeSpec& s, MPI_Comm c, ModelAccess& m)
      : Scheme(s, c, m), flat_(static_cast<std::size_t>(total_)) {}
  void after_backward(double, PhaseTally& t) override {
    std::int64_t t0 = now_ns();
    pack_grads(flat_.data());
    t.add(Phase::Update, t0, now_ns());
    const std::int64_t t1 = synchronous_allreduce(flat_.data(), t);
    unpack_grads(flat_.data(), 1.0f / static_cast<float>(size_));
    t.add(Phase::Update, t1, now_ns());
  }
  std::string describe() const override {
    return "gradients averaged by one MPI_Allreduce (sum, then / ranks) of all " + std::to_string(total_) +
           " parameters after backward; volume counted as a ring allreduce: 2 (p-1)/p x " + std::to_string(total_ * 4) +
           " bytes sent and received per rank";
  }

 private:
  std::vector<float> flat_;
};

// Gradients averaged where they are, on the device: packed into one device buffer by device
// copies, one DeviceCollective allreduce (NCCL), copied back; the host's copies are read again
// by the optimizer afterwards (GraphRunner::device_gradients_changed).
class DeviceAllreduceScheme final : public Scheme {
 public:
  DeviceAllreduceScheme(const SchemeSpec& s, MPI_Comm c, ModelAccess& m, DeviceCollective& dc)
      : Scheme(s, c, m), dc_(dc), flat_(*m.device(), total_) {}

  void after_backward(double, PhaseTally& t) override {
    const std::int64_t t0 = now_ns();
    for (std::size_t k = 0; k < offset_.size(); ++k) pack_device_grad(k, flat_.get());
    model_.device()->synchronize();
    t.add(Phase::Update, t0, now_ns());
    const std::int64_t t1 = synchronous_device_allreduce(dc_, flat_.get(), t);
    unpack_device_grads(flat_.get());
    t.add(Phase::Update, t1, now_ns());
  }
  std::string describe() const override {
    return "gradients averaged on the device: copied into one device buffer of all " + std::to_string(total_) +
           " parameters, one " + dc_.describe() +
           " (mean over the ranks), copied back; volume counted as a ring allreduce: 2 (p-1)/p x " +
           std::to_string(total_ * 4) + " bytes sent and received per rank";
  }

 private:
  DeviceCollective& dc_;
  DeviceFlat flat_;
};

// Buckets of gradients, each allreduced as soon as backward has made it final.
class OverlapScheme final : public Scheme {
 public:
  // `dc`: communication = "nccl", the buckets averaged on the device (the runner's memory).
  OverlapScheme(const SchemeSpec& s, MPI_Comm c, ModelAccess& m, DeviceCollective* dc) : Scheme(s, c, m), dc_(dc) {
    if (dc_)
      dflat_ = std::make_unique<DeviceFlat>(*m.device(), total_);
    else
      flat_.resize(static_cast<std::size_t>(total_));
    // Buckets over contiguous parameters from the last (whose gradients come first) backwards.
    bucket_of_.assign(offset_.size(), 0);
    std::int64_t bytes = 0;
    for (std::size_t k = offset_.size(); k-- > 0;) {
      if (buckets_.empty() || bytes >= spec_.bucket_bytes) {
        buckets_.push_back(Bucket{});
        bytes = 0;
      }
      Bucket& b = buckets_.back();
      b.first = k;
      b.params++;
      bucket_of_[k] = buckets_.size() - 1;
      bytes += model_.numel(k) * 4;
    }
    for (auto& b : buckets_) {
      b.offset = offset_[b.first];
      b.n = 0;
      for (std::size_t k = b.first; k < b.first + static_cast<std::size_t>(b.params); ++k) b.n += model_.numel(k);
    }
    requests_.assign(buckets_.size(), MPI_REQUEST_NULL);
    hooked_ = model_.on_gradients_ready([this](std::span<const std::size_t> ready) { on_ready(ready); });
  }

  void before_backward() override {
    for (auto& b : buckets_) b.pending = b.params;
    started_ = 0;
    in_backward_ns_ = 0;
    armed_ = hooked_;
  }

  void after_backward(double, PhaseTally& t) override {
    armed_ = false;
    if (in_backward_ns_ > 0)
      t.add(Phase::Communication, first_call_, first_call_ + in_backward_ns_);  // calls inside backward
    // Whatever backward did not start (a runner that cannot say: all of it), in bucket order.
    std::int64_t t0 = now_ns();
    for (std::size_t b = started_; b < buckets_.size(); ++b) pack_bucket(b);
    t.add(Phase::Update, t0, now_ns());
    t0 = now_ns();
    while (started_ < buckets_.size()) start(started_);
    if (dc_)
      dc_->wait();
    else
      mpi_check(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall",
                "gradient buckets");
    const std::int64_t t1 = now_ns();
    t.add(Phase::Communication, t0, t1);
    if (dc_)
      unpack_device_grads(dflat_->get());  // the means back into the runner's device gradients
    else
      unpack_grads(flat_.data(), 1.0f / static_cast<float>(size_));
    t.add(Phase::Update, t1, now_ns());
  }

  std::string describe() const override {
    const std::string head = std::to_string(buckets_.size()) + " buckets of gradients (bucket_bytes " +
                             std::to_string(spec_.bucket_bytes) + ", from the last parameter backwards), each ";
    if (dc_)
      return head + "copied on the device into its part of one buffer and its mean started (" + dc_->describe() +
             ") when backward has made its gradients final, without waiting on the host; all waited for after backward and copied "
             "back; volume counted as ring allreduces";
    return head +
           "an MPI_Iallreduce started when backward has made its gradients final and "
           "polled with MPI_Testall after every backward step, waited for after backward; volume counted as ring allreduces";
  }
  std::string overlap() const override {
    return hooked_ ? "buckets start during backward (" + std::to_string(buckets_.size()) + " buckets)"
                   : "none: this runner cannot say when a gradient is final, so every bucket starts after backward";
  }

 private:
  struct Bucket {
    std::size_t first = 0;
    int params = 0, pending = 0;
    std::int64_t offset = 0, n = 0;
  };

  // On a device: copies enqueued behind the backward steps that made the gradients.
  void pack_bucket(std::size_t b) {
    const Bucket& bk = buckets_[b];
    for (std::size_t k = bk.first; k < bk.first + static_cast<std::size_t>(bk.params); ++k) {
      if (dc_)
        pack_device_grad(k, dflat_->get());
      else
        pack_grad(k, flat_.data());
    }
  }

  void start(std::size_t b) {
    const Bucket& bk = buckets_[b];
    if (dc_)
      dc_->start_mean(dflat_->get() + bk.offset, static_cast<std::size_t>(bk.n));
    else
      mpi_check(MPI_Iallreduce(MPI_IN_PLACE, flat_.data() + bk.offset, static_cast<int>(bk.n), MPI_FLOAT, MPI_SUM,
                               comm_, &requests_[b]),
                "MPI_Iallreduce", "a gradient bucket");
    count(ring_bytes(bk.n), ring_bytes(bk.n));
    ++started_;
  }

  // Inside backward: pack and start the buckets that became complete, in order (every rank
  // starts the same buckets in the same order), and poll what is in flight.
  void on_ready(std::span<const std::size_t> ready) {
    if (!armed_) return;
    const std::int64_t t0 = now_ns();
    if (in_backward_ns_ == 0) first_call_ = t0;
    for (std::size_t k : ready) --buckets_[bucket_of_[k]].pending;
    while (started_ < buckets_.size() && buckets_[started_].pending == 0) {
      pack_bucket(started_);
      start(started_);
    }
    if (started_ > 0 && !dc_) {  // MPI progresses inside MPI calls; NCCL on its own stream
      int done = 0;
      mpi_check(MPI_Testall(static_cast<int>(started_), requests_.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall",
                "gradient buckets");
    }
    in_backward_ns_ += now_ns() - t0;
  }

  DeviceCollective* dc_ = nullptr;
  std::unique_ptr<DeviceFlat> dflat_;  // on the device (dc_)
  std::vector<float> flat_;            // on the host (MPI)
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;
  std::vector<MPI_Request> requests_;
  std::size_t started_ = 0;
  bool hooked_ = false, armed_ = false;
  std::int64_t in_backward_ns_ = 0, first_call_ = 0;
};

// Parameters averaged every average_interval steps; local steps in between. With a device
// collective (communication = "nccl"), on the device: the parameters copied into one device
// buffer, averaged there, copied back, nothing through the host.
class AveragingScheme final : public Scheme {
 public:
  AveragingScheme(const SchemeSpec& s, MPI_Comm c, ModelAccess& m, DeviceCollective* dc) : Scheme(s, c, m), dc_(dc) {
    if (dc_)
      device_flat_ = std::make_unique<DeviceFlat>(*m.device(), total_);
    else
      flat_.resize(static_cast<std::size_t>(total_));
  }
  void after_backward(double, PhaseTally&) override {}
  void after_update(std::int64_t step, PhaseTally& t) override {
    if (step % spec_.average_interval != 0) return;
    if (dc_)
      average_on_device(t);
    else
      average(t);
  }
  bool evaluation_model(std::vector<float>& flat) override { return mean_of_workers(flat); }
  std::string describe() const override {
    return "local steps; parameters averaged every " + std::to_string(spec_.average_interval) + " steps by " +
           (dc_ ? "one " + dc_->describe() +
                      " (mean over the ranks) of a device buffer they are copied into and back from"
                : std::string("one MPI_Allreduce (sum, then / ranks)")) +
           "; optimizer state stays local; volume counted as a ring allreduce: 2 (p-1)/p x " +
           std::to_string(total_ * 4) + " bytes sent and received per rank and average";
  }

 private:
  void average(PhaseTally& t) {
    std::int64_t t0 = now_ns();
    pack_params(flat_.data());
    t.add(Phase::Update, t0, now_ns());
    const std::int64_t t1 = synchronous_allreduce(flat_.data(), t);
    const float inv = 1.0f / static_cast<float>(size_);
    for (float& v : flat_) v *= inv;
    unpack_params(flat_.data());
    t.add(Phase::Update, t1, now_ns());
  }
  void average_on_device(PhaseTally& t) {
    const std::int64_t t0 = now_ns();
    pack_device_params(device_flat_->get());
    model_.device()->synchronize();
    t.add(Phase::Update, t0, now_ns());
    const std::int64_t t1 = synchronous_device_allreduce(*dc_, device_flat_->get(), t);
    unpack_device_params(device_flat_->get());
    t.add(Phase::Update, t1, now_ns());
  }
  DeviceCollective* dc_;
  std::vector<float> flat_;
  std::unique_ptr<DeviceFlat> device_flat_;
};

// D-PSGD on a ring of the workers. With a device collective (communication = "nccl"), on the
// device: the parameters copied into one device buffer, sent to and received from the neighbours
// by the collective's point-to-point exchange, averaged there by axpy and scale (in the host
// path's order of additions), copied back.
class DpsgdScheme final : public Scheme {
 public:
  DpsgdScheme(const SchemeSpec& s, MPI_Comm c, ModelAccess& m, DeviceCollective* dc) : Scheme(s, c, m), dc_(dc) {
    if (size_ > 1) neighbours_.push_back((rank_ + size_ - 1) % size_);
    if (size_ > 2) neighbours_.push_back((rank_ + 1) % size_);
    if (dc_) {
      device_mine_ = std::make_unique<DeviceFlat>(*m.device(), total_);
      for (std::size_t i = 0; i < neighbours_.size(); ++i) {
        device_theirs_.push_back(std::make_unique<DeviceFlat>(*m.device(), total_));
        theirs_at_.push_back(device_theirs_.back()->get());
      }
    } else {
      mine_.resize(static_cast<std::size_t>(total_));
      theirs_.assign(neighbours_.size(), std::vector<float>(static_cast<std::size_t>(total_)));
    }
  }
  void after_backward(double, PhaseTally&) override {}
  void after_update(std::int64_t, PhaseTally& t) override {
    if (neighbours_.empty()) return;
    if (dc_) return on_device(t);
    std::int64_t t0 = now_ns();
    pack_params(mine_.data());
    t.add(Phase::Update, t0, now_ns());
    t0 = now_ns();
    std::vector<MPI_Request> req(2 * neighbours_.size());
    const int n = static_cast<int>(total_);
    for (std::size_t i = 0; i < neighbours_.size(); ++i) {
      mpi_check(MPI_Irecv(theirs_[i].data(), n, MPI_FLOAT, neighbours_[i], kTagParams, comm_, &req[2 * i]), "MPI_Irecv",
                "a neighbour's parameters");
      mpi_check(MPI_Isend(mine_.data(), n, MPI_FLOAT, neighbours_[i], kTagParams, comm_, &req[2 * i + 1]), "MPI_Isend",
                "parameters to a neighbour");
      count(total_ * 4, total_ * 4);
    }
    mpi_check(MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE), "MPI_Waitall",
              "the neighbours' parameters");
    const std::int64_t t1 = now_ns();
    t.add(Phase::Communication, t0, t1);
    const float w = 1.0f / static_cast<float>(neighbours_.size() + 1);
    for (std::size_t i = 0; i < mine_.size(); ++i) {
      float s = mine_[i];
      for (const auto& th : theirs_) s += th[i];
      mine_[i] = s * w;
    }
    unpack_params(mine_.data());
    t.add(Phase::Update, t1, now_ns());
  }
  bool evaluation_model(std::vector<float>& flat) override { return mean_of_workers(flat); }
  std::string describe() const override {
    return "D-PSGD on a ring: after each local step a worker sends its " + std::to_string(total_) +
           " parameters to its ring neighbours and averages theirs with its own (weights 1/(neighbours + 1))" +
           (dc_ ? ", on the device (" + dc_->describe() + "; averaged by axpy and scale)" : std::string(" over MPI")) +
           "; volume counted exactly (point-to-point)";
  }

 private:
  void on_device(PhaseTally& t) {
    DeviceMemory& d = *model_.device();
    float* mine = device_mine_->get();
    std::int64_t t0 = now_ns();
    pack_device_params(mine);
    d.synchronize();
    t.add(Phase::Update, t0, now_ns());
    t0 = now_ns();
    dc_->exchange(mine, theirs_at_, neighbours_, static_cast<std::size_t>(total_));
    for (std::size_t i = 0; i < neighbours_.size(); ++i) count(total_ * 4, total_ * 4);
    const std::int64_t t1 = now_ns();
    t.add(Phase::Communication, t0, t1);
    for (float* theirs : theirs_at_) d.axpy(1.0f, theirs, mine, total_);
    d.scale(1.0f / static_cast<float>(neighbours_.size() + 1), mine, total_);
    unpack_device_params(mine);
    t.add(Phase::Update, t1, now_ns());
  }

  DeviceCollective* dc_;
  std::vector<int> neighbours_;
  std::vector<float> mine_;
  std::vector<std::vector<float>> theirs_;
  std::unique_ptr<DeviceFlat> device_mine_;
  std::vector<std::unique_ptr<DeviceFlat>> device_theirs_;
  std::vector<float*> theirs_at_;
};

// A flat range of parameters as the reference optimizer sees them.
class FlatParams final : public ParamAccess {
 public:
  FlatParams(float* p, float* g, std::int64_t n) : p_(p), g_(g), n_(n) {}
  std::size_t count() const override { return 1; }
  float* data(std::size_t) override { return p_; }
  const float* grad(std::size_t) override { return g_; }
  std::int64_t numel(std::size_t) const override { return n_; }
  void changed() override {}

 private:
  float *p_, *g_;
  std::int64_t n_;
};

// The parameter servers: on rank 0 (colocated, synchronous) or on dedicated ranks 0..k-1, each
// owning a shard.
class ParameterServer final : public Scheme {
 public:
  ParameterServer(const SchemeSpec& s, MPI_Comm c, ModelAccess& m, const OptimizerSpec& opt)
      : Scheme(s, c, m), async_(s.name == "ps-async"), flat_(static_cast<std::size_t>(total_)), params_(flat_.size()) {
    const int shards = std::max(1, servers_);
    for (int j = 0; j <= shards; ++j) shard_at_.push_back(total_ * j / shards);
    const int mine = servers_ > 0 ? (worker_ < 0 ? rank_ : -1) : (rank_ == 0 ? 0 : -1);
    if (mine >= 0) {  // this rank serves shard `mine`: its parameters start as the worker's do
      const std::int64_t a = shard_at_[static_cast<std::size_t>(mine)],
                         b = shard_at_[static_cast<std::size_t>(mine) + 1];
      pack_params(flat_.data());
      shard_.assign(flat_.begin() + a, flat_.begin() + b);
      shard_grad_.assign(shard_.size(), 0.0f);
      shard_access_ = std::make_unique<FlatParams>(shard_.data(), shard_grad_.data(), b - a);
      optimizer_ = make_reference_optimizer(opt, *shard_access_);
      if (servers_ > 0)
        incoming_.assign(static_cast<std::size_t>(async_ ? 1 : workers_), std::vector<float>(shard_.size()));
    }
  }

  bool local_update() const override { return false; }

  void after_backward(double lr, PhaseTally& t) override {
    std::int64_t t0 = now_ns();
    pack_grads(flat_.data());
    t.add(Phase::Update, t0, now_ns());
    if (servers_ == 0) return colocated(lr, t);
    const bool pull = !async_ || (++since_pull_ > spec_.staleness);
    if (pull) since_pull_ = 0;
    if (!async_) barrier(t);
    t0 = now_ns();
    std::vector<MPI_Request> req;
    req.reserve(static_cast<std::size_t>(2 * servers_));
    for (int j = 0; j < servers_; ++j) {
      const std::int64_t a = shard_at_[static_cast<std::size_t>(j)], n = shard_at_[static_cast<std::size_t>(j) + 1] - a;
      req.emplace_back();
      if (pull) {
        mpi_check(MPI_Irecv(params_.data() + a, static_cast<int>(n), MPI_FLOAT, j, kTagParams, comm_, &req.back()),
                  "MPI_Irecv", "parameters from a server");
        req.emplace_back();
      }
      // flat_ holds the gradients being sent; the shards pulled land in params_.
      mpi_check(MPI_Isend(flat_.data() + a, static_cast<int>(n), MPI_FLOAT, j, pull && async_ ? kTagPushPull : kTagPush,
                          comm_, &req.back()),
                "MPI_Isend", "gradients to a server");
      count(n * 4, pull ? n * 4 : 0);
    }
    mpi_check(MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE), "MPI_Waitall",
              "the parameter servers");
    const std::int64_t t1 = now_ns();
    t.add(Phase::Communication, t0, t1);
    if (pull) unpack_params(params_.data());
    t.add(Phase::Update, t1, now_ns());
  }

  void serve(double lr, PhaseTally& t) override {
    const std::size_t n = shard_.size();
    const float inv = 1.0f / static_cast<float>(workers_);
    if (!async_) {
      barrier(t);
      std::int64_t t0 = now_ns();
      std::vector<MPI_Request> req(static_cast<std::size_t>(workers_));
      for (int w = 0; w < workers_; ++w)
        mpi_check(MPI_Irecv(incoming_[static_cast<std::size_t>(w)].data(), static_cast<int>(n), MPI_FLOAT, servers_ + w,
                            kTagPush, comm_, &req[static_cast<std::size_t>(w)]),
                  "MPI_Irecv", "a worker's gradients");
      mpi_check(MPI_Waitall(workers_, req.data(), MPI_STATUSES_IGNORE), "MPI_Waitall", "the workers' gradients");
      count(0, static_cast<std::int64_t>(n) * 4 * workers_);
      std::int64_t t1 = now_ns();
      t.add(Phase::Communication, t0, t1);
      std::fill(shard_grad_.begin(), shard_grad_.end(), 0.0f);
      for (const auto& in : incoming_)
        for (std::size_t i = 0; i < n; ++i) shard_grad_[i] += in[i];
      for (float& g : shard_grad_) g *= inv;
      optimizer_->step(lr);
      t0 = now_ns();
      t.add(Phase::Update, t1, t0);
      for (int w = 0; w < workers_; ++w)
        mpi_check(MPI_Isend(shard_.data(), static_cast<int>(n), MPI_FLOAT, servers_ + w, kTagParams, comm_,
                            &req[static_cast<std::size_t>(w)]),
                  "MPI_Isend", "parameters to a worker");
      mpi_check(MPI_Waitall(workers_, req.data(), MPI_STATUSES_IGNORE), "MPI_Waitall", "parameters to the workers");
      count(static_cast<std::int64_t>(n) * 4 * workers_, 0);
      t.add(Phase::Communication, t0, now_ns());
      return;
    }
    // Asynchronous: one gradient of every worker this step, applied in arrival order.
    for (int k = 0; k < workers_; ++k) {
      std::int64_t t0 = now_ns();
      MPI_Status st;
      mpi_check(MPI_Recv(incoming_[0].data(), static_cast<int>(n), MPI_FLOAT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &st),
                "MPI_Recv", "a worker's gradients");
      count(0, static_cast<std::int64_t>(n) * 4);
      std::int64_t t1 = now_ns();
      t.add(Phase::Communication, t0, t1);
      for (std::size_t i = 0; i < n; ++i) shard_grad_[i] = incoming_[0][i] * inv;
      optimizer_->step(lr);
      t0 = now_ns();
      t.add(Phase::Update, t1, t0);
      if (st.MPI_TAG == kTagPushPull) {
        mpi_check(MPI_Send(shard_.data(), static_cast<int>(n), MPI_FLOAT, st.MPI_SOURCE, kTagParams, comm_), "MPI_Send",
                  "parameters to a worker");
        count(static_cast<std::int64_t>(n) * 4, 0);
        t.add(Phase::Communication, t0, now_ns());
      }
    }
  }

  bool evaluation_model(std::vector<float>& flat) override {
    if (!async_) return false;  // every worker holds the servers' parameters after each step
    flat.assign(static_cast<std::size_t>(total_), 0.0f);
    if (worker_ < 0) std::copy(shard_.begin(), shard_.end(), flat.begin() + shard_at_[static_cast<std::size_t>(rank_)]);
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(total_), MPI_FLOAT, MPI_SUM, world_),
              "MPI_Allreduce", "the evaluated model (the servers' shards)");
    return true;
  }
  bool has_server_state() const override { return true; }

  std::string describe() const override {
    if (servers_ == 0)
      return "synchronous parameter server on rank 0, which trains too: MPI_Reduce (sum) of the gradients to it, its optimizer on the "
             "mean, MPI_Bcast of the parameters; volume counted as flat trees (the root receives and sends p-1 buffers of " +
             std::to_string(total_ * 4) + " bytes, every other rank sends and receives one)";
    return std::string(async_ ? "asynchronous" : "synchronous") + " parameter server on " + std::to_string(servers_) +
           " dedicated rank(s), each owning a contiguous shard of the " + std::to_string(total_) + " parameters; " +
           (async_
                ? "a server applies each worker's gradient (x 1/workers) as it arrives and answers a pull with the shard as it then is; "
                  "a worker pulls every " +
                      std::to_string(spec_.staleness + 1) + " step(s)"
                : "a server averages the workers' gradients, applies its optimizer and sends the shard back") +
           "; volume counted exactly (point-to-point)";
  }

 private:
  void colocated(double lr, PhaseTally& t) {
    barrier(t);
    std::int64_t t0 = now_ns();
    const int n = static_cast<int>(total_);
    if (rank_ == 0) {
      shard_grad_.assign(flat_.begin(), flat_.end());
      mpi_check(MPI_Reduce(MPI_IN_PLACE, shard_grad_.data(), n, MPI_FLOAT, MPI_SUM, 0, comm_), "MPI_Reduce",
                "gradients to the server");
      count(0, total_ * 4 * (size_ - 1));
    } else {
      mpi_check(MPI_Reduce(flat_.data(), nullptr, n, MPI_FLOAT, MPI_SUM, 0, comm_), "MPI_Reduce",
                "gradients to the server");
      count(total_ * 4, 0);
    }
    std::int64_t t1 = now_ns();
    t.add(Phase::Communication, t0, t1);
    if (rank_ == 0) {
      const float inv = 1.0f / static_cast<float>(size_);
      for (float& g : shard_grad_) g *= inv;
      optimizer_->step(lr);
      std::copy(shard_.begin(), shard_.end(), flat_.begin());
    }
    t0 = now_ns();
    t.add(Phase::Update, t1, t0);
    mpi_check(MPI_Bcast(flat_.data(), n, MPI_FLOAT, 0, comm_), "MPI_Bcast", "parameters from the server");
    if (rank_ == 0)
      count(total_ * 4 * (size_ - 1), 0);
    else
      count(0, total_ * 4);
    t1 = now_ns();
    t.add(Phase::Communication, t0, t1);
    unpack_params(flat_.data());
    t.add(Phase::Update, t1, now_ns());
  }

  bool async_;
  std::vector<float> flat_, params_;
  std::vector<std::int64_t> shard_at_;
  std::vector<float> shard_, shard_grad_;
  std::unique_ptr<FlatParams> shard_access_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::vector<float>> incoming_;
  int since_pull_ = 0;
};

// ps-sync with its server on rank 0, which trains too, on the device (communication = "nccl"):
// the gradients packed into one device buffer, their mean reduced to rank 0 by the device
// collective; rank 0's own optimizer (the point's, as every worker's: on the device with
// optimizer_impl = "native") applies it; then rank 0's parameters, packed into the same buffer,
// broadcast, and every other rank's copied back from it. Nothing crosses to the host.
class DeviceParameterServer final : public Scheme {
 public:
  DeviceParameterServer(const SchemeSpec& s, MPI_Comm c, ModelAccess& m, DeviceCollective& dc)
      : Scheme(s, c, m), dc_(dc), flat_(*m.device(), total_) {}

  bool local_update() const override { return rank_ == 0; }

  void after_backward(double, PhaseTally& t) override {
    const std::int64_t t0 = now_ns();
    for (std::size_t k = 0; k < offset_.size(); ++k) pack_device_grad(k, flat_.get());
    model_.device()->synchronize();
    t.add(Phase::Update, t0, now_ns());
    barrier(t);
    const std::int64_t t1 = now_ns();
    dc_.reduce_mean(flat_.get(), static_cast<std::size_t>(total_), 0);
    if (rank_ == 0)
      count(0, total_ * 4 * (size_ - 1));
    else
      count(total_ * 4, 0);
    const std::int64_t t2 = now_ns();
    t.add(Phase::Communication, t1, t2);
    if (rank_ == 0) unpack_device_grads(flat_.get());
    t.add(Phase::Update, t2, now_ns());
  }

  void after_update(std::int64_t, PhaseTally& t) override {
    const std::int64_t t0 = now_ns();
    if (rank_ == 0) {
      pack_device_params(flat_.get());
      model_.device()->synchronize();
    }
    const std::int64_t t1 = now_ns();
    t.add(Phase::Update, t0, t1);
    dc_.broadcast(flat_.get(), static_cast<std::size_t>(total_), 0);
    if (rank_ == 0)
      count(total_ * 4 * (size_ - 1), 0);
    else
      count(0, total_ * 4);
    const std::int64_t t2 = now_ns();
    t.add(Phase::Communication, t1, t2);
    if (rank_ != 0) unpack_device_params(flat_.get());
    t.add(Phase::Update, t2, now_ns());
  }

  std::string describe() const override {
    return "synchronous parameter server on rank 0, which trains too, on the device: the gradients copied into one device buffer of all " +
           std::to_string(total_) + " parameters, their mean reduced to rank 0 by " + dc_.describe() +
           ", rank 0's own optimizer on it, rank 0's parameters broadcast from the same buffer and copied back on every other rank; "
           "volume counted as flat trees (the root receives and sends p-1 buffers of " +
           std::to_string(total_ * 4) + " bytes, every other rank sends and receives one)";
  }

 private:
  DeviceCollective& dc_;
  DeviceFlat flat_;
};

}  // namespace

std::unique_ptr<Scheme> Scheme::make(const SchemeSpec& s, MPI_Comm comm, ModelAccess& model, const OptimizerSpec& opt,
                                     DeviceCollective* device) {
  int size = 1;
  mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size", "scheme");
  if (const std::string why = scheme_check(s, size); !why.empty()) throw Error("scheme " + s.name + ": " + why);
  if (s.communication == "nccl" && (!device || !model.device()))
    throw Error("scheme " + s.name +
                ": communication = \"nccl\" needs the model's tensors on a device and a collective there");
  DeviceCollective* on_device = s.communication == "nccl" ? device : nullptr;  // nullptr: over MPI
  if (s.name == "allreduce" && on_device) return std::make_unique<DeviceAllreduceScheme>(s, comm, model, *on_device);
  if (s.name == "allreduce") return std::make_unique<AllreduceScheme>(s, comm, model);
  if (s.name == "allreduce-overlap") return std::make_unique<OverlapScheme>(s, comm, model, on_device);
  if (s.name == "model-averaging") return std::make_unique<AveragingScheme>(s, comm, model, on_device);
  if (s.name == "dpsgd") return std::make_unique<DpsgdScheme>(s, comm, model, on_device);
  if (s.name == "ps-sync" && on_device) return std::make_unique<DeviceParameterServer>(s, comm, model, *on_device);
  return std::make_unique<ParameterServer>(s, comm, model, opt);
}

std::uint64_t parameter_hash(ModelAccess& m) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t k = 0; k < m.count(); ++k) {
    const auto* b = reinterpret_cast<const unsigned char*>(m.param(k));
    const std::size_t n = static_cast<std::size_t>(m.numel(k)) * sizeof(float);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  return h;
}

}  // namespace d500
