#include "networks/validate.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "backends/graph_ops.hpp"
#include "backends/kernel.hpp"
#include "common/error.hpp"
#include "common/recent.hpp"
#include "common/text.hpp"
#include "networks/executor.hpp"

namespace d500 {

namespace {
// ||got - ref|| / max(||ref||, floor); NaN anywhere gives NaN, which fails validation.
// With `scale`: of got scaled by it (what a tensor `scale` times too large would err).
double rel_l2(const std::vector<double>& got, const std::vector<double>& ref, double floor, double scale = 1) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    const double d = scale * got[i] - ref[i];
    num += d * d, den += ref[i] * ref[i];
  }
  if (std::isnan(num)) return num;
  return std::sqrt(num) / std::max(std::sqrt(den), floor > 0 ? floor : 1e-300);
}
}  // namespace

namespace {
// Input i of `n` is a bias its op adds to each output (Conv's and ConvTranspose's B, Gemm's C):
// its gradient sums the output gradient over the batch and the image, out_elems / numel(B) terms,
// and no product's fan-in multiplies that (LeNet-5's first convolution: 50176 terms, not 25
// times that).
bool added_bias(const Node& n, std::size_t i) {
  return i == 2 && (n.op == "Conv" || n.op == "ConvTranspose" || n.op == "Gemm");
}

// The terms of the sum that gives the gradient of `n`'s input i: its multiply-adds per output
// (`fwd`) times its outputs over the input's elements (a bias: no fan-in); 1 for a node with no
// FLOPs (out_elems 0).
double gradient_sum(const Graph& g, const Node& n, std::size_t i, double fwd, double out_elems) {
  if (out_elems <= 0) return 1;
  const double in_elems = std::max<double>(1, static_cast<double>(numel(g.info(n.in[i]).shape)));
  return (added_bias(n, i) ? 1 : fwd) * out_elems / in_elems;
}

double formula(double terms, int depth) {
  return float_tolerance(terms) * std::sqrt(static_cast<double>(std::max(depth, 1)));
}

// Each tensor's gradient, from the loss back (network_tolerance's): the computing nodes on its
// longest chain (the forward pass to the loss, then back; -1: the loss does not depend on it) and
// the longest sum on it, the gradient's own included. `fwd` and `out_elems`: each node's
// multiply-adds per output and its output's elements (0: no FLOPs).
void backward_chains(const Graph& g, const std::vector<bool>& need, const std::vector<double>& fwd,
                     const std::vector<double>& out_elems, std::vector<int>& depth, std::vector<double>& terms) {
  for (std::size_t ni = g.nodes.size(); ni-- > 0;) {
    const Node& n = g.nodes[ni];
    const OpSchema* s = find_op(n.op);
    int d = -1;
    double k = 1;
    for (int t : n.out)
      if (t >= 0 && depth[static_cast<std::size_t>(t)] >= 0)
        d = std::max(d, depth[static_cast<std::size_t>(t)]), k = std::max(k, terms[static_cast<std::size_t>(t)]);
    if (d < 0) continue;
    d += s->view ? 0 : 1;
    for (std::size_t i = 0; i < n.in.size(); ++i) {
      const int t = n.in[i];
      if (t < 0 || !need[static_cast<std::size_t>(t)] || !(s->diff_in >> i & 1u)) continue;
      const double own = gradient_sum(g, n, i, fwd[ni], out_elems[ni]);
      auto& dt = depth[static_cast<std::size_t>(t)];
      auto& kt = terms[static_cast<std::size_t>(t)];
      dt = std::max(dt, d), kt = std::max(kt, std::max(k, own));
    }
  }
}
}  // namespace

