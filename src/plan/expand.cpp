// Planning's expansion (src/plan/stages.hpp): the axes' combinations, in an order that depends only
// on the campaign's content, each resolved into a point on any thread and taken in order.
#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "common/parallel.hpp"
#include "common/text.hpp"
#include "plan/jobspec.hpp"
#include "plan/stages.hpp"

namespace d500::planning {

double plan_cost(double points, double largest_job) {
  return points * static_cast<double>(kPlanBytesPerPoint) + largest_job * static_cast<double>(kSpecBytesPerPoint);
}

std::string too_big_for_memory(double cost, std::int64_t available) {
  return available > 0 && cost > 0.5 * static_cast<double>(available)
             ? "needs about " + fmt_bytes(static_cast<std::int64_t>(cost)) + " of memory, more than half of the " +
                   fmt_bytes(available) + " available"
             : std::string();
}

namespace {

// Zipped axes make one dimension; the others one each. Dimensions are combined in name order (the
// last varies fastest) so that plan order, and so job contents, depend only on the campaign's
// content, never on the order of its lines.
void order_dimensions(Plan& plan, const KeysByName& keys) {
  const Campaign& c = plan.campaign;
  std::set<std::string> zipped;
  for (const auto& z : c.zips) {
    plan.dims.emplace_back();
    for (const auto& n : z.axes) {
      plan.dims.back().push_back(static_cast<std::size_t>(keys.at(n) - c.axes.data()));
      zipped.insert(n);
    }
  }
  for (std::size_t i = 0; i < c.axes.size(); ++i)
    if (!zipped.count(c.axes[i].name)) plan.dims.push_back({i});
  std::sort(plan.dims.begin(), plan.dims.end(),
            [&](const auto& x, const auto& y) { return c.axes[x.front()].name < c.axes[y.front()].name; });
}

// Each exclude rule as tables: per key it names, which values of that key's dimension it matches
// (a fixed key matches always or never), so that testing a combination compares no text.
struct KeyTest {
  std::size_t dim;
  std::vector<char> hit;  // per value index of the dimension
};
struct RuleTest {
  bool possible = true;  // false when a fixed key's value is not among the rule's
  std::vector<KeyTest> keys;
  bool excludes(const std::vector<std::size_t>& idx) const {
    bool all = possible;
    for (std::size_t k = 0; all && k < keys.size(); ++k) all = keys[k].hit[idx[keys[k].dim]];
    return all;
  }
};

std::vector<RuleTest> exclude_tables(const Campaign& c, const Product& product, const KeysByName& keys) {
  std::vector<RuleTest> rules(c.excludes.size());
  for (std::size_t r = 0; r < c.excludes.size(); ++r)
    for (const auto& m : c.excludes[r].match) {
      auto matches = [&](const Value& v) {
        const std::string have = canonical(v);
        return std::any_of(m.values.begin(), m.values.end(), [&](const auto& x) { return canonical(x.value) == have; });
      };
      bool on_axis = false;
      for (std::size_t d = 0; d < product.dims.size(); ++d)
        for (const Axis* a : product.dims[d])
          if (a->name == m.name) {
            KeyTest t{d, {}};
            for (const auto& v : a->values) t.hit.push_back(matches(v.value));
            rules[r].keys.push_back(std::move(t));
            on_axis = true;
          }
      if (!on_axis) rules[r].possible = rules[r].possible && matches(keys.at(m.name)->values.front().value);
    }
  return rules;
}

// Before anything is expanded: would the combinations fit in memory? (An upper bound: exclude
// rules and duplicates only remove points.) Returns the number of combinations.
double check_combinations_fit(const Campaign& c, const Product& product, const PlanOptions& opt) {
  const std::int64_t avail = opt.available_memory_bytes > 0 ? opt.available_memory_bytes : available_memory_bytes();
  double combinations = 1;
  for (std::size_t d = 0; d < product.dims.size(); ++d) combinations *= static_cast<double>(product.extent(d));
  const double per_job_bound = c.points_per_job > 0 ? std::min<double>(c.points_per_job, combinations) : combinations;
  if (const std::string why =
          too_big_for_memory(plan_cost(combinations, std::min<double>(per_job_bound, kMaxPointsPerJob)), avail);
      !why.empty())
    throw Error(Location{c.path, 1, 1}, "the campaign expands to " + fmt_sig(combinations, 4) +
                                            " combinations of its axes; planning them " + why +
                                            " (MemAvailable): split it into several campaigns, or remove axis values");
  return combinations;
}

// One combination that no exclude rule drops, worked out on any thread: all of its point but
// what depends on the points before it.
struct Made {
  std::uint64_t key = 0;
  Point point;
  std::int64_t threads = 1;
  std::string backend;
};
// A run of combinations.
struct Chunk {
  std::vector<Made> points;   // in combination order
  std::vector<char> present;  // per point, per axis (campaign order): its parameters hold the axis
  std::vector<int> rule_hits;
  std::exception_ptr error;  // the first combination of the run that failed: points end before it
};
constexpr std::uint64_t kChunk = 2048;

// Resolves one combination (mine is set to it) into a point: checked, estimated, its memory known.
Made make_point(const Plan& plan, const Product& mine, std::uint64_t combination, const TimeModel* model, Chunk& ch) {
  const Campaign& c = plan.campaign;
  // Drop what this point's workload does not take: a gemm point ignores the allreduce `bytes`
  // axis, and the duplicates that leaves are planned once (by the calling thread).
  Resolved res = resolve(mine.raw, *plan.registry, c);
  Made m;
  m.key = fnv1a64(res.canonical);
  Point& p = m.point;
  p.id = hex64(m.key);
  p.canonical = std::move(res.canonical);
  p.level = res.workload->level;
  p.nodes = static_cast<int>(std::get<std::int64_t>(res.params.at("nodes")));
  p.ranks_per_node = static_cast<int>(std::get<std::int64_t>(res.params.at("ranks_per_node")));
  if (auto l = res.params.find("launch"); l != res.params.end())
    p.launch = static_cast<std::uint8_t>(std::get<std::int64_t>(l->second));
  p.combination = combination;
  if (model) {
    const TimeModel::Estimate e = model->estimate(p.id, p.level, *res.workload, res.params);
    p.estimate_s = static_cast<float>(e.seconds);
    p.estimate_source = static_cast<std::uint8_t>(e.source);
  }
  if (res.workload->memory_bytes) p.memory_bytes = res.workload->memory_bytes(res.params);
  m.threads = int_param_or(res.params, "threads", 1);
  m.backend = std::get<std::string>(res.params.at("backend"));
  for (const auto& axis : c.axes) ch.present.push_back(static_cast<char>(res.params.count(axis.name) > 0));
  return m;
}

Chunk make_chunk(const Plan& plan, std::uint64_t total, std::size_t chunk_index, const std::vector<RuleTest>& rules,
                 const TimeModel* model) {
  Chunk ch;
  ch.rule_hits.assign(rules.size(), 0);
  Product mine(plan.campaign, plan.dims);
  const std::uint64_t begin = chunk_index * kChunk, end = std::min(total, begin + kChunk);
  std::vector<std::size_t> idx(mine.dims.size(), 0);
  for (std::size_t d = 0; d < idx.size(); ++d)
    idx[d] = static_cast<std::size_t>(begin / mine.stride[d] % mine.extent(d));
  try {
    for (std::uint64_t combination = begin; combination < end; ++combination) {
      if (combination > begin)  // the next combination: the last dimension varies fastest
        for (std::size_t d = idx.size(); d-- > 0;) {
          if (++idx[d] < mine.extent(d)) break;
          idx[d] = 0;
        }
      bool excluded = false;
      for (std::size_t r = 0; r < rules.size(); ++r)
        if (rules[r].excludes(idx)) ++ch.rule_hits[r], excluded = true;
      if (excluded) continue;
      mine.set(idx);
      ch.points.push_back(make_point(plan, mine, combination, model, ch));
    }
  } catch (...) {
    ch.error = std::current_exception();
  }
  return ch;
}

}  // namespace

void expand_points(Plan& plan, const KeysByName& keys, const PlanOptions& opt, const TimeModel* model) {
  const Campaign& c = plan.campaign;
  order_dimensions(plan, keys);
  Product product(c, plan.dims);
  const double combinations = check_combinations_fit(c, product, opt);
  const std::vector<RuleTest> rules = exclude_tables(c, product, keys);
  ResourceChecks resources(plan, opt);

  plan.value_counts.resize(c.axes.size());
  for (std::size_t a = 0; a < c.axes.size(); ++a) plan.value_counts[a].assign(c.axes[a].values.size(), 0);
  std::vector<int> rule_hits(c.excludes.size(), 0);
  IdSet seen(static_cast<std::size_t>(std::min<double>(combinations, 2e6)));
  plan.points.reserve(static_cast<std::size_t>(std::min<double>(combinations, 2e6)));

  // Runs of combinations are made on any thread; the calling thread takes them in order and
  // decides what depends on the points before (duplicates, the first refusal, warnings said
  // once, the counts).
  auto take_chunk = [&](std::size_t, Chunk&& ch) {
    for (std::size_t r = 0; r < rules.size(); ++r) rule_hits[r] += ch.rule_hits[r];
    for (std::size_t q = 0; q < ch.points.size(); ++q) {
      Made& m = ch.points[q];
      if (!seen.insert(m.key)) continue;  // a duplicate of an earlier point is planned once
      Point& p = m.point;
      resources.check(p, m.threads, m.backend, product);
      for (std::size_t d = 0; d < plan.dims.size(); ++d) {
        const std::size_t value = static_cast<std::size_t>(p.combination / product.stride[d] % product.extent(d));
        for (auto a : plan.dims[d])
          if (ch.present[q * c.axes.size() + a]) ++plan.value_counts[a][value];
      }
      plan.points.push_back(std::move(p));
    }
    if (ch.error) std::rethrow_exception(ch.error);
  };
  const std::uint64_t chunks = (product.size + kChunk - 1) / kChunk;
  const unsigned threads =
      opt.threads > 0 ? static_cast<unsigned>(opt.threads) : planning_threads(product.size, 4 * kChunk);
  ordered_parallel<Chunk>(
      static_cast<std::size_t>(chunks), threads, 4 * static_cast<std::size_t>(threads),
      [&](std::size_t i) { return make_chunk(plan, product.size, i, rules, model); }, take_chunk);

  for (std::size_t r = 0; r < c.excludes.size(); ++r)
    if (!rule_hits[r]) throw Error(c.excludes[r].where, "this [[exclude]] rule matches no point: check its values");
  if (plan.points.empty())
    throw Error(Location{c.path, 1, 1}, "the campaign has no points left after [[exclude]] rules");
  resources.throw_refusals();

  // A training point (level 2 and up) is one run of many steps: its steps are the samples.
  const bool timed_by_repetitions =
      std::any_of(plan.points.begin(), plan.points.end(), [](const auto& p) { return p.level < 2; });
  if (c.repetitions <= 5 && timed_by_repetitions)
    plan.warnings.push_back(
        c.path + ": repetitions = " + std::to_string(c.repetitions) +
        ": no distribution-free 95% confidence interval of a median exists for n <= 5, so the report "
        "will give none; use 6 or more (10 or more for a useful width)");
}

}  // namespace d500::planning
