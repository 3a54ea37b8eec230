// Level 0 MPI collectives, float32, as nccl-tests does them: one harness, and per collective
// only what differs -- the call, the expected result, and the size that rates are based on.
//
// Sizes ("bytes" in rates, nccl-tests' algorithm-bandwidth convention): allreduce and broadcast,
// the buffer; allgather, the gathered result; reduce-scatter, the input of each rank.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/registry.hpp"
#include "common/mpi_check.hpp"
#include "common/text.hpp"
#include "workloads/registry.hpp"

namespace d500 {
namespace {

using Kind = CollectiveKind;

// Small integers sum exactly in float32, so every expected result is known without a
// reference run: element i of rank r's input is (r + 1) * (i % 7 + 1).
float input(int rank, std::size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1)); }

// The work of one repetition (see sizes above): elements reduced, and the per-rank buffer's bytes.
Work collective_work(Kind kind, std::int64_t bytes, std::int64_t ranks) {
  const std::int64_t count = bytes / 4;
  return {kind == Kind::Allreduce || kind == Kind::ReduceScatter ? count * (ranks - 1) : 0,
          kind == Kind::Allgather ? count * 4 * ranks : count * 4};
}

// "64M" -> 67108864, "4096" -> 4096, "" -> 0; -1 for anything else (and for 4 EiB or more).
std::int64_t size_bytes(const std::string& text) { return text.empty() ? 0 : parse_size(text, 0); }

class Collective final : public Workload {
 public:
  // backend: nullptr for the MPI library's own collectives, else a backend with its own
  // (make_collective: NCCL), whose kernel is made here, untimed, by every rank together.
  Collective(const RunContext& ctx, Kind kind, const BackendInfo* backend = nullptr)
      : kind_(kind),
        comm_(ctx.comm),
        rank_(ctx.rank),
        size_(ctx.size),
        count_(static_cast<std::size_t>(param<std::int64_t>(ctx.params, "bytes") / 4)),
        in_place_(kind == Kind::Allreduce && param<std::string>(ctx.params, "buffers") == "in-place"),
        evict_(static_cast<std::size_t>(
                   std::max<std::int64_t>(0, size_bytes(param<std::string>(ctx.params, "off_cache")))),
               0) {
    // count_: elements of the per-rank buffer the collective is named by (see sizes above).
    const std::size_t p = static_cast<std::size_t>(size_);
    switch (kind_) {
      case Kind::Allreduce: send_.resize(count_), recv_.resize(count_); break;
      case Kind::Allgather: send_.resize(count_), recv_.resize(count_ * p); break;
      case Kind::Broadcast: recv_.resize(count_); break;
      case Kind::ReduceScatter: send_.resize(count_), recv_.resize(count_ / p); break;
    }
    if (backend) {
      problem_ = CollectiveProblem{kind_, comm_, rank_, size_, count_, in_place_, &send_, &recv_};
      kernel_ = backend->make_collective(problem_);
    }
  }

  Validation validate() override {
    for (std::size_t i = 0; i < send_.size(); ++i) send_[i] = input(rank_, i);
    for (std::size_t i = 0; i < recv_.size(); ++i)
      recv_[i] = (kind_ == Kind::Broadcast && rank_ == 0) || in_place_ ? input(rank_, i) : 0.0f;
    if (kernel_) kernel_->upload();
    run();
    if (kernel_) kernel_->finish();
    const double ranks_sum = size_ * (size_ + 1) / 2.0;
    double num = 0, den = 0;
    for (std::size_t i = 0; i < recv_.size(); ++i) {
      double expect = 0;
      switch (kind_) {
        case Kind::Allreduce: expect = ranks_sum * static_cast<double>(i % 7 + 1); break;
        case Kind::Allgather: expect = input(static_cast<int>(i / count_), i % count_); break;
        case Kind::Broadcast: expect = input(0, i); break;
        case Kind::ReduceScatter: expect = ranks_sum * static_cast<double>((rank_ * recv_.size() + i) % 7 + 1); break;
      }
      num += (recv_[i] - expect) * (recv_[i] - expect);
      den += expect * expect;
    }
    return {std::sqrt(num / den), 1e-7, "relative 2-norm against the exact result of known integer inputs"};
  }