ToleranceBasis network_tolerance(const Graph& g, int loss) {
  ToleranceBasis b;
  const std::size_t count = g.tensors.size();
  std::vector<int> dist(count, 0);
  std::vector<double> cone(count, 1);  // the longest sum in each tensor's forward computation
  std::vector<double> fwd(g.nodes.size(), 0), out_elems(g.nodes.size(), 0);
  const bool training = loss >= 0;
  const std::vector<int> params = training ? trainable_params(g, loss) : std::vector<int>{};
  const std::vector<bool> need =
      training ? tensors_needing_gradients(g, loss, params) : std::vector<bool>(count, false);
  for (std::size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    const OpSchema* s = find_op(n.op);
    int d = 0;
    double k = 1;
    for (int t : n.in)
      if (t >= 0)
        d = std::max(d, dist[static_cast<std::size_t>(t)]), k = std::max(k, cone[static_cast<std::size_t>(t)]);
    d += s->view ? 0 : 1;
    if (s->flops && !n.out.empty() && n.out[0] >= 0) {
      // Forward: a node's FLOPs per output element, halved (a multiply-add is two); backward,
      // gradient_sum.
      const NodeProblem p = node_shapes(g, n, training);
      out_elems[ni] = std::max<double>(1, static_cast<double>(numel(g.info(n.out[0]).shape)));
      fwd[ni] = std::max(1.0, s->flops(p, false) / (2 * out_elems[ni]));
      k = std::max(k, fwd[ni]);
      b.terms = std::max(b.terms, fwd[ni]);
    }
    for (int t : n.out)
      if (t >= 0)
        dist[static_cast<std::size_t>(t)] = d, cone[static_cast<std::size_t>(t)] = k, b.depth = std::max(b.depth, d);
  }
  b.own.assign(count, {});
  std::vector<int> back(count, -1);
  std::vector<double> back_terms(count, 1);
  if (training) {
    b.depth *= 2;  // forward and back
    back[static_cast<std::size_t>(loss)] = dist[static_cast<std::size_t>(loss)];
    back_terms[static_cast<std::size_t>(loss)] = cone[static_cast<std::size_t>(loss)];
    backward_chains(g, need, fwd, out_elems, back, back_terms);
    for (std::size_t t = 0; t < count; ++t)
      if (back[t] >= 0) b.terms = std::max(b.terms, back_terms[t]);
    for (int p : params)
      if (back[static_cast<std::size_t>(p)] > 0)
        b.own[static_cast<std::size_t>(p)] = {back_terms[static_cast<std::size_t>(p)],
                                              back[static_cast<std::size_t>(p)], 0};
  }
  b.tolerance = formula(b.terms, b.depth);
  b.float_tolerance = b.tolerance;
  const std::vector<int> valued = training ? std::vector<int>{loss} : g.outputs;
  for (int t : valued)
    b.own[static_cast<std::size_t>(t)] = {cone[static_cast<std::size_t>(t)], dist[static_cast<std::size_t>(t)], 0};
  double lo = b.tolerance, hi = 0;
  for (auto& o : b.own)
    if (o.depth > 0)
      o.tolerance = formula(o.terms, o.depth), lo = std::min(lo, o.tolerance), hi = std::max(hi, o.tolerance);
  b.words =
      "each tensor's own 1e-6 max(10, 4 sqrt(K)) sqrt(D), with K the longest float32 sum and D the computing "
      "nodes on the longest chain it is computed through" +
      std::string(training ? " (a weight's gradient: to the loss and back)" : "") + ", " +
      (lo < hi ? "from " + fmt_sig(lo, 3) + " to " + fmt_sig(hi, 3) : fmt_sig(hi, 3));
  return b;
}

std::vector<ToleranceBasis::Own> step_formulas(const ToleranceBasis& b, const Graph& g, bool training, int loss,
                                               const std::vector<int>& params) {
  std::vector<int> ids = training ? std::vector<int>{loss} : g.outputs;
  if (training) ids.insert(ids.end(), params.begin(), params.end());
  std::vector<ToleranceBasis::Own> f;
  for (int t : ids) {
    const bool own =
        t >= 0 && static_cast<std::size_t>(t) < b.own.size() && b.own[static_cast<std::size_t>(t)].depth > 0;
    f.push_back(own ? b.own[static_cast<std::size_t>(t)] : ToleranceBasis::Own{b.terms, b.depth, b.float_tolerance});
  }
  return f;
}

