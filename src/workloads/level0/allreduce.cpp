// Level 0 Allreduce over MPI: float32 sum, out of place.
#include <cmath>
#include <vector>

#include "workloads/registry.hpp"

namespace d500 {
namespace {

class Allreduce final : public Workload {
 public:
  explicit Allreduce(const RunContext& ctx)
      : comm_(ctx.comm), rank_(ctx.rank), size_(ctx.size),
        count_(static_cast<std::size_t>(param<std::int64_t>(ctx.params, "bytes") / 4)),
        send_(count_), recv_(count_) {}

  Validation validate() override {
    // Small integers sum exactly in float32, so the expected result is known without a
    // reference run: element i of rank r is (r + 1) * (i % 7 + 1).
    for (std::size_t i = 0; i < count_; ++i) send_[i] = static_cast<float>((rank_ + 1) * (i % 7 + 1));
    MPI_Allreduce(send_.data(), recv_.data(), static_cast<int>(count_), MPI_FLOAT, MPI_SUM, comm_);
    const double ranks_sum = size_ * (size_ + 1) / 2.0;
    double num = 0, den = 0;
    for (std::size_t i = 0; i < count_; ++i) {
      double expect = ranks_sum * static_cast<double>(i % 7 + 1);
      num += (recv_[i] - expect) * (recv_[i] - expect);
      den += expect * expect;
    }
    return {std::sqrt(num / den), 1e-7, "relative 2-norm against the exact sum of known integer inputs"};
  }

  void measure(Harness& h) override {
    h.repeat([this] {
      MPI_Allreduce(send_.data(), recv_.data(), static_cast<int>(count_), MPI_FLOAT, MPI_SUM, comm_);
    });
  }

  // bytes: the message size per rank (the "algorithm bandwidth" convention of nccl-tests).
  Work work() const override {
    return {static_cast<std::int64_t>(count_) * (size_ - 1), static_cast<std::int64_t>(count_) * 4};
  }

 private:
  MPI_Comm comm_;
  int rank_, size_;
  std::size_t count_;
  std::vector<float> send_, recv_;
};

}  // namespace

void register_allreduce(WorkloadRegistry& r) {
  WorkloadInfo w;
  w.name = "allreduce";
  w.level = 0;
  w.description = "MPI_Allreduce of float32 values, sum, out of place";
  w.rate_unit = "GB/s";
  w.scaling = "weak";
  w.scaling_note = "total data: every rank contributes a message of the same size";
  w.params = {{"bytes", ValueType::Int, std::nullopt, 4, std::int64_t{1} << 34, {},
               "message size per rank in bytes (a multiple of 4)"}};
  w.check = [](const Params& p) -> std::string {
    if (std::get<std::int64_t>(p.at("bytes")) % 4 != 0) return "bytes must be a multiple of 4 (float32 elements)";
    if (std::get<std::int64_t>(p.at("bytes")) / 4 > 2147483647) return "bytes/4 must fit an MPI count (int)";
    return "";
  };
  w.backends["mpi"] = [](const RunContext& c) { return std::make_unique<Allreduce>(c); };
  r.add(std::move(w));
}

}  // namespace d500
