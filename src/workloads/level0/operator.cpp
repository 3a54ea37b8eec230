#include "workloads/level0/operator.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "backends/registry.hpp"
#include "backends/settings.hpp"
#include "common/error.hpp"
#include "common/text.hpp"

namespace d500 {

WorkloadInfo operator_info(std::string name, std::string description, std::string rate_unit, const std::string& what) {
  WorkloadInfo w;
  w.name = std::move(name);
  w.level = 0;
  w.description = std::move(description);
  w.rate_unit = std::move(rate_unit);
  w.scaling = "weak";
  w.scaling_note = "total work: every rank " + what + " of the same size";
  return w;
}

std::vector<ParamSpec> nchw_params() {
  return {
      {"n", ValueType::Int, std::nullopt, 1, 1 << 20, {}, "batch size"},
      {"c", ValueType::Int, std::nullopt, 1, 1 << 20, {}, "channels"},
      {"h", ValueType::Int, std::nullopt, 1, 1 << 20, {}, "height"},
      {"w", ValueType::Int, Value{std::int64_t{-1}}, 1, 1 << 20, {}, "width; default: same as h"},
  };
}

void width_defaults_to_height(Params& p) {
  if (std::get<std::int64_t>(p.at("w")) == -1) p["w"] = p.at("h");
}

std::vector<ParamSpec> operator_common_params() {
  std::vector<ParamSpec> out = {
      {"threads", ValueType::Int, Value{std::int64_t{1}}, 1, 1024, {}, "threads per rank for the backend's library"}};
  for (auto& s : backend_setting_params()) out.push_back(std::move(s));
  return out;
}

std::string operator_common_check(const Params& p) { return check_backend_settings(p); }

std::string reduced_precision_check(const Params& p) {
  const auto d = p.find("dtype");
  const std::string dtype =
      d != p.end() && std::holds_alternative<std::string>(d->second) ? std::get<std::string>(d->second) : "";
  const std::string& backend = std::get<std::string>(p.at("backend"));
  if (dtype.empty() || dtype == "fp32") return "";
  if (const BackendInfo* b = find_backend(backend); b && b->reduced_precision) return "";
  std::vector<std::string> with;
  for (const auto& x : all_backends())
    if (x.reduced_precision) with.push_back(x.name);
  return "'dtype' \"" + dtype + "\" needs a backend that computes in reduced precision (" +
         (with.empty() ? std::string("none in this build; cuda when built with CUDA") : join(with, ", ")) +
         "); backend \"" + backend + "\" computes in float32: leave dtype unset (or \"fp32\")";
}

OpProblem make_problem(const OperatorDef& def, const Params& p, std::uint64_t seed) {
  OpProblem prob = def.problem(p);
  std::vector<std::vector<double>> in(prob.in.size());
  for (std::size_t t = 0; t < prob.in.size(); ++t) {
    std::vector<float> f(static_cast<std::size_t>(prob.in[t].numel()));
    // One stream per tensor, so that a tensor's numbers do not depend on the others' sizes.
    fill_uniform(f.data(), f.size(), seed * 0x9e3779b97f4a7c15ull + t + 1);
    in[t].assign(f.begin(), f.end());
  }
  if (def.derive) def.derive(prob, in);
  for (std::size_t t = 0; t < prob.in.size(); ++t) prob.in[t].data.assign(in[t].begin(), in[t].end());
  for (auto& t : prob.out) t.data.assign(static_cast<std::size_t>(t.numel()), 0.0f);
  return prob;
}

namespace {

// Elements of the tensors, in double: sizes a campaign may ask for (relu with n = c = h = 10^6)
// overflow 64-bit integers, and the estimate must still say "too big". With `entries` > 0, those
// of `entries` entries of each batched tensor (dims[0] is its batch): what the reference problem
// of validate_outputs holds (it checks that its own problem is that size).
double elements(const std::vector<Tensor>& ts, std::int64_t entries = 0) {
  double n = 0;
  for (const auto& t : ts) {
    double e = 1;
    for (std::size_t i = 0; i < t.dims.size(); ++i)
      e *= static_cast<double>(i == 0 && entries > 0 && t.batched ? entries : t.dims[i]);
    n += e;
  }
  return n;
}

// How many entries of the batch validation compares: 0 when it compares the whole problem
// (some output is not batched, or the batch is no larger than the entries compared).
std::int64_t compared_entries(const OpProblem& p) {
  bool sliceable = !p.out.empty() && p.params.count(p.batch);
  for (const auto& t : p.out) sliceable = sliceable && t.batched;
  const std::int64_t k = std::max<std::int64_t>(2, p.validate_entries);
  return sliceable && p.i(p.batch) > k ? k : 0;
}

}  // namespace

std::int64_t operator_memory_bytes(const OperatorDef& def, const Params& p) {
  const OpProblem prob = def.problem(p);  // dimensions only: no data is allocated
  const double in = elements(prob.in), out = elements(prob.out);
  // The float tensors, and the inputs' double staging while make_problem fills them.
  double bytes = 4 * (in + out) + 8 * in;
  // The double reference of validation, on the entries of the batch it compares.
  if (const std::int64_t k = compared_entries(prob))
    bytes += 8 * (elements(prob.in, k) + elements(prob.out, k));
  else
    bytes += 8 * (in + out);
  const std::string& backend = std::get<std::string>(p.at("backend"));
  if (const BackendInfo* b = find_backend(backend); b && b->workspace_bytes && bytes < 1e18)
    bytes += static_cast<double>(b->workspace_bytes(prob));
  return bytes >= 9e18 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(bytes);
}

Validation validate_outputs(const OperatorDef& def, const OpProblem& p) {
  const std::int64_t k = compared_entries(p), n = k ? p.i(p.batch) : 1;
  const bool slice = k > 0;
  // The entries of the batch compared: k of them, evenly spread, the first and the last among
  // them, so that an indexing error in the batch dimension shows.
  std::vector<std::int64_t> entries;
  for (std::int64_t j = 0; slice && j < k; ++j) entries.push_back(j * (n - 1) / (k - 1));

  // The problem the reference solves: the whole one, or the chosen entries of it.
  OpProblem ref = p;
  if (slice) {
    ref.params[p.batch] = Value{k};
    ref = def.problem(ref.params);
  }
  using Parts = std::vector<std::pair<std::int64_t, std::int64_t>>;
  auto image_range = [&](const Tensor& full) {
    // (offset in the full tensor, count) pairs for the entries the reference problem holds.
    if (!slice || !full.batched) return Parts{{0, full.numel()}};
    const std::int64_t per = full.numel() / full.dims[0];
    Parts parts;
    for (auto e : entries) parts.push_back({e * per, per});
    return parts;
  };
  std::vector<std::vector<double>> in(ref.in.size()), out(ref.out.size());
  std::vector<const double*> inp;
  std::vector<double*> outp;
  for (std::size_t t = 0; t < ref.in.size(); ++t) {
    for (auto [off, cnt] : image_range(p.in[t]))
      in[t].insert(in[t].end(), p.in[t].data.begin() + off, p.in[t].data.begin() + off + cnt);
    if (static_cast<std::int64_t>(in[t].size()) != ref.in[t].numel())
      throw Error(p.op + ": validation slice of '" + p.in[t].name + "' has the wrong size");
    inp.push_back(in[t].data());
  }
  for (std::size_t t = 0; t < ref.out.size(); ++t) {
    out[t].assign(static_cast<std::size_t>(ref.out[t].numel()), 0.0);
    outp.push_back(out[t].data());
  }
  def.ref_double(ref, inp, outp);

  double worst = 0;
  std::string worst_name;
  for (std::size_t t = 0; t < p.out.size(); ++t) {
    double num = 0, den = 0;
    std::size_t at = 0;
    for (auto [off, cnt] : image_range(p.out[t]))
      for (std::int64_t j = 0; j < cnt; ++j, ++at) {
        const double want = out[t][at], got = p.out[t].data[static_cast<std::size_t>(off + j)];
        num += (got - want) * (got - want);
        den += want * want;
      }
    // NaN compares false: a NaN anywhere makes the error NaN, which fails validation.
    double err = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    if (std::isnan(num)) err = num;
    if (t == 0 || err > worst || std::isnan(err)) worst = err, worst_name = p.out[t].name;
    if (std::isnan(err)) break;
  }
  std::string names;
  for (const auto& t : p.out) names += (names.empty() ? "" : ", ") + t.name;
  std::string method = "relative L2 norm of the error, worst of the outputs (" + names + "; worst: " + worst_name +
                       "), against the double-precision reference on the same float32 inputs";
  if (slice) {
    std::string which;
    for (std::size_t j = 0; j < entries.size(); ++j)
      which += (j == 0 ? "" : j + 1 == entries.size() ? " and " : ", ") + std::to_string(entries[j] + 1);
    method += ", compared on " + p.batch_word + " " + which + " of " + std::to_string(n);
  }
  method += "; tolerance " + p.reduction;
  return {worst, p.tolerance, method};
}

namespace {

class RefKernel final : public OpKernel {
 public:
  RefKernel(const OperatorDef& def, OpProblem& p) : def_(def), p_(p) {
    for (auto& t : p.in) in_.push_back(t.data.data());
    for (auto& t : p.out) out_.push_back(t.data.data());
  }
  void run() override { def_.ref_float(p_, in_, out_); }