ToleranceBasis with_point_math(ToleranceBasis b, const Params& point, const GraphRunner* runner) {
  const double chain = std::sqrt(static_cast<double>(std::max(b.depth, 1)));
  b.float_tolerance = b.tolerance;
  if (tf32_math(point)) {
    b.reduced_mantissa = 10;  // TF32's: the formula's u and the second opinion's simulated rounding
    const double extra = rounded_inputs_tolerance(b.reduced_mantissa) * chain;
    b.tolerance += extra;
    b.words += "; + 8u sqrt(D) = " + fmt_sig(extra, 3) +
               ", u = 2^-11 (math = tf32: convolutions and matrix products may round " +
               "their inputs to TF32's 10 mantissa bits), in all " + fmt_sig(b.tolerance, 3);
  } else if (bf16_math(point)) {
    // The inputs' rounding (8u) and a convolution's result's own (u), u = 2^-8.
    b.reduced_mantissa = 7;
    const double extra = rounded_inputs_and_result_tolerance(7) * chain;
    b.tolerance += extra;
    b.words +=
        "; + 9u sqrt(D) = " + fmt_sig(extra, 3) + ", u = 2^-8 (math = bf16: convolutions and matrix products round " +
        "their inputs to bfloat16's 7 mantissa bits, a convolution its result too), in all " + fmt_sig(b.tolerance, 3);
  }
  if (const auto* e = dynamic_cast<const GraphExecutor*>(runner); e && b.reduced_mantissa > 0)
    b.reduced_storage = e->bf16_plan(), b.bias_after_rounding = e->bias_after_rounding();
  return b;
}

StepValues step_values(GraphRunner& r, const Graph& g, const std::vector<int>& params, bool training) {
  StepValues v;
  if (!training) {
    for (std::size_t i = 0; i < g.outputs.size(); ++i) {
      v.names.push_back("output '" + g.info(g.outputs[i]).name + "'");
      v.values.push_back(r.output(i));
    }
    return v;
  }
  v.names.push_back("the loss");
  v.values.push_back(r.output(g.outputs.size() - 1));  // the loss is the last output
  for (std::size_t k = 0; k < params.size(); ++k) {
    v.names.push_back("the gradient of '" + g.info(params[k]).name + "'");
    v.values.push_back(r.gradient(k));
  }
  return v;
}

namespace {
// The yardstick's spec, exact.
ExecutorSpec yardstick_spec(const Graph& g, bool training, int loss, const std::vector<int>& params,
                            const std::vector<const void*>& inputs, int micro_batches) {
  ExecutorSpec s;
  s.graph = &g;
  s.training = training;
  s.loss = loss;
  s.params = params;
  s.inputs = inputs;
  s.micro_batches = micro_batches;
  s.double_precision = true;
  return s;
}
}  // namespace

std::unique_ptr<GraphExecutor> run_yardstick(const Graph& g, bool training, int loss, const std::vector<int>& params,
                                             const std::vector<const void*>& inputs, int micro_batches,
                                             std::uint64_t rounding_noise, int reduced_mantissa,
                                             const std::vector<bool>& reduced_storage, bool bias_after_rounding,
                                             KinkBranches* kinks) {
  ExecutorSpec s = yardstick_spec(g, training, loss, params, inputs, micro_batches);
  s.rounding_noise = rounding_noise;
  s.reduced_mantissa = reduced_mantissa;
  s.reduced_storage = reduced_storage;
  s.bias_after_rounding = bias_after_rounding;
  s.kinks = kinks;
  auto e = std::make_unique<GraphExecutor>(s);
  for (int m = 0; m < micro_batches; ++m) {
    e->forward(m);
    if (training) e->backward(m);
  }
  return e;
}

StepValues yardstick_step(const Graph& g, bool training, int loss, const std::vector<int>& params,
                          const std::vector<const void*>& inputs, int micro_batches) {
  return step_values(*run_yardstick(g, training, loss, params, inputs, micro_batches), g, params, training);
}