  void measure(Harness& h) override {
    // Between repetitions, untimed (nothing, by default): write over off_cache bytes (this rank's caches lose the
    // buffers and MPI's shared segments), then refill an in-place buffer, as a training step
    // packs its gradients just before its allreduce (and as the sum would otherwise grow by
    // the rank count every repetition).
    auto between = [this] {
      if (!evict_.empty()) std::memset(evict_.data(), ++evictions_ & 0xff, evict_.size());
      if (in_place_) {
        for (std::size_t i = 0; i < recv_.size(); ++i) recv_[i] = input(rank_, i);
        if (kernel_) kernel_->upload();
      }
    };
    h.repeat_kernel_then([this] { run(); }, [this] { return kernel_ ? kernel_->device_ns() : std::int64_t{-1}; },
                         between);
  }

  std::vector<std::pair<std::string, Value>> attributes() const override {
    if (!kernel_) return {};
    return kernel_->facts();
  }
  std::vector<std::pair<std::string, Value>> final_attributes() const override {
    return device_memory_attributes(comm_, kernel_ ? kernel_->device_memory_bytes() : -1);
  }

  Work work() const override { return collective_work(kind_, static_cast<std::int64_t>(count_) * 4, size_); }

 private:
  void run() {
    if (kernel_) return kernel_->run();
    const int n = static_cast<int>(count_);
    switch (kind_) {
      case Kind::Allreduce:
        mpi_check(MPI_Allreduce(in_place_ ? MPI_IN_PLACE : send_.data(), recv_.data(), n, MPI_FLOAT, MPI_SUM, comm_),
                  "MPI_Allreduce", "allreduce");
        break;
      case Kind::Allgather:
        mpi_check(MPI_Allgather(send_.data(), n, MPI_FLOAT, recv_.data(), n, MPI_FLOAT, comm_), "MPI_Allgather",
                  "allgather");
        break;
      case Kind::Broadcast: mpi_check(MPI_Bcast(recv_.data(), n, MPI_FLOAT, 0, comm_), "MPI_Bcast", "broadcast"); break;
      case Kind::ReduceScatter:
        mpi_check(MPI_Reduce_scatter_block(send_.data(), recv_.data(), n / size_, MPI_FLOAT, MPI_SUM, comm_),
                  "MPI_Reduce_scatter_block", "reduce_scatter");
        break;
    }
  }

  Kind kind_;
  MPI_Comm comm_;
  int rank_, size_;
  std::size_t count_;
  bool in_place_;
  std::vector<unsigned char> evict_;
  unsigned evictions_ = 0;
  std::vector<float> send_, recv_;
  CollectiveProblem problem_;
  std::unique_ptr<CollectiveKernel> kernel_;
};