 private:
  const OperatorDef& def_;
  OpProblem& p_;
  std::vector<const float*> in_;
  std::vector<float*> out_;
};

class OperatorWorkload final : public Workload {
 public:
  using Make = std::function<std::unique_ptr<OpKernel>(OpProblem&, int threads)>;
  OperatorWorkload(const OperatorDef& def, const RunContext& ctx, const Make& make)
      : def_(def), comm_(ctx.comm), p_(make_problem(def, ctx.params, ctx.seed)) {
    // Created here, before validation and timing: setup (primitive creation, layout reorders of
    // the inputs, workspace allocation) is never timed.
    kernel_ = make(p_, static_cast<int>(p_.i("threads")));
  }
  Validation validate() override {
    kernel_->run();
    kernel_->finish();
    return validate_outputs(def_, p_);
  }
  void measure(Harness& h) override {
    h.repeat_kernel_then([this] { kernel_->run(); }, [this] { return kernel_->device_ns(); }, [] {});
  }
  Work work() const override { return p_.work; }
  std::vector<std::pair<std::string, Value>> attributes() const override { return kernel_->facts(); }
  std::vector<std::pair<std::string, Value>> final_attributes() const override {
    return device_memory_attributes(comm_, kernel_->device_memory_bytes());
  }

 private:
  const OperatorDef& def_;
  MPI_Comm comm_;
  OpProblem p_;
  std::unique_ptr<OpKernel> kernel_;
};

}  // namespace

void register_operator(WorkloadRegistry& r, OperatorDef def) {
  // The definition outlives every workload made from it: keep it in a stable place.
  static std::vector<std::unique_ptr<OperatorDef>> defs;
  defs.push_back(std::make_unique<OperatorDef>(std::move(def)));
  const OperatorDef& d = *defs.back();
  WorkloadInfo info = d.info;
  for (const auto& s : operator_common_params()) info.params.push_back(s);
  auto own_normalize = info.normalize;
  // A backend's setting that does not change this operator is cleared (nor changes its id); a
  // custom library is named by its absolute path: jobs run elsewhere than `d500 plan`.
  info.normalize = [own_normalize, name = d.info.name](Params& p) {
    if (own_normalize) own_normalize(p);
    normalize_backend_settings(p, name);
  };
  auto own_check = info.check;
  info.check = [own_check](const Params& p) {
    if (bf16_math(p))
      return std::string(
          "'math' \"bf16\" is for networks (levels 1-3: d500's executor in mixed precision); a level-0 operator "
          "computes in fp32 or tf32 (math), and gemm in bf16 through its own dtype = \"bf16\"");
    std::string why = operator_common_check(p);
    if (why.empty() && own_check) why = own_check(p);
    return why;
  };
  info.memory_bytes = [&d](const Params& p) { return operator_memory_bytes(d, p); };
  info.work_of = [&d](const Params& p) { return d.problem(p).work; };  // dimensions only: no data
  info.backends[reference_backend_name()] = [&d](const RunContext& c) {
    return std::make_unique<OperatorWorkload>(d, c,
                                              [&d](OpProblem& p, int) { return std::make_unique<RefKernel>(d, p); });
  };
  for (const auto& b : all_backends())
    if (b.built && b.supports && b.make_kernel && b.supports(d.info.name))
      info.backends[b.name] = [&d, make = b.make_kernel](const RunContext& c) {
        return std::make_unique<OperatorWorkload>(d, c, make);
      };
  r.add(std::move(info));
}

}  // namespace d500