std::string first_divergence(const Graph& g, const BackendInfo& backend, const Params* point,
                             const std::vector<const void*>& inputs, int micro_batches, int threads, double tolerance) {
  if (backend.make_graph_runner) return "";  // a framework's own executor shows no intermediate tensors
  ExecutorSpec s;
  s.graph = &g;
  s.inputs = inputs;
  s.micro_batches = micro_batches;
  s.threads = threads;
  s.keep_all = true;
  s.point = point;
  s.backend = &backend;
  GraphExecutor got(s);
  s.backend = nullptr;
  s.double_precision = true;
  GraphExecutor ref(s);
  got.forward(0);
  ref.forward(0);
  for (const auto& st : got.steps()) {
    if (st.node < 0 || st.backward) continue;
    const Node& n = g.nodes[static_cast<std::size_t>(st.node)];
    for (int t : n.out) {
      if (t < 0 || g.info(t).dtype != DType::F32) continue;
      const double err = rel_l2(got.tensor(t), ref.tensor(t), 1e-30);
      if (!(err <= tolerance))
        return "the first node off in the forward pass is " + n.label() + " (computed by " + st.impl +
               "): relative error " + fmt_sig(err, 3) + " in '" + g.info(t).name + "'";
    }
  }
  return "the forward pass agrees node by node; the difference arises in the backward pass";
}

namespace {
// A tensor that is zero in exact arithmetic (a bias before a normalisation or a softmax over its
// shift) holds only float noise: it is measured against a typical tensor's norm instead.
double norm_floor(const StepValues& ref) {
  double all = 0;
  for (const auto& r : ref.values)
    for (double x : r) all += x * x;
  return 1e-4 * std::sqrt(all / static_cast<double>(std::max<std::size_t>(ref.values.size(), 1)));
}
}  // namespace

std::vector<double> step_errors(const StepValues& got, const StepValues& ref) {
  if (got.values.size() != ref.values.size())
    throw Error("validation: the executor and the yardstick computed different tensors");
  const double floor = norm_floor(ref);
  std::vector<double> e;
  for (std::size_t t = 0; t < ref.values.size(); ++t) {
    const auto& a = got.values[t];
    const auto& b = ref.values[t];
    if (a.size() != b.size())
      throw Error("validation: " + ref.names[t] + " has " + std::to_string(a.size()) + " values, the yardstick " +
                  std::to_string(b.size()));
    e.push_back(rel_l2(a, b, floor));
  }
  return e;
}

Discrepancy compare_steps(const StepValues& got, const StepValues& ref) {
  const std::vector<double> e = step_errors(got, ref);
  Discrepancy d;
  for (std::size_t t = 0; t < e.size(); ++t) {
    if (t == 0 || e[t] > d.worst || std::isnan(e[t])) d.worst = e[t], d.where = ref.names[t];
    if (std::isnan(e[t])) break;
  }
  return d;
}

std::vector<double> rounding_spread(const Graph& g, bool training, int loss, const std::vector<int>& params,
                                    const std::vector<const void*>& inputs, int micro_batches, const StepValues& exact,
                                    int runs, KinkBranches* kinks) {
  std::vector<double> spread(exact.values.size(), 0.0);
  for (int r = 1; r <= runs; ++r) {
    const auto e = run_yardstick(g, training, loss, params, inputs, micro_batches, static_cast<std::uint64_t>(r), 0, {},
                                 false, kinks);
    const std::vector<double> d = step_errors(step_values(*e, g, params, training), exact);
    for (std::size_t t = 0; t < d.size(); ++t) spread[t] = std::max(spread[t], d[t]);
  }
  return spread;
}

