// The analysis against planted effects: synthetic campaigns written by d500-synth through the
// real ResultWriter (under mpirun), reported by `d500 report`, and the report's JSON checked.
#include <algorithm>
#include <regex>

#include "common/text.hpp"
#include "helpers.hpp"

using namespace d500test;

namespace {

class Analysis : public ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    fs::create_directories(dir_ / "run" / "results");
  }
  // Writes one job file with `ranks` ranks from a d500-synth spec.
  void synth(const std::string& job, int ranks, const std::string& spec, const std::string& run = "run") {
    std::string s = write(run + "-" + job + ".toml", "[job]\nid = \"" + job + "\"\n" + spec);
    fs::create_directories(dir_ / run / "results");
    Cmd c = sh("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np " +
               std::to_string(ranks) + " " + D500_SYNTH + " " + s + " " +
               (dir_ / run / "results" / (job + ".h5")).string());
    ASSERT_EQ(c.code, 0) << c.out;
  }
  Cmd report() { return sh(d500_cmd("report " + (dir_ / "run").string())); }
  // Evaluates a Python expression over the report's results.json (bound to j).
  std::string json(const std::string& expr) {
    Cmd c = sh("/usr/bin/python3 -c \"import json; j = json.load(open('" + (dir_ / "run" / "results.json").string() +
               "')); print(" + expr + ")\"");
    EXPECT_EQ(c.code, 0) << c.out;
    return c.out.substr(0, c.out.find_last_not_of('\n') + 1);
  }
  double num(const std::string& expr) { return std::stod(json(expr)); }
  // The report has one comparison across launches: of `varies`, `other` against `baseline`,
  // paired over `launches`.
  void expect_one_launch_comparison(const std::string& varies, const std::string& baseline, const std::string& other,
                                    const std::string& launches) {
    ASSERT_EQ(num("len(j['launch_comparisons'])"), 1);
    const std::string c = "j['launch_comparisons'][0]";
    EXPECT_EQ(json(c + "['varies']"), varies);
    EXPECT_EQ(json(c + "['baseline']"), baseline);
    EXPECT_EQ(json(c + "['other']"), other);
    EXPECT_EQ(json(c + "['launches']"), launches);
    EXPECT_EQ(json(c + "['group']").find("launch="), std::string::npos) << json(c + "['group']");
  }
};

}  // namespace

TEST_F(Analysis, PlantedTwofoldStrongScalingSpeedupIsRecovered) {
  const std::string common = "campaign = \"scaling\"\nrepetitions = 30\nwarmups = 2\nseed = 5\n";
  synth("job-0000", 1,
        common +
            "[[point]]\nparams = { workload = \"synthetic\", backend = \"x\" }\n"
            "median_s = 0.020\nnoise = 0.1\nscaling = \"strong\"\n");
  synth("job-0001", 2,
        common +
            "[[point]]\nparams = { workload = \"synthetic\", backend = \"x\" }\n"
            "median_s = 0.010\nnoise = 0.1\nscaling = \"strong\"\n");
  Cmd r = report();
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(json("j['scaling'][0]['kind']"), "strong");
  EXPECT_EQ(num("j['scaling'][0]['base_ranks']"), 1);
  const std::string p2 = "j['scaling'][0]['points'][1]";
  EXPECT_EQ(num(p2 + "['ranks']"), 2);
  const double lo = num(p2 + "['speedup']['lo']"), hi = num(p2 + "['speedup']['hi']");
  EXPECT_LE(lo, 2.0);
  EXPECT_GE(hi, 2.0);
  EXPECT_GT(lo, 1.6);  // and the interval is informative
  EXPECT_LT(hi, 2.5);
  EXPECT_LE(num(p2 + "['efficiency'][1]"), 1.0);
  EXPECT_GE(num(p2 + "['efficiency'][2]"), 1.0);
  EXPECT_NE(r.out.find("strong scaling"), std::string::npos) << r.out;
}

