// Networks' breakdown on rows made here from step timings as the store reads them (no files): the
// points that ran the same steps stand side by side, by operator and by step, with the ratio of two
// and what computed each step where that is not the point's own backend; a point alone keeps its
// own tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/breakdown.hpp"
#include "analysis/format.hpp"
#include "analysis/names.hpp"
#include "analysis/report_rows_test.hpp"
#include "store/reader.hpp"

namespace {

using d500::PointRow;

struct Step {
  const char *name, *op, *direction, *impl;
  double ms;
};

// A network point whose executor ran `steps`, each taking its ms in each of `reps` repetitions
// (`jitter` > 0: repetition i's time scaled by 1 + jitter (i mod 5 - 2), a spread about the ms).
PointRow net(const std::string& backend, const std::string& pass, const std::vector<Step>& steps, int reps = 3,
             double jitter = 0) {
  PointRow r;
  r.workload = "network";
  r.backend = backend;
  r.level = 1;
  r.params = {
      {"workload", std::string("network")}, {"backend", backend}, {"network", std::string("lenet5")}, {"pass", pass}};
  r.canonical = d500::canonical_point(r.params);
  r.id = r.canonical;
  r.ranks = 1;
  r.outcome = d500::Outcome::Complete;
  d500::PointResult p;
  r.costs.assign(static_cast<std::size_t>(reps), 0.0);
  for (std::size_t k = 0; k < steps.size(); ++k) {
    p.steps.push_back({steps[k].name, steps[k].op, steps[k].direction, steps[k].impl, 1e6});
    for (int rep = 0; rep < reps; ++rep) {
      const double ms = steps[k].ms * (1 + jitter * (rep % 5 - 2));
      p.step_times.push_back({0, rep, static_cast<std::int32_t>(k), static_cast<std::int64_t>(ms * 1e6)});
      r.costs[static_cast<std::size_t>(rep)] += ms * 1e-3;
    }
  }
  r.time = d500::stats::summarize(r.costs);
  d500::add_step_costs(r, p, 0, reps, 2);  // the 2 costliest of each
  return r;
}

std::vector<const d500::Block*> tables(const std::vector<d500::Block>& blocks) {
  std::vector<const d500::Block*> out;
  for (const auto& b : blocks)
    if (b.kind == d500::Block::Kind::Table) out.push_back(&b);
  return out;
}

const std::vector<std::string>* row_of(const d500::Table& t, const std::string& first, const std::string& second) {
  for (const auto& r : t)
    if (r[0] == first && r[1] == second) return &r;
  return nullptr;
}

// LeNet-like inference steps on the reference and on blas (whose Relu falls back to the reference).
const std::vector<Step> kReference{{"Conv_0", "Conv", "forward", "reference", 4.0},
                                   {"Relu_0", "Relu", "forward", "reference", 1.0},
                                   {"Conv_1", "Conv", "forward", "reference", 2.0},
                                   {"Gemm_0", "Gemm", "forward", "reference", 0.5}};
const std::vector<Step> kBlas{{"Conv_0", "Conv", "forward", "blas sgemm (im2col)", 1.0},
                              {"Relu_0", "Relu", "forward", "reference (fallback)", 1.0},
                              {"Conv_1", "Conv", "forward", "blas sgemm (im2col)", 0.5},
                              {"Gemm_0", "Gemm", "forward", "blas sgemm", 2.5}};

using d500::test::report_of;

TEST(NetworkBreakdown, PointsThatRanTheSameStepsStandSideBySide) {
  const std::vector<Step>&ref = kReference, &blas = kBlas;
  // Training runs other steps: a point alone, with its own tables.
  const std::vector<Step> train{{"Conv_0", "Conv", "forward", "reference", 4.0},
                                {"Conv_0", "Conv", "backward", "reference", 8.0},
                                {"loss", "-", "seed", "d500 (loss gradient = 1 / micro-batches)", 0.001}};
  const d500::Report rep = report_of(
      {net("reference", "inference", ref), net("blas", "inference", blas), net("reference", "training", train)});
  const std::vector<d500::Block> blocks = d500::network_breakdowns(rep);
  const auto t = tables(blocks);
  ASSERT_EQ(t.size(), 4u);
  for (const auto* b : t) EXPECT_FALSE(b->terminal) << "the terminal has the Networks table alone";

  // By operator: Conv first (6 ms on the reference), each point's time and share, the ratio.
  const d500::Table& ops = t[0]->table.table;
  EXPECT_EQ(ops[0],
            (std::vector<std::string>{"operator", "pass", "steps", "reference", "blas", "reference / blas (95% CI)"}));
  EXPECT_EQ(ops[1], (std::vector<std::string>{"Conv", "forward", "2", "6.000 ms (80.0%)", "1.500 ms (30.0%)",
                                              "4.00 [no CI: too few repetitions]"}));
  ASSERT_NE(row_of(ops, "Gemm", "forward"), nullptr);
  EXPECT_EQ((*row_of(ops, "Gemm", "forward"))[5], "0.200 [no CI: too few repetitions]") << "blas is slower at Gemm";
  ASSERT_NE(row_of(ops, "all steps", ""), nullptr);
  EXPECT_EQ((*row_of(ops, "all steps", ""))[3], "7.500 ms");
  EXPECT_EQ((*row_of(ops, "all steps", ""))[5], "1.50");
  EXPECT_NE(blocks[2].text.find("network pass=inference, 2 points that ran the same 4 steps"), std::string::npos)
      << blocks[2].text;

  // The steps among each point's 2 costliest: Conv_0 and Conv_1 (reference), Gemm_0 and Conv_0 or
  // Relu_0 (blas: Conv_0 first of its equal 1 ms), by their largest median; blas's column of what
  // computed them, none for the reference, which computed every step itself.
  const d500::Table& steps = t[1]->table.table;
  EXPECT_EQ(steps[0], (std::vector<std::string>{"step", "operator", "pass", "reference", "blas",
                                                "reference / blas (95% CI)", "blas: computed by"}));
  ASSERT_EQ(steps.size(), 4u) << "Conv_0, Gemm_0, Conv_1";
  EXPECT_EQ(steps[1][0], "Conv_0");
  EXPECT_EQ(steps[2][0], "Gemm_0");
  EXPECT_EQ(steps[2][6], "blas sgemm");
  EXPECT_EQ(steps[3][0], "Conv_1");
  EXPECT_EQ(steps[3][4], "500.0 us");

  // The training point alone: its own two tables, with share and GFLOP/s, and the loss gradient's seed.
  EXPECT_EQ(t[2]->table.table[0][0], "step");
  EXPECT_NE(std::find(t[2]->table.table[0].begin(), t[2]->table.table[0].end(), "GFLOP/s"), t[2]->table.table[0].end());
  EXPECT_NE(blocks[6].text.find("network:reference pass=training: the 2 costliest of 3 steps"), std::string::npos)
      << blocks[6].text;

  // The terminal, which prints none of these tables: what costs each point most, in words.
  ASSERT_EQ(blocks[0].kind, d500::Block::Kind::List);
  EXPECT_FALSE(blocks[0].document);
  EXPECT_EQ(blocks[0].items,
            (std::vector<std::string>{"network pass=inference: what costs most (the share of the point's steps): "
                                      "reference Conv forward 6.000 ms (80.0%); blas Gemm forward 2.500 ms (50.0%)",
                                      "network:reference pass=training: Conv backward costs most, 8.000 ms (66.7%) of "
                                      "its steps"}));
}

// Two points with repetitions enough: each operator's ratio, and the step's, has its bootstrap
// interval, of each repetition's time (an operator's steps added), which brackets the estimate;
// every step's added, a sum of medians, has none.
TEST(NetworkBreakdown, TwoPointsRatiosHaveTheirIntervalsWhereRepetitionsAllowOne) {
  const d500::Report rep =
      report_of({net("reference", "inference", kReference, 20, 0.02), net("blas", "inference", kBlas, 20, 0.03)});
  ASSERT_EQ(rep.rows[0].by_operator.front().reps.size(), 20u) << "each repetition's Conv forward, its 2 steps added";
  EXPECT_NEAR(rep.rows[0].by_operator.front().reps[2], 6e-3, 1e-9) << "repetition 2 has no jitter";
  const std::vector<d500::Block> blocks = d500::network_breakdowns(rep);
  const auto t = tables(blocks);
  ASSERT_GE(t.size(), 1u);
  const d500::Table& ops = t[0]->table.table;
  auto interval = [](const std::string& cell) {
    double est = 0, lo = 0, hi = 0;
    EXPECT_EQ(std::sscanf(cell.c_str(), "%lf [%lf, %lf]", &est, &lo, &hi), 3) << cell;
    EXPECT_LE(lo, est) << cell;
    EXPECT_GE(hi, est) << cell;
    return std::pair{lo, hi};
  };
  const auto conv = interval((*row_of(ops, "Conv", "forward"))[5]);
  EXPECT_GT(conv.first, 3.5) << "reference's Conv forward takes 4x blas's";
  EXPECT_LT(conv.second, 4.5);
  const auto relu = interval((*row_of(ops, "Relu", "forward"))[5]);
  EXPECT_LT(relu.first, 1.0) << "the same fallback Relu on both: the interval holds 1";
  EXPECT_GT(relu.second, 1.0);
  const auto step = interval((*row_of(ops, "the step", ""))[5]);
  EXPECT_GT(step.first, 1.3) << "7.5 ms against 5 ms";
  EXPECT_LT(step.second, 1.7);
  EXPECT_EQ((*row_of(ops, "all steps", ""))[5], "1.50") << "a sum of medians: no interval";
  // The costliest steps too, each of its own repetitions: Conv_0 4 ms against 1 ms.
  ASSERT_GE(t.size(), 2u);
  const d500::Table& steps = t[1]->table.table;
  ASSERT_EQ(steps[1][0], "Conv_0");
  const auto conv0 = interval(steps[1][5]);
  EXPECT_GT(conv0.first, 3.5);
  EXPECT_LT(conv0.second, 4.5);
  EXPECT_EQ(rep.rows[0].all_steps[0].reps.size(), 20u);
}

// Three points of one backend: heads name what differs among them, not the backend, and a step
// that several backends' points computed differently lists each way once; more points than a
// table holds go into tables of about equal size.
TEST(NetworkBreakdown, HeadsNameWhatDiffersAndEachWayOfComputingOnce) {
  std::vector<PointRow> rows;
  for (const char* layout : {"nchw", "channels_last", "nchw"}) {
    const bool nhwc = std::string(layout) == "channels_last";
    PointRow r = net("onednn", "inference",
                     {{"Conv_0", "Conv", "forward", nhwc ? "onednn convolution (NHWC)" : "onednn convolution", 2.0},
                      {"Relu_0", "Relu", "forward", "onednn eltwise", 1.0}});
    r.params["memory_format"] = std::string(layout);
    r.params["launch"] = std::int64_t{static_cast<std::int64_t>(rows.size()) + 1};
    r.canonical = d500::canonical_point(r.params);
    r.id = r.canonical;
    rows.push_back(r);
  }
  d500::Report rep;
  rep.campaign = "t";
  rep.rows = rows;
  rep.names = d500::point_names(rep.rows);
  const std::vector<d500::Block> blocks = d500::network_breakdowns(rep);
  const auto t = tables(blocks);
  ASSERT_EQ(t.size(), 2u);
  const d500::Table& ops = t[0]->table.table;
  EXPECT_EQ(ops[0], (std::vector<std::string>{"operator", "pass", "steps", "launch=1 memory_format=nchw",
                                              "launch=2 memory_format=channels_last", "launch=3 memory_format=nchw"}));
  EXPECT_EQ(ops[1][3], "2.000 ms (66.7%)");
  const d500::Table& steps = t[1]->table.table;
  EXPECT_EQ(steps[0].back(), "computed by");
  EXPECT_EQ(steps[1].back(), "onednn convolution / onednn convolution (NHWC)");
  EXPECT_EQ(steps[2].back(), "onednn eltwise");
  EXPECT_EQ(steps[0].size(), 7u) << "no ratio beside three points";

  // Seven launches of one point: more than a table holds, so two tables of 4 and 3, none alone.
  std::vector<PointRow> launches;
  for (std::int64_t launch = 1; launch <= 7; ++launch) {
    PointRow r = net("onednn", "inference", {{"Conv_0", "Conv", "forward", "onednn convolution", 2.0}});
    r.params["launch"] = launch;
    r.canonical = d500::canonical_point(r.params);
    r.id = r.canonical;
    launches.push_back(r);
  }
  rep.rows = launches;
  rep.names = d500::point_names(rep.rows);
  const std::vector<d500::Block> chunks = d500::network_breakdowns(rep);
  const auto split = tables(chunks);
  EXPECT_EQ(chunks[0].items,
            (std::vector<std::string>{"network: Conv forward costs most on all 4 points, 2.000 ms each",
                                      "network: Conv forward costs most on each point (the share of "
                                      "the point's steps): launch=5 2.000 ms (100%); launch=6 2.000 "
                                      "ms (100%); launch=7 2.000 ms (100%)"}));
  ASSERT_EQ(split.size(), 4u) << "two groups, two tables each";
  EXPECT_EQ(split[0]->table.table[0].size(), 3u + 4u);
  EXPECT_EQ(split[0]->table.table[0][3], "launch=1");
  EXPECT_EQ(split[2]->table.table[0].size(), 3u + 3u);
  EXPECT_EQ(split[2]->table.table[0][3], "launch=5");
}

}  // namespace