std::vector<double> reduced_precision_distance(const Graph& g, bool training, int loss, const std::vector<int>& params,
                                               const std::vector<const void*>& inputs, int micro_batches,
                                               const StepValues& exact, int bits, const std::vector<bool>& storage,
                                               bool bias_after_rounding) {
  // Two realisations: the rounding alone, and the rounding with float32's noise (seed 1). A
  // perturbation of 2^-24 flips some roundings to 2^-(bits+1), so one realisation's distance can
  // be a third of another's in a tensor (ResNet-20 at batch 4 under TF32: 0.0014 against 0.0049).
  std::vector<double> distance;
  for (std::uint64_t noise : {0u, 1u}) {
    const auto e =
        run_yardstick(g, training, loss, params, inputs, micro_batches, noise, bits, storage, bias_after_rounding);
    const std::vector<double> d = step_errors(step_values(*e, g, params, training), exact);
    distance.resize(d.size(), 0.0);
    for (std::size_t t = 0; t < d.size(); ++t) distance[t] = std::max(distance[t], d[t]);
  }
  return distance;
}

KinkDistance kink_distance(const Graph& g, int loss, const std::vector<int>& params,
                           const std::vector<const void*>& inputs, int micro_batches, const StepValues& exact,
                           int runs) {
  KinkDistance k;
  k.distance.assign(exact.values.size(), 0.0);
  KinkBranches kinks;
  {
    ExecutorSpec s = yardstick_spec(g, true, loss, params, inputs, micro_batches);  // exact, forward, recording
    s.kinks = &kinks;
    GraphExecutor e(s);
    for (int m = 0; m < micro_batches; ++m) e.forward(m);
  }
  kinks.set_mode(KinkBranches::Mode::Measure);
  k.spread = rounding_spread(g, true, loss, params, inputs, micro_batches, exact, runs, &kinks);
  k.elements = kinks.elements();
  k.ambiguous = kinks.ambiguous(kKinkReach);
  std::tie(k.move_lo, k.move_hi) = kinks.relative_moves();
  kinks.set_mode(KinkBranches::Mode::Flip);
  for (const bool half : {false, true}) {
    const std::int64_t chosen = kinks.choose(kKinkReach, half);
    if (chosen == 0 || (half && chosen == k.ambiguous)) continue;  // nothing to flip, or the same as all
    const auto e = run_yardstick(g, true, loss, params, inputs, micro_batches, 0, 0, {}, false, &kinks);
    const std::vector<double> d = step_errors(step_values(*e, g, params, true), exact);
    for (std::size_t t = 0; t < d.size(); ++t) k.distance[t] = std::max(k.distance[t], d[t]);
  }
  return k;
}

namespace {
// Of tensors with errors `e` and allowances `a`, the one whose error is the largest share of its
// allowance (the first NaN, where one is).
std::size_t nearest_allowance(const std::vector<double>& e, const std::vector<double>& a) {
  std::size_t at = 0;
  double worst = -1;
  for (std::size_t t = 0; t < e.size() && t < a.size(); ++t) {
    const double ratio = e[t] / a[t];
    if (std::isnan(ratio)) return t;
    if (ratio > worst) worst = ratio, at = t;
  }
  return at;
}
}  // namespace

Discrepancy judge_with_spread(const StepValues& got, const StepValues& ref, const std::vector<double>& tolerance,
                              const std::vector<double>& spread, double& allowed, const std::vector<double>& reduced,
                              const std::vector<double>& kinks) {
  const std::vector<double> e = step_errors(got, ref);
  std::vector<double> a(e.size());
  for (std::size_t t = 0; t < e.size(); ++t)
    a[t] = std::max({t < tolerance.size() ? tolerance[t] : 0.0, kSpreadFactor * (t < spread.size() ? spread[t] : 0.0),
                     kReducedFactor * (t < reduced.size() ? reduced[t] : 0.0),
                     kKinkFactor * (t < kinks.size() ? kinks[t] : 0.0)});
  if (e.empty()) {
    allowed = tolerance.empty() ? 0.0 : tolerance[0];
    return {};
  }
  const std::size_t at = nearest_allowance(e, a);
  allowed = a[at];
  return {e[at], ref.names[at]};
}