// A planted serial fraction of 0.2 (T(p) = T(1) (0.2 + 0.8 / p)) on 1, 2 and 4 ranks: one fit
// of it, whose interval holds 0.2, in the JSON, the caption and the plot (drawn out to the
// predictions at 8 and 16 ranks), and no second estimate beside it. An oversubscribed 8-rank
// point, slower than 4 ranks, stays in the series but out of the fit, and the caption says so.
TEST_F(Analysis, APlantedSerialFractionIsFittedOnceWithItsInterval) {
  const std::string common = "campaign = \"amdahl\"\nrepetitions = 40\nwarmups = 2\nseed = 11\n";
  int job = 0;
  for (const auto& [ranks, median] : {std::pair{1, "0.020"}, std::pair{2, "0.012"}, std::pair{4, "0.008"}})
    synth("job-000" + std::to_string(job++), ranks,
          common +
              "[[point]]\nparams = { workload = \"synthetic\", backend = \"x\" }\n"
              "median_s = " +
              median + "\nnoise = 0.02\nscaling = \"strong\"\n");
  // An 8-rank point on too few cores, slower than 4 ranks: shown, but not fitted.
  synth("job-0003", 8,
        "oversubscribed = true\n" + common +
            "[[point]]\nparams = { workload = \"synthetic\", backend = \"x\" }\n"
            "median_s = 0.015\nnoise = 0.02\nscaling = \"strong\"\n");
  Cmd r = report();
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string m = "j['scaling'][0]['model']";
  EXPECT_EQ(json(m + "['law']"), "Amdahl");
  EXPECT_LE(num(m + "['s'][1]"), 0.2);
  EXPECT_GE(num(m + "['s'][2]"), 0.2);
  EXPECT_NEAR(num(m + "['s'][0]"), 0.2, 0.03);
  EXPECT_NEAR(num(m + "['predicted_efficiency']['8'][0]"), 1 / (1 + 0.2 * 7), 0.05);
  EXPECT_EQ(json(m + "['left_out']"), "the oversubscribed 8-rank point left out of the fit");
  EXPECT_EQ(json("len(j['scaling'][0]['points'])"), "4");
  EXPECT_EQ(json("'amdahl_serial_fraction' in j['scaling'][0]"), "False");
  const std::string md = read_file_text(dir_ / "run" / "report.md");
  EXPECT_EQ(md.find("serial fraction"), std::string::npos) << "a second estimate beside the model's s";
  EXPECT_NE(md.find("Fitted model (Amdahl"), std::string::npos) << md;
  EXPECT_NE(md.find("(the oversubscribed 8-rank point left out of the fit)"), std::string::npos) << md;
  // The HTML plot's model line, the one after "ideal": the 4 measured counts and the 2 predictions.
  const std::string html = read_file_text(dir_ / "run" / "report.html");
  const auto legend = html.find(">Amdahl fit</text>");
  ASSERT_NE(legend, std::string::npos) << "no plot draws the fitted model";
  const auto line = html.rfind("<polyline", legend), pts = html.find("points=\"", line) + 8;
  const std::string points = html.substr(pts, html.find('"', pts) - pts);
  EXPECT_EQ(std::count(points.begin(), points.end(), ','), 6) << points;
}

