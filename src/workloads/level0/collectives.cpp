// Level 0 MPI collectives, float32, as nccl-tests does them: one harness, and per collective
// only what differs -- the call, the expected result, and the size that rates are based on.
//
// Sizes ("bytes" in rates, nccl-tests' algorithm-bandwidth convention): allreduce and broadcast,
// the buffer; allgather, the gathered result; reduce-scatter, the input of each rank.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/mpi_check.hpp"
#include "workloads/registry.hpp"

namespace d500 {
namespace {

enum class Kind { Allreduce, Allgather, Broadcast, ReduceScatter };

// Small integers sum exactly in float32, so every expected result is known without a
// reference run: element i of rank r's input is (r + 1) * (i % 7 + 1).
float input(int rank, std::size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1)); }

// The work of one repetition (see sizes above): elements reduced, and the per-rank buffer's bytes.
Work collective_work(Kind kind, std::int64_t bytes, std::int64_t ranks) {
  const std::int64_t count = bytes / 4;
  return {kind == Kind::Allreduce || kind == Kind::ReduceScatter ? count * (ranks - 1) : 0,
          kind == Kind::Allgather ? count * 4 * ranks : count * 4};
}

class Collective final : public Workload {
 public:
  Collective(const RunContext& ctx, Kind kind)
      : kind_(kind), comm_(ctx.comm), rank_(ctx.rank), size_(ctx.size),
        count_(static_cast<std::size_t>(param<std::int64_t>(ctx.params, "bytes") / 4)) {
    // count_: elements of the per-rank buffer the collective is named by (see sizes above).
    const std::size_t p = static_cast<std::size_t>(size_);
    switch (kind_) {
      case Kind::Allreduce: send_.resize(count_), recv_.resize(count_); break;
      case Kind::Allgather: send_.resize(count_), recv_.resize(count_ * p); break;
      case Kind::Broadcast: recv_.resize(count_); break;
      case Kind::ReduceScatter: send_.resize(count_), recv_.resize(count_ / p); break;
    }
  }

  Validation validate() override {
    for (std::size_t i = 0; i < send_.size(); ++i) send_[i] = input(rank_, i);
    for (std::size_t i = 0; i < recv_.size(); ++i) recv_[i] = kind_ == Kind::Broadcast && rank_ == 0 ? input(0, i) : 0.0f;
    run();
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
    h.repeat([this] { run(); });
  }

  Work work() const override { return collective_work(kind_, static_cast<std::int64_t>(count_) * 4, size_); }

 private:
  void run() {
    const int n = static_cast<int>(count_);
    switch (kind_) {
      case Kind::Allreduce:
        mpi_check(MPI_Allreduce(send_.data(), recv_.data(), n, MPI_FLOAT, MPI_SUM, comm_), "MPI_Allreduce", "allreduce");
        break;
      case Kind::Allgather:
        mpi_check(MPI_Allgather(send_.data(), n, MPI_FLOAT, recv_.data(), n, MPI_FLOAT, comm_), "MPI_Allgather", "allgather");
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
  std::vector<float> send_, recv_;
};

void add(WorkloadRegistry& r, const char* name, Kind kind, const char* description, const char* bytes_help) {
  WorkloadInfo w;
  w.name = name;
  w.level = 0;
  w.description = description;
  w.rate_unit = "GB/s";
  w.scaling = "weak";
  w.scaling_note = "total data: every rank contributes a buffer of the same size";
  w.params = {{"bytes", ValueType::Int, std::nullopt, 4, std::int64_t{1} << 34, {}, bytes_help}};
  w.check = [kind](const Params& p) -> std::string {
    const std::int64_t bytes = std::get<std::int64_t>(p.at("bytes"));
    const std::int64_t ranks = std::get<std::int64_t>(p.at("nodes")) * std::get<std::int64_t>(p.at("ranks_per_node"));
    if (bytes % 4 != 0) return "bytes must be a multiple of 4 (float32 elements)";
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
    switch (kind) {
      case Kind::Allreduce: return 2 * bytes;
      case Kind::Allgather: return bytes + bytes * ranks;
      case Kind::Broadcast: return bytes;
      case Kind::ReduceScatter: return bytes + bytes / std::max<std::int64_t>(1, ranks);
    }
    return bytes;
  };
  w.work_of = [kind](const Params& p) {
    return collective_work(kind, std::get<std::int64_t>(p.at("bytes")),
                           std::get<std::int64_t>(p.at("nodes")) * std::get<std::int64_t>(p.at("ranks_per_node")));
  };
  w.backends["mpi"] = [kind](const RunContext& c) { return std::make_unique<Collective>(c, kind); };
  r.add(std::move(w));
}

}  // namespace

void register_collectives(WorkloadRegistry& r) {
  add(r, "allreduce", Kind::Allreduce, "MPI_Allreduce of float32 values, sum, out of place",
      "message size per rank in bytes (a multiple of 4)");
  add(r, "allgather", Kind::Allgather, "MPI_Allgather of float32 values",
      "bytes each rank contributes (a multiple of 4); rates count the gathered result, ranks x bytes");
  add(r, "broadcast", Kind::Broadcast, "MPI_Bcast of float32 values from rank 0", "buffer size in bytes (a multiple of 4)");
  add(r, "reduce_scatter", Kind::ReduceScatter, "MPI_Reduce_scatter_block of float32 values, sum",
      "input size per rank in bytes (a multiple of 4, bytes/4 divisible by the ranks)");
}

}  // namespace d500