void add(WorkloadRegistry& r, const char* name, Kind kind, const char* description, const char* bytes_help) {
  WorkloadInfo w;
  w.name = name;
  w.level = 0;
  w.description = description;
  w.rate_unit = "GB/s";
  w.scaling = "weak";
  w.scaling_note = "total data: every rank contributes a buffer of the same size";
  // off_cache and buffers are strings whose default, "", leaves them out of a point's canonical
  // text: points planned before they existed keep their ids.
  // A table: one entry a line, as written.
  // clang-format off
  w.params = {{"bytes", ValueType::Int, std::nullopt, 4, std::int64_t{1} << 34, {}, bytes_help},
              {"off_cache", ValueType::String, Value{std::string()}, 0, 0, {},
               "a size (\"64M\": K, M, G; a number: bytes) each rank writes over between repetitions, untimed, so that "
               "each starts with cold caches, as IMB's -off_cache does (more than the last-level cache); unset: back to back"},
              {"buffers", ValueType::String, Value{std::string()}, 0, 0, {"", "separate", "in-place"},
               "allreduce: \"in-place\" (MPI_IN_PLACE on a buffer refilled between repetitions, untimed, as a training "
               "step's gradient allreduce) or separate send and receive buffers (unset, \"separate\")"}};
  // clang-format on
  w.check = [kind](const Params& p) -> std::string {
    const std::int64_t bytes = std::get<std::int64_t>(p.at("bytes"));
    const std::int64_t ranks = std::get<std::int64_t>(p.at("nodes")) * std::get<std::int64_t>(p.at("ranks_per_node"));
    if (bytes % 4 != 0) return "bytes must be a multiple of 4 (float32 elements)";
    if (kind != Kind::Allreduce && std::get<std::string>(p.at("buffers")) == "in-place")
      return "buffers = \"in-place\" is for allreduce only";
    const BackendInfo* b = find_backend(std::get<std::string>(p.at("backend")));
    if (b && b->make_collective && !std::get<std::string>(p.at("off_cache")).empty())
      return "off_cache writes over the host's caches between repetitions; backend \"" +
             std::get<std::string>(p.at("backend")) + "\" keeps its buffers on the GPU: leave off_cache unset";
    if (size_bytes(std::get<std::string>(p.at("off_cache"))) < 0)
      return "off_cache is " + quote_value(std::get<std::string>(p.at("off_cache"))) +
             ": a size below 4 EiB such as \"64M\" (K, M, G, T: binary) or a number of bytes";
    if (bytes / 4 > 2147483647) return "bytes/4 must fit an MPI count (int)";
    if (kind == Kind::ReduceScatter && (bytes / 4) % ranks != 0)
      return "reduce_scatter needs bytes/4 divisible by the ranks (" + std::to_string(ranks) + ")";
    return "";
  };
  // The send and receive buffers (validation compares in place); the MPI library's own
  // buffers for large messages are not counted.
  w.memory_bytes = [kind](const Params& p) -> std::int64_t {
    const std::int64_t bytes = std::get<std::int64_t>(p.at("bytes"));
    const std::int64_t ranks = std::get<std::int64_t>(p.at("nodes")) * std::get<std::int64_t>(p.at("ranks_per_node"));
    const std::int64_t evict = std::max<std::int64_t>(0, size_bytes(std::get<std::string>(p.at("off_cache"))));
    switch (kind) {
      // Saturating: an estimate beyond int64 is refused by the plan's memory check, never wraps.
      case Kind::Allreduce: return add_sat(mul_sat(2, bytes), evict);
      case Kind::Allgather: return add_sat(add_sat(bytes, mul_sat(bytes, ranks)), evict);
      case Kind::Broadcast: return add_sat(bytes, evict);
      case Kind::ReduceScatter: return add_sat(bytes + bytes / std::max<std::int64_t>(1, ranks), evict);
    }
    return add_sat(bytes, evict);
  };
  w.work_of = [kind](const Params& p) {
    return collective_work(kind, std::get<std::int64_t>(p.at("bytes")),
                           std::get<std::int64_t>(p.at("nodes")) * std::get<std::int64_t>(p.at("ranks_per_node")));
  };
  for (const auto& b : all_backends())
    if (b.built && b.host_collectives)
      w.backends[b.name] = [kind](const RunContext& c) { return std::make_unique<Collective>(c, kind); };
  for (const auto& b : all_backends())
    if (b.built && b.make_collective) {
      const BackendInfo* info = &b;
      w.backends[b.name] = [kind, info](const RunContext& c) { return std::make_unique<Collective>(c, kind, info); };
    }
  r.add(std::move(w));
}

}  // namespace

void register_collectives(WorkloadRegistry& r) {
  add(r, "allreduce", Kind::Allreduce, "MPI_Allreduce of float32 values, sum, out of place",
      "message size per rank in bytes (a multiple of 4)");
  add(r, "allgather", Kind::Allgather, "MPI_Allgather of float32 values",
      "bytes each rank contributes (a multiple of 4); rates count the gathered result, ranks x bytes");
  add(r, "broadcast", Kind::Broadcast, "MPI_Bcast of float32 values from rank 0",
      "buffer size in bytes (a multiple of 4)");
  add(r, "reduce_scatter", Kind::ReduceScatter, "MPI_Reduce_scatter_block of float32 values, sum",
      "input size per rank in bytes (a multiple of 4, bytes/4 divisible by the ranks)");
}

}  // namespace d500