TEST_F(Analysis, PlantedSmallDifferenceInHeavyNoiseIsNotSignificantAndALargeOneIs) {
  synth(
      "job-0000", 1,
      "campaign = \"compare\"\nrepetitions = 15\nwarmups = 1\nseed = 3\n"
      "[[point]]\nparams = { workload = \"synthetic\", backend = \"a\", size = 1 }\nmedian_s = 0.0100\nnoise = 0.5\n"
      "[[point]]\nparams = { workload = \"synthetic\", backend = \"b\", size = 1 }\nmedian_s = 0.0105\nnoise = 0.5\n"
      "[[point]]\nparams = { workload = \"synthetic\", backend = \"a\", size = 2 }\nmedian_s = 0.0200\nnoise = 0.1\n"
      "[[point]]\nparams = { workload = \"synthetic\", backend = \"b\", size = 2 }\nmedian_s = 0.0100\nnoise = 0.1\n");
  Cmd r = report();
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_EQ(json("len(j['comparisons'])"), "2");
  EXPECT_EQ(json("[c['speedup']['significant'] for c in j['comparisons'] if 'size=1' in c['group']][0]"), "False");
  EXPECT_NE(r.out.find("b vs a: no significant difference"), std::string::npos) << r.out;
  const std::string big = "[c for c in j['comparisons'] if 'size=2' in c['group']][0]['speedup']";
  EXPECT_EQ(json(big + "['significant']"), "True");
  EXPECT_LE(num(big + "['lo']"), 2.0);
  EXPECT_GE(num(big + "['hi']"), 2.0);
  // The sentence names the faster backend with the planted ~2x (the interval's bounds are checked above).
  EXPECT_NE(r.out.find("synthetic size=2: b is "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("x faster than a (95% CI of the speedup: ["), std::string::npos) << r.out;
}

TEST_F(Analysis, APlantedSlowRankIsFlagged) {
  synth("job-0000", 2,
        "campaign = \"ranks\"\nrepetitions = 40\nseed = 9\n"
        "[[point]]\nparams = { workload = \"synthetic\", backend = \"a\" }\nmedian_s = 0.01\n"
        "noise = 0.05\nrank_noise = 0.05\nslow_rank = 1\nslow_factor = 1.3\n"
        "[[point]]\nparams = { workload = \"synthetic\", backend = \"b\" }\nmedian_s = 0.01\n"
        "noise = 0.05\nrank_noise = 0.05\n");
  ASSERT_EQ(report().code, 0);
  EXPECT_LT(num("[p for p in j['points'] if 'synthetic:a' in p['canonical']][0]['ranks_p']"), 0.01);
  EXPECT_GT(num("[p for p in j['points'] if 'synthetic:b' in p['canonical']][0]['ranks_p']"), 0.01);
  // Two ranks paired by repetition: the exact sign test.
  EXPECT_EQ(
      num("1 if [p for p in j['points'] if 'synthetic:a' in p['canonical']][0]['ranks_test'] == 'sign test' else 0"),
      1);
  const double slow = num("[p for p in j['points'] if 'synthetic:a' in p['canonical']][0]['rank_medians_s'][1]");
  const double fast = num("[p for p in j['points'] if 'synthetic:a' in p['canonical']][0]['rank_medians_s'][0]");
  EXPECT_NEAR(slow / fast, 1.3, 0.05);
}

TEST_F(Analysis, TimeToAccuracyAcrossSeedsWithCensoredRuns) {
  // Ten seeds of one configuration; three never reach the target (acc_max below it), so they
  // are censored at the 20 s budget. A second configuration misses in six of ten seeds.
  std::string spec = "campaign = \"tta\"\nrepetitions = 1\n";
  for (int s = 1; s <= 10; ++s) {
    const bool miss_a = s > 7, miss_b = s > 4;
    for (const char* cfg : {"a", "b"}) {
      const bool miss = std::string(cfg) == "a" ? miss_a : miss_b;
      spec += "[[point]]\nparams = { workload = \"train\", backend = \"" + std::string(cfg) +
              "\", seed = " + std::to_string(s) +
              " }\nmedian_s = 0.001\n[point.curve]\ntau_s = " + std::to_string(1.0 + 0.25 * s) +
              "\nacc_max = " + (miss ? "0.85" : "0.99") + "\ntarget = 0.9\nbudget_s = 20.0\neval_every_s = 0.5\n";
    }
  }
  synth("job-0000", 1, spec);
  Cmd r = report();
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_EQ(json("len(j['time_to_accuracy'])"), "2");
  const std::string a = "[c for c in j['time_to_accuracy'] if c['group'].startswith('train:a')][0]";
  EXPECT_EQ(json(a + "['runs']"), "10");
  EXPECT_EQ(json(a + "['reached']"), "7");
  // Time to 0.9 of 0.99 (1 - exp(-t/tau)): t = tau ln(1/(1 - 0.9/0.99)) = 2.398 tau, read at the
  // next 0.5 s evaluation. Seeds 1..7 have tau = 1.25 .. 2.75: the median is seed 4 or 5's time.
  EXPECT_GT(num(a + "['median_s']"), 4.0);
  EXPECT_LT(num(a + "['median_s']"), 6.0);
  EXPECT_EQ(json(a + "['ci_s'][1]"), "> budget");                      // x(9) is a censored run
  EXPECT_NEAR(num(a + "['success_rate']['lo']"), 0.3475471499, 1e-6);  // scipy beta.ppf(0.025, 7, 4)
  const std::string b = "[c for c in j['time_to_accuracy'] if c['group'].startswith('train:b')][0]";
  EXPECT_EQ(json(b + "['reached']"), "4");
  EXPECT_EQ(json(b + "['median_s']"), "None");
  EXPECT_NE(r.out.find("undefined (6 of 10 runs missed)"), std::string::npos) << r.out;
}

// Issue 17: runs cut off before the target or the budget are right-censored at the training time
// they reached (Kaplan-Meier), not dropped; every rank's evaluations are checked. Ten seeds on 2
// ranks, each rank recording its evaluations; seeds 9 and 10 time out at 7 s of training, before
// their targets (8.0 and 8.5 s). Times to 0.9: seeds 1-8 at 3, 4, 4.5, 5, 5.5, 6, 7, 7.5 s. The
// Kaplan-Meier curve is exactly 0.5 from 5.5 s to 6 s: median 5.75 s (dropping the two would say
// 5.25 s). In configuration b, rank 1 of seed 3 measures a different accuracy.
TEST_F(Analysis, TimeToAccuracyCensorsCutOffRunsAndChecksEveryRank) {
  // Seeds 1-8 in one job; seeds 9 and 10 each in a job killed at 7 s of training.
  const std::string head = "campaign = \"tta\"\nrepetitions = 1\n";
  std::string complete = head;
  for (int s = 1; s <= 10; ++s) {
    std::string spec;
    for (const char* cfg : {"a", "b"})
      spec += "[[point]]\nparams = { workload = \"train\", backend = \"" + std::string(cfg) +
              "\", seed = " + std::to_string(s) +
              " }\nmedian_s = 0.001\n[point.curve]\ntau_s = " + std::to_string(1.0 + 0.25 * s) +
              "\nacc_max = 0.99\ntarget = 0.9\nbudget_s = 20.0\neval_every_s = 0.5\nall_ranks = true\n" +
              (s >= 9 ? "cut_off_s = 7.0\n" : "") + (std::string(cfg) == "b" && s == 3 ? "disagree_rank = 1\n" : "");
    if (s <= 8)
      complete += spec;
    else
      for (const char* cfg : {"a", "b"}) {  // a killed job never starts its next point: one job each
        const std::size_t at = spec.find("backend = \"" + std::string(cfg));
        const std::size_t from = spec.rfind("[[point]]", at), to = spec.find("[[point]]", at);
        synth("job-00" + std::to_string(s) + cfg, 2,
              head + spec.substr(from, to == std::string::npos ? std::string::npos : to - from));
      }
  }
  synth("job-0000", 2, complete);
  Cmd r = report();
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string a = "[c for c in j['time_to_accuracy'] if c['group'].startswith('train:a')][0]";
  EXPECT_EQ(json(a + "['runs']"), "10");
  EXPECT_EQ(json(a + "['reached']"), "8");
  EXPECT_EQ(json(a + "['cut_off_s']"), "[7, 7]");
  EXPECT_EQ(json("int('Kaplan-Meier' in " + a + "['method'])"), "1");
  EXPECT_DOUBLE_EQ(num(a + "['median_s']"), 5.75);
  EXPECT_LE(num(a + "['ci_s'][0]"), 5.75);
  EXPECT_EQ(json(a + "['ranks_disagree']"), "[]");
  // The success rate counts the runs whose outcome is known: 8 of 8.
  EXPECT_EQ(num(a + "['success_rate']['estimate']"), 1.0);
  const std::string b = "[c for c in j['time_to_accuracy'] if c['group'].startswith('train:b')][0]";
  EXPECT_EQ(json("len(" + b + "['ranks_disagree'])"), "1");
  EXPECT_EQ(json("int(" + b + "['ranks_disagree'][0].startswith('seed 3: at step 50 rank 1'))"), "1")
      << json(b + "['ranks_disagree']");
  EXPECT_NE(r.out.find("RANKS DISAGREE: seed 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 run(s) cut off, censored"), std::string::npos) << r.out;
}

// Issue 15, item 4: a report at another confidence level never overwrites the 95% one.
TEST_F(Analysis, AReportAtAnotherConfidenceLevelIsWrittenBesideTheFirst) {
  synth("job-0000", 1,
        "campaign = \"levels\"\nrepetitions = 30\nwarmups = 2\nseed = 5\n[[point]]\n"
        "params = { workload = \"synthetic\", backend = \"x\" }\nmedian_s = 0.010\nnoise = 0.1\n");
  ASSERT_EQ(report().code, 0);
  const fs::path run = dir_ / "run";
  const std::string md95 = read_file_text(run / "report.md"), csv95 = read_file_text(run / "results.csv");
  Cmd r99 = sh(d500_cmd("report --confidence 0.99 " + run.string()));
  ASSERT_EQ(r99.code, 0) << r99.out;
  for (const char* f : {"report-99.md", "report-99.html", "results-99.csv", "results-99.json"}) {
    EXPECT_TRUE(fs::exists(run / f)) << f;
    EXPECT_NE(r99.out.find(f), std::string::npos) << "the output names " << f << ": " << r99.out;
  }
  EXPECT_EQ(read_file_text(run / "report.md"), md95);
  EXPECT_EQ(read_file_text(run / "results.csv"), csv95);
  EXPECT_NE(read_file_text(run / "report-99.md"), md95);
  EXPECT_NE(read_file_text(run / "report-99.md").find("99%"), std::string::npos);
  Cmd r995 = sh(d500_cmd("report --confidence 0.995 " + run.string()));
  ASSERT_EQ(r995.code, 0) << r995.out;
  EXPECT_TRUE(fs::exists(run / "report-99.5.md"));
}

// Issue 15: `d500 compare` matches points by id across runs and flags what changed beyond the
// threshold with its interval; a regression makes the exit status 4 (usable in CI).
TEST_F(Analysis, CompareRunsFlagsAPlantedRegressionAndImprovementAndFailsOnTheRegression) {
  auto point = [](const std::string& backend, double median) {
    return "[[point]]\nparams = { workload = \"synthetic\", backend = \"" + backend +
           "\" }\nmedian_s = " + std::to_string(median) + "\nnoise = 0.05\n";
  };
  const std::string head = "campaign = \"cmp\"\nrepetitions = 20\nwarmups = 1\n";
  // Base: a, b, c at 10 ms and d (only here); other: a unchanged, b 1.5x slower, c 0.7x the
  // time, e only there. Different seeds: independent noise in the two runs.
  synth("job-0000", 1,
        head + "seed = 11\n" + point("a", 0.010) + point("b", 0.010) + point("c", 0.010) + point("d", 0.010), "base");
  synth("job-0000", 1,
        head + "seed = 12\n" + point("a", 0.010) + point("b", 0.015) + point("c", 0.007) + point("e", 0.010), "other");
  const std::string base = (dir_ / "base").string(), other = (dir_ / "other").string();
  const fs::path csv = dir_ / "cmp.csv";
  Cmd c = sh(d500_cmd("compare " + base + " " + other + " --csv " + csv.string()));
  EXPECT_EQ(c.code, 4) << c.out;
  EXPECT_NE(
      c.out.find("3 points in both (1 only in base, 1 only in other: not compared): 1 regression(s), 1 improvement(s)"),
      std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("regression: synthetic:b"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("improvement: synthetic:c"), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find(": synthetic:a "), std::string::npos) << "a did not change: " << c.out;
  EXPECT_NE(c.out.find("exit status 4"), std::string::npos) << c.out;
  const auto rows = read_csv(csv);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& [id, row] : rows) {
    const double ratio = std::stod(row.at("time_ratio")), lo = std::stod(row.at("ratio_lo")),
                 hi = std::stod(row.at("ratio_hi"));
    EXPECT_LE(lo, ratio);
    EXPECT_GE(hi, ratio);
    if (row.at("canonical").find("synthetic:b") == 0) {
      EXPECT_EQ(row.at("change"), "regression");
      EXPECT_LE(lo, 1.5) << "the planted 1.5 lies in the interval";
      EXPECT_GE(hi, 1.5);
    }
    if (row.at("canonical").find("synthetic:c") == 0) {
      EXPECT_EQ(row.at("change"), "improvement");
      EXPECT_LE(lo, 0.7);
      EXPECT_GE(hi, 0.7);
    }
  }
  // A threshold above the planted changes: both become significant changes within it, exit 0.
  Cmd lax = sh(d500_cmd("compare " + base + " " + other + " --threshold 0.6"));
  EXPECT_EQ(lax.code, 0) << lax.out;
  EXPECT_NE(lax.out.find("slower (within threshold): synthetic:b"), std::string::npos) << lax.out;
  EXPECT_NE(lax.out.find("faster (within threshold): synthetic:c"), std::string::npos) << lax.out;
  // Runs with nothing in common are an error naming both, not a silent success.
  synth("job-0000", 1, head + "seed = 13\n" + point("z", 0.010), "unrelated");
  Cmd none = sh(d500_cmd("compare " + base + " " + (dir_ / "unrelated").string()));
  EXPECT_EQ(none.code, 1) << none.out;
  EXPECT_NE(none.out.find("share no point"), std::string::npos) << none.out;
}

// Independence of repetitions and paired rank tests on planted effects: a drifting point is
// flagged with its trend, a steady one is not; 3 ranks with a slow one are compared by Friedman.
TEST_F(Analysis, APlantedTrendIsFlaggedAndThreeRanksArePairedByFriedman) {
  synth("job-0000", 3,
        "campaign = \"indep\"\nrepetitions = 60\nwarmups = 1\nseed = 4\n"
        "[[point]]\nparams = { workload = \"synthetic\", backend = \"drift\" }\nmedian_s = 0.01\nnoise = 0.05\n"
        "drift = 0.5\n"
        "[[point]]\nparams = { workload = \"synthetic\", backend = \"steady\" }\nmedian_s = 0.01\nnoise = 0.05\n"
        "rank_noise = 0.05\nslow_rank = 2\nslow_factor = 1.2\n");
  Cmd r = report();
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string drift = "[p for p in j['points'] if 'synthetic:drift' in p['canonical']][0]";
  const std::string steady = "[p for p in j['points'] if 'synthetic:steady' in p['canonical']][0]";
  EXPECT_GT(num(drift + "['independence']['trend_rho']"), 0.5);
  EXPECT_LT(num(drift + "['independence']['trend_p']"), 0.01);
  EXPECT_GT(num(steady + "['independence']['trend_p']"), 0.01);
  EXPECT_EQ(json(steady + "['ranks_test']"), "Friedman");
  EXPECT_LT(num(steady + "['ranks_p']"), 0.01);
  const std::string md = read_file_text(dir_ / "run" / "report.md");
  EXPECT_NE(md.find("| no: trend rho=0."), std::string::npos) << md;
  EXPECT_NE(md.find("try more warm-ups, longer repetitions"), std::string::npos);
  EXPECT_NE(md.find("differ (Friedman p"), std::string::npos);
}

// A GPU point: device rows of 0.8 of each repetition's duration (the rest launch and wait) and
// its peak device memory. The report gives both medians, the device's interval holding the
// planted value, and the memory, in results.json, results.csv and report.md; a host point beside
// it has no device figures. Its planted arithmetic peak gives the device rate's share of it
// (10 GFLOP in about 8 ms against 5 TFLOP/s: about 25%). Its two ranks' libraries chose different algorithms: the table
// gives rank 0's, and the report's attention list names rank 1's.
TEST_F(Analysis, APlantedDeviceShareIsReportedBesideTheHostTime) {
  synth("job-0000", 2,
        "campaign = \"gpu\"\nrepetitions = 40\nwarmups = 2\nseed = 3\n"
        "[[point]]\nparams = { workload = \"synthetic\", backend = \"gpu\" }\nmedian_s = 0.010\nnoise = 0.05\n"
        "work_flops = 10000000000\ndevice_share = 0.8\ndevice_memory_bytes = 3221225472\n"
        "device_peak_flops = 5e12\n"
        "algorithms = [\"IMPLICIT_GEMM\", \"WINOGRAD\"]\nfallback_steps = 6\nfallback_ops = \"Resize, ArgMax\"\n"
        "[[point]]\nparams = { workload = \"synthetic\", backend = \"host\" }\nmedian_s = 0.010\nnoise = 0.05\n"
        "fallback_steps = 4\nfallback_ops = \"Mod\"\n");
  Cmd r = report();
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string gpu = "[p for p in j['points'] if p['backend'] == 'gpu'][0]";
  const double host = num(gpu + "['median_s']"), device = num(gpu + "['device']['median_s']");
  EXPECT_NEAR(device / host, 0.8, 0.01);
  EXPECT_LE(num(gpu + "['device']['ci'][0]"), device);
  EXPECT_GE(num(gpu + "['device']['ci'][1]"), device);
  EXPECT_EQ(num(gpu + "['device']['peak_memory_bytes']"), 3221225472.0);
  // The tail: with 40 repetitions the 90th percentile has its exact interval, the 99th none
  // (it needs 368), and the report says so.
  EXPECT_EQ(num(gpu + "['tail'][0]['p']"), 0.9);
  EXPECT_GE(num(gpu + "['tail'][0]['estimate_s']"), host);
  EXPECT_LE(num(gpu + "['tail'][0]['ci'][0]"), num(gpu + "['tail'][0]['estimate_s']"));
  EXPECT_GE(num(gpu + "['tail'][0]['ci'][1]"), num(gpu + "['tail'][0]['estimate_s']"));
  EXPECT_EQ(json(gpu + "['tail'][1]['ci']"), "None");
  EXPECT_EQ(num(gpu + "['tail'][1]['least_n_for_ci']"), 368);
  EXPECT_NEAR(num(gpu + "['device']['peak_fraction']"), 1e10 / device / 5e12, 1e-6);
  EXPECT_NEAR(num(gpu + "['device']['peak_fraction']"), 0.25, 0.02);
  EXPECT_EQ(json(gpu + "['device']['peak_basis']"), "planted by d500-synth");
  EXPECT_EQ(json("'device' in [p for p in j['points'] if p['backend'] == 'host'][0]"), "False");
  const auto rows = read_csv(dir_ / "run" / "results.csv");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& [id, row] : rows) {
    SCOPED_TRACE(row.at("backend"));
    EXPECT_EQ(row.at("device_median_s").empty(), row.at("backend") == "host");
    EXPECT_EQ(row.at("device_peak_memory_bytes"), row.at("backend") == "gpu" ? "3221225472" : "");
    EXPECT_EQ(row.at("device_peak_fraction").empty(), row.at("backend") == "host");
  }
  const std::string md = read_file_text(dir_ / "run" / "report.md");
  const auto at = md.find("## On the device");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string section = md.substr(at, md.find("\n## ", at + 1) - at);
  EXPECT_NE(section.find("3.00 GiB"), std::string::npos) << section;
  EXPECT_NE(md.find("368 for p99; a bare value has none"), std::string::npos) << md;
  EXPECT_NE(section.find("| 20"), std::string::npos) << "launch and wait, about 20%:\n" << section;
  EXPECT_NE(section.find("| of peak |"), std::string::npos) << section;
  const std::string of_peak = "| " + ::d500::fmt_sig(100 * num(gpu + "['device']['peak_fraction']"), 3) + "% |";
  EXPECT_NE(section.find(of_peak), std::string::npos) << of_peak << "\n" << section;
  EXPECT_EQ(section.find("backend=host"), std::string::npos) << section;
  EXPECT_EQ(section.find("synthetic:host"), std::string::npos) << section;
  EXPECT_NE(section.find("| IMPLICIT_GEMM |"), std::string::npos) << section;
  EXPECT_NE(md.find("its ranks set up differently (the point records rank 0's): cudnn.algorithm: rank 1 has WINOGRAD"),
            std::string::npos)
      << md;
  // The device point's host fallbacks are named; the host point's reference steps copy nothing.
  EXPECT_NE(md.find("6 of its node steps ran on d500's reference through host mirrors (Resize, ArgMax)"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("(Mod)"), std::string::npos) << md;
}

// Two backends measured in the same 5 launches, with a planted factor per launch and point
// (sigma 0.2) far above the noise within a launch (0.02), and a planted speedup of 2: the
// comparison across launches pairs the launch medians and its interval, recomputed here from
// results.json, holds the planted ratio (0.5, baseline "fast" over "slow") and is wider than
// any comparison within one launch, which covers none of the launch-to-launch variation.
TEST_F(Analysis, BackendsMeasuredInSeveralLaunchesAreComparedAcrossThemPairedByLaunch) {
  for (int launch = 1; launch <= 5; ++launch) {
    std::string spec = "campaign = \"launch-compare\"\nrepetitions = 20\nwarmups = 1\nseed = 21\n";
    for (const auto& [backend, median] : {std::pair{"fast", "0.005"}, std::pair{"slow", "0.010"}})
      spec += std::string("[[point]]\nparams = { workload = \"synthetic\", backend = \"") + backend +
              "\", launch = " + std::to_string(launch) + " }\nmedian_s = " + median +
              "\nnoise = 0.02\nlaunch_noise = 0.2\n";
    synth("job-000" + std::to_string(launch - 1), 1, spec);
  }
  Cmd r = report();
  ASSERT_EQ(r.code, 0) << r.out;
  expect_one_launch_comparison("backend", "fast", "slow", "[1, 2, 3, 4, 5]");
  const std::string c = "j['launch_comparisons'][0]";
  // The interval from the paired launch medians: t with 4 degrees of freedom on the log ratios.
  Cmd check = sh(
      "/usr/bin/python3 -c \"import json, math, statistics as st; j = json.load(open('" +
      (dir_ / "run" / "results.json").string() +
      "')); c = j['launch_comparisons'][0]; d = [math.log(a / b) for a, b in zip(c['baseline_medians_s'], c['other_medians_s'])]; "
      "m = st.mean(d); h = 2.7764451051977987 * st.stdev(d) / math.sqrt(5); s = c['speedup']; "
      "assert abs(s['estimate'] / math.exp(m) - 1) < 1e-9, s; assert abs(s['lo'] / math.exp(m - h) - 1) < 1e-9, s; "
      "assert abs(s['hi'] / math.exp(m + h) - 1) < 1e-9, s; "
      "assert (c['replicates_to_resolve'] is None) == (s['lo'] > 1 or s['hi'] < 1), c; print('ok')\"");
  EXPECT_EQ(check.out, "ok\n") << check.out;
  const double lo = num(c + "['speedup']['lo']"), hi = num(c + "['speedup']['hi']");
  EXPECT_LE(lo, 0.5);
  EXPECT_GE(hi, 0.5);
  // Each launch's own comparison (one launch's 20 repetitions each side) is far narrower.
  EXPECT_EQ(num("len(j['comparisons'])"), 5);
  for (int i = 0; i < 5; ++i) {
    const std::string w = "j['comparisons'][" + std::to_string(i) + "]['speedup']";
    EXPECT_LT(num(w + "['hi']") / num(w + "['lo']"), hi / lo) << "launch comparison " << i;
  }
  const std::string md = read_file_text(dir_ / "run" / "report.md");
  EXPECT_NE(md.find("### Comparisons across launches"), std::string::npos) << md;
  EXPECT_NE(md.find("paired by launch"), std::string::npos) << md;
  EXPECT_NE(md.find("measured in the same launches are also compared across them"), std::string::npos)
      << "the method says so";
  EXPECT_TRUE(std::regex_search(r.out, std::regex("slow vs fast +5 +[0-9.]+ \\[")))
      << "its row in the terminal: " << r.out;
}

// A strong-scaling series measured in 3 launches (a 1-rank and a 2-rank job in each, a planted
// factor per launch and point): the 2-rank point is compared with the 1-rank one across the
// launches, paired by launch, its interval holding the planted speedup of 2 and its efficiency
// the speedup over the ideal 2.
TEST_F(Analysis, AScalingSeriesMeasuredInSeveralLaunchesIsComparedAcrossThem) {
  int job = 0;
  for (int launch = 1; launch <= 3; ++launch)
    for (const auto& [ranks, median] : {std::pair{1, "0.020"}, std::pair{2, "0.010"}})
      synth(
          "job-000" + std::to_string(job++), ranks,
          "campaign = \"launch-scaling\"\nrepetitions = 20\nwarmups = 1\nseed = 9\n[[point]]\nparams = { workload = \"synthetic\", "
          "backend = \"x\", launch = " +
              std::to_string(launch) + " }\nmedian_s = " + median +
              "\nnoise = 0.02\nlaunch_noise = 0.1\nscaling = \"strong\"\n");
  Cmd r = report();
  ASSERT_EQ(r.code, 0) << r.out;
  expect_one_launch_comparison("ranks", "1 rank", "2 ranks", "[1, 2, 3]");
  const std::string c = "j['launch_comparisons'][0]";
  EXPECT_EQ(num(c + "['ideal_speedup']"), 2);
  const double est = num(c + "['speedup']['estimate']");
  EXPECT_NEAR(est,
              std::exp((std::log(num(c + "['baseline_medians_s'][0]") / num(c + "['other_medians_s'][0]")) +
                        std::log(num(c + "['baseline_medians_s'][1]") / num(c + "['other_medians_s'][1]")) +
                        std::log(num(c + "['baseline_medians_s'][2]") / num(c + "['other_medians_s'][2]"))) /
                       3),
              1e-6 * est);
  EXPECT_LE(num(c + "['speedup']['lo']"), 2.0);
  EXPECT_GE(num(c + "['speedup']['hi']"), 2.0);
  EXPECT_TRUE(std::regex_search(r.out, std::regex("synthetic[^\n]*2 ranks vs 1 rank +3 +[0-9.]+ \\[")))
      << "its row in the terminal: " << r.out;
  EXPECT_NE(r.out.find("efficiency " + ::d500::fmt_sig(est / 2, 3)), std::string::npos) << r.out;
}

// A strong-scaling series of 1, 2 and 4 ranks measured in 4 launches with Amdahl's law planted
// (s = 0.1: T(p) = T(1) (1 + 0.1 (p-1)) / p) and a factor per launch and point: the model across
// launches fits each launch, its s and predicted efficiencies are Student's t over the four fits
// (recomputed here from results.json), the interval holds the planted s, and Amdahl's law is
// chosen (the USL's k is not clearly above 0).
TEST_F(Analysis, AScalingSeriesModelIsFittedAcrossItsLaunches) {
  int job = 0;
  for (int launch = 1; launch <= 4; ++launch)
    for (const auto& [ranks, median] : {std::pair{1, "0.0400"}, std::pair{2, "0.0220"}, std::pair{4, "0.0130"}})
      synth(
          "job-00" + std::to_string(10 + job++), ranks,
          "campaign = \"launch-model\"\nrepetitions = 20\nwarmups = 1\nseed = 4\n[[point]]\nparams = { workload = \"synthetic\", "
          "backend = \"x\", launch = " +
              std::to_string(launch) + " }\nmedian_s = " + median +
              "\nnoise = 0.01\nlaunch_noise = 0.03\nscaling = \"strong\"\n");
  Cmd r = report();
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(num("len(j['launch_scaling'])"), 1);
  const std::string m = "j['launch_scaling'][0]";
  EXPECT_EQ(json(m + "['law']"), "Amdahl");
  EXPECT_EQ(json(m + "['ranks']"), "[1, 2, 4]");
  EXPECT_EQ(json(m + "['launches']"), "[1, 2, 3, 4]");
  EXPECT_LE(num(m + "['s']['lo']"), 0.1);
  EXPECT_GE(num(m + "['s']['hi']"), 0.1);
  // Each launch's Amdahl fit from its medians, and Student's t (3 degrees of freedom) over them.
  Cmd check =
      sh("/usr/bin/python3 -c \"import json, math, statistics as st; j = json.load(open('" +
         (dir_ / "run" / "results.json").string() +
         "')); m = j['launch_scaling'][0]; pts = [p for p in j['points'] if p['status'] == 'complete']; fits = []\n"
         "for L in m['launches']:\n"
         "  med = {p['ranks']: p['median_s'] for p in pts if ' launch=%d ' % L in p['canonical'] + ' '}\n"
         "  xs = [(n - 1, n / (med[1] / med[n]) - 1) for n in (2, 4)]\n"
         "  fits.append(max(0.0, sum(x * y for x, y in xs) / sum(x * x for x, y in xs)))\n"
         "assert all(abs(a - b) < 1e-9 for a, b in zip(fits, m['launch_s'])), (fits, m['launch_s'])\n"
         "h = 3.182446305284263 * st.stdev(fits) / 2; s = m['s']\n"
         "assert abs(s['estimate'] - st.mean(fits)) < 1e-9 and abs(s['lo'] - (st.mean(fits) - h)) < 1e-9, s\n"
         "print('ok')\"");
  EXPECT_EQ(check.out, "ok\n") << check.out;
  const std::string md = read_file_text(dir_ / "run" / "report.md");
  EXPECT_NE(md.find("### Scaling models across launches"), std::string::npos) << md;
  EXPECT_NE(r.out.find("across 4 launches, scaling model of synthetic"), std::string::npos) << r.out;
}