namespace {
// What judge_step says of the kinks' branches (kink_distance).
std::string kink_words(const KinkDistance& k) {
  const std::string inputs = " of the " + std::to_string(k.elements) + " inputs of its Relu nodes";
  const std::string reach = "within float32's reach of zero (|v| at most " + fmt_sig(kKinkReach, 1) +
                            " x the largest move the simulated rounding gave such an input of their node, " +
                            fmt_sig(k.move_lo, 2) + " to " + fmt_sig(k.move_hi, 2) + " of its RMS)";
  if (k.ambiguous == 0)
    return "; none" + inputs + " was " + reach + ", where a float32 step may take a Relu's other branch";
  return "; and " + fmt_sig(kKinkFactor, 1) + " x its kink distance: how far the step moves when the " +
         std::to_string(k.ambiguous) + inputs + " " + reach +
         " take their other branch (the yardstick run with all of them taking it, and with a seeded half where that is "
         "fewer)";
}

// A count of terms: whole where it is (K = 400, not 400.0).
std::string count_words(double k) {
  return k == std::floor(k) && k < 1e15 ? std::to_string(static_cast<std::int64_t>(k)) : fmt_sig(k, 4);
}

// Of the step's tensors, those in which the step with that one tensor 2% larger exceeds its
// allowance (allowed[t]).
int caught_when_2pct_off(const StepValues& got, const StepValues& ref, const std::vector<double>& allowed) {
  const double floor = norm_floor(ref);
  int caught = 0;
  for (std::size_t t = 0; t < got.values.size() && t < allowed.size(); ++t)
    if (rel_l2(got.values[t], ref.values[t], floor, 1.02) > allowed[t]) ++caught;
  return caught;
}
}  // namespace

StepJudgement judge_step(const StepValues& got, const StepValues& ref, const ToleranceBasis& basis, const Graph& g,
                         bool training, int loss, const std::vector<int>& params,
                         const std::vector<const void*>& inputs, int micro_batches, const std::string& share) {
  // Reduced math: float32's formula first, then each tensor what the point's rounding (simulated)
  // moves it; the math's own formula would let a gradient several percent off pass.
  const bool reduced = basis.reduced_mantissa > 0;
  const std::vector<ToleranceBasis::Own> formulas = step_formulas(basis, g, training, loss, params);
  if (formulas.size() != ref.values.size() || ref.values.empty())
    throw Error("validation: the step has " + std::to_string(ref.values.size()) + " tensors to judge, its formulas " +
                std::to_string(formulas.size()));
  std::vector<double> first;
  for (const auto& f : formulas) first.push_back(f.tolerance);
  const std::vector<double> errors = step_errors(got, ref);
  const std::size_t at = nearest_allowance(errors, first);  // the tensor nearest its own formula
  StepJudgement j{errors[at], first[at], ref.names[at], basis.words};
  j.tensors = static_cast<int>(ref.values.size());
  if (reduced) j.words += "; that formula is no allowance here: every tensor is held to its float32 formula";
  const std::string own = "; the decisive tensor's own: K = " + count_words(formulas[at].terms) +
                          ", D = " + std::to_string(formulas[at].depth) + ", so " + fmt_sig(first[at], 3);
  if (errors[at] <= first[at] || std::isnan(errors[at])) {
    j.caught_2pct = caught_when_2pct_off(got, ref, first);
    j.words += own + "; a step with one tensor 2% off would fail in " + std::to_string(j.caught_2pct) + " of " +
               std::to_string(j.tensors) + " tensors";
    return j;
  }
  j.words += own;
  static Recent<std::vector<double>> kept(4);  // by `share` and what was run
  auto once = [&](const std::string& what, auto&& make) {
    return share.empty() ? make() : *kept.get(share + "\n" + what, make);
  };
  // A float32 training step: the rounding spread's runs measure the kinks too (kink_distance). With
  // a reduced math the simulated rounding of its products takes branches of its own, far more.
  const bool kinked = training && !reduced;
  static Recent<KinkDistance> kept_kinks(2);
  auto kinks_of = [&] { return kink_distance(g, loss, params, inputs, micro_batches, ref); };
  const KinkDistance kinks = !kinked ? KinkDistance{} : share.empty() ? kinks_of() : *kept_kinks.get(share, kinks_of);
  const std::vector<double> spread = kinked ? kinks.spread : once("spread", [&] {
    return rounding_spread(g, training, loss, params, inputs, micro_batches, ref, 2);
  });
  // The stores simulated, by which tensors (a point's layout decides them on onednn).
  const auto stored = std::count(basis.reduced_storage.begin(), basis.reduced_storage.end(), true);
  std::string which;
  for (std::size_t t = 0; t < basis.reduced_storage.size(); ++t)
    if (basis.reduced_storage[t]) which += " " + std::to_string(t);
  const std::vector<double> distance =
      reduced ? once("bits " + std::to_string(basis.reduced_mantissa) + ", stores" + which +
                         (basis.bias_after_rounding ? ", bias after" : ""),
                     [&] {
                       return reduced_precision_distance(g, training, loss, params, inputs, micro_batches, ref,
                                                         basis.reduced_mantissa, basis.reduced_storage,
                                                         basis.bias_after_rounding);
                     })
              : std::vector<double>{};
  double allowed = first[at];
  const Discrepancy w = judge_with_spread(got, ref, first, spread, allowed, distance, kinks.distance);
  std::vector<double> each(first);
  double decisive = 0, decisive_reduced = 0, decisive_kinks = 0;
  for (std::size_t t = 0; t < ref.names.size(); ++t) {
    const double kink = t < kinks.distance.size() ? kinks.distance[t] : 0.0;
    each[t] = std::max({first[t], kSpreadFactor * spread[t], kReducedFactor * (t < distance.size() ? distance[t] : 0.0),
                        kKinkFactor * kink});
    if (ref.names[t] == w.where)
      decisive = spread[t], decisive_reduced = t < distance.size() ? distance[t] : 0.0, decisive_kinks = kink;
  }
  j.error = w.worst, j.where = w.where, j.tolerance = allowed;
  j.caught_2pct = caught_when_2pct_off(got, ref, each);
  j.words +=
      "; it erred " + fmt_sig(errors[at], 3) + ", beyond that, so each tensor was allowed the larger of its own and " +
      fmt_sig(kSpreadFactor, 2) +
      " x its rounding spread: how far float32's rounding alone moves the yardstick's tensor (the "
      "yardstick run twice more with every value a node writes multiplied by 1 + u 2^-24, u uniform in [-1, 1): Monte Carlo "
      "arithmetic), large where the step is ill-conditioned";
  if (reduced)
    j.words +=
        ", and " + fmt_sig(kReducedFactor, 2) +
        " x its distance under the point's reduced precision simulated (the larger of two runs of the yardstick, " +
        "without and with float32's noise, with every Conv, ConvTranspose, Gemm and MatMul input, and backward the output gradient it reads, rounded to " +
        std::to_string(basis.reduced_mantissa) + " mantissa bits, to nearest even" +
        (basis.reduced_mantissa <= 7 ? ", a convolution's results too" : "") +
        (basis.reduced_mantissa <= 7 && basis.bias_after_rounding ? " (before its bias is added, as the backend does)"
                                                                  : "") +
        (stored ? ", and every value stored into the " + std::to_string(stored) +
                      " activations the step keeps in bfloat16 or into their gradients"
                : "") +
        ")";
  if (kinked) j.words += kink_words(kinks);
  j.words += "; the decisive tensor here is " + w.where + ", spread " + fmt_sig(decisive, 3) +
             (reduced ? ", simulated distance " + fmt_sig(decisive_reduced, 3) : std::string()) +
             (kinks.ambiguous > 0 ? ", kink distance " + fmt_sig(decisive_kinks, 3) : std::string()) + ", allowed " +
             fmt_sig(allowed, 3) + "; a step with one tensor 2% off would fail in " + std::to_string(j.caught_2pct) +
             " of " + std::to_string(j.tensors) + " tensors";
  return j;
}

}  // namespace d500
