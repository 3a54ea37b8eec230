// The report's names, figures and physical ranges, on rows made here (no files): what tells two
// points apart is shown and nothing else, a figure's line joins only points that differ in its x
// parameter alone, and a scaling fit outside its law's range is reported as failed.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <regex>
#include <set>

#include "analysis/document.hpp"
#include "analysis/format.hpp"
#include "analysis/report_rows_test.hpp"
#include "analysis/reporters.hpp"
#include "analysis/summary.hpp"
#include "analysis/svg.hpp"

namespace {

using d500::PointRow;

PointRow row(const std::string& backend, std::int64_t n, std::int64_t rpn, std::int64_t seed, double median) {
  PointRow r;
  r.workload = "gemm";
  r.backend = backend;
  r.params = {{"workload", std::string("gemm")}, {"backend", backend},        {"n", n},
              {"ranks_per_node", rpn},           {"nodes", std::int64_t{1}},  {"seed", seed},
              {"dtype", std::string("float32")}, {"threads", std::int64_t{1}}};
  r.canonical = d500::canonical_point(r.params);
  r.id = r.canonical;
  r.ranks = static_cast<int>(rpn);
  r.outcome = d500::Outcome::Complete;
  r.status = "complete";
  r.rate_unit = "GFLOP/s";
  std::mt19937_64 gen(static_cast<std::uint64_t>(n * 7 + rpn));
  std::normal_distribution<double> noise(1.0, 0.01);
  for (int i = 0; i < 12; ++i) r.costs.push_back(median * noise(gen));
  r.time = d500::stats::summarize(r.costs);
  r.rate = 2.0 * static_cast<double>(n * n * n) / r.time.median / 1e9;
  r.rate_lo = 2.0 * static_cast<double>(n * n * n) / r.time.hi / 1e9;
  r.rate_hi = 2.0 * static_cast<double>(n * n * n) / r.time.lo / 1e9;
  return r;
}

d500::Report report(std::vector<PointRow> rows) { return d500::test::report_of(std::move(rows)); }

// Strong scaling of blas gemm at n = 64 and 128 over `ranks`, time(n, ranks) each point's median:
// the report with its two series.
d500::Report two_series(const std::vector<int>& ranks, const std::function<double(std::int64_t, int)>& time) {
  std::vector<PointRow> rows;
  for (std::int64_t n : {64, 128})
    for (int p : ranks) {
      PointRow r = row("blas", n, 1, 1, time(n, p));
      r.params.erase("ranks_per_node");
      r.ranks = p;
      rows.push_back(r);
    }
  d500::Report rep = report(rows);
  rep.scaling = d500::scaling_series(rep.rows, 0.95, 7);
  return rep;
}

// `r` with `more` parameters, its canonical text and id made again from them.
PointRow with_params(PointRow r, const d500::Params& more) {
  for (const auto& [k, v] : more) r.params[k] = v;
  r.canonical = d500::canonical_point(r.params);
  r.id = r.canonical;
  return r;
}

// The SVG of each of the report's figures whose name starts with `prefix`, in order.
std::vector<std::string> figures_named(const d500::Report& rep, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& s : d500::report_document(rep).sections)
    for (const auto& b : s.blocks)
      if (b.kind == d500::Block::Kind::Figure && b.name.rfind(prefix, 0) == 0) out.push_back(b.svg);
  return out;
}

// Parameters with the same value on every point (gemm's k, m and n swept together) are named once
// in a label, "k=m=n=256", as the Results table heads their one column "k = m = n"; one that
// differs on some point keeps its own.
TEST(PointNames, ParametersSweptTogetherAreNamedOnce) {
  std::vector<PointRow> rows;
  for (std::int64_t n : {256, 512}) rows.push_back(with_params(row("blas", n, 1, 1, 0.01), {{"k", n}, {"m", n}}));
  d500::PointNames names = d500::point_names(rows);
  EXPECT_EQ(names.label(rows[1]), "gemm k=m=n=512");
  EXPECT_EQ(names.label(rows[1], {"n"}), "gemm k=m=512") << "less n, the rest still said once";
  rows.push_back(with_params(row("blas", 512, 1, 1, 0.01), {{"k", std::int64_t{512}}, {"m", std::int64_t{64}}}));
  names = d500::point_names(rows);
  EXPECT_EQ(names.label(rows[2]), "gemm k=n=512 m=64");
}

// A number a named shape fixes (conv2d's c and h by its shape) does not lengthen a point's name:
// the shape names it. A number swept on its own (n) still does.
TEST(PointNames, NumbersTheShapeFixesAreLeftOutOfAName) {
  std::vector<PointRow> rows;
  for (const auto& [shape, c, h] : {std::tuple{"resnet50/conv1", 3, 224}, std::tuple{"resnet50/res2_3x3", 64, 56}})
    for (std::int64_t n : {8, 32}) {
      PointRow r = with_params(row("blas", n, 1, 1, 0.01),
                               {{"shape", std::string(shape)}, {"c", std::int64_t{c}}, {"h", std::int64_t{h}}});
      rows.push_back(r);
    }
  const d500::PointNames names = d500::point_names(rows);
  EXPECT_EQ(names.fixed.at("gemm"), (std::set<std::string>{"c", "h"}));
  EXPECT_EQ(names.label(rows[3]), "gemm n=32 shape=resnet50/res2_3x3");
  std::set<std::string> all;
  for (const auto& r : rows) all.insert(names.label(r));
  EXPECT_EQ(all.size(), rows.size()) << "no two points named alike";
}

TEST(PointNames, APointIsNamedByWhatVariesAndTheRestIsSaidOnce) {
  std::vector<PointRow> rows;
  for (const char* b : {"reference", "blas"})
    for (std::int64_t n : {64, 128}) rows.push_back(row(b, n, 1, 42, 1e-3));
  const auto rep = report(rows);
  EXPECT_EQ(d500::point_label(rep, rep.rows[0]), "gemm:reference n=64");
  EXPECT_EQ(rep.names.shared_text("gemm"), "dtype=float32 nodes=1 ranks_per_node=1 seed=42 threads=1");
  // Seeds and rank counts that vary are shown: two rows never read alike.
  rows.push_back(row("blas", 128, 2, 7, 1e-3));
  const auto more = report(rows);
  std::set<std::string> labels;
  for (const auto& r : more.rows) labels.insert(d500::point_label(more, r));
  EXPECT_EQ(labels.size(), more.rows.size());
  EXPECT_EQ(d500::point_label(more, more.rows.back()), "gemm:blas n=128 ranks_per_node=2 seed=7");
}

// A workload whose points all ran on one backend (the distributed campaign's reference) is not
// named by it on every row: its labels leave the backend out, the Shared line says it once and the
// Results table has no column of one value; a label's workload and the rest still part cleanly.
TEST(PointNames, ALoneBackendIsSaidOnceNotOnEveryRow) {
  std::vector<PointRow> rows;
  for (std::int64_t rpn : {1, 2}) rows.push_back(row("reference", 64, rpn, 1, 1e-3));
  rows.push_back(row("reference", 64, 1, 1, 1e-3));
  rows.back().workload = "conv2d";
  rows.push_back(row("blas", 128, 1, 1, 1e-3));
  rows.back().workload = "conv2d";
  const auto rep = report(rows);
  EXPECT_EQ(d500::point_label(rep, rep.rows[1]), "gemm ranks_per_node=2");
  EXPECT_EQ(d500::point_label(rep, rep.rows[2]), "conv2d:reference n=64") << "conv2d ran on two backends";
  EXPECT_EQ(rep.names.shared_text("gemm"), "backend=reference dtype=float32 n=64 nodes=1 seed=1 threads=1");
  EXPECT_EQ(d500::label_workload("gemm ranks_per_node=2"), "gemm");
  EXPECT_EQ(d500::label_rest("gemm ranks_per_node=2"), "ranks_per_node=2");
  EXPECT_EQ(d500::label_workload("conv2d:reference n=64"), "conv2d");
  EXPECT_EQ(d500::label_rest("conv2d:reference n=64"), "reference n=64");
  EXPECT_EQ(d500::label_rest("gemm"), "gemm") << "a label of the workload alone stays whole";
  const std::string terminal = d500::render_console(d500::report_document(rep), 120);
  const std::string gemm = terminal.substr(terminal.find("Results: gemm"));
  EXPECT_NE(gemm.find("Shared by every gemm point: backend=reference"), std::string::npos) << gemm;
  const std::string header = gemm.substr(gemm.rfind('\n', gemm.find(" median ")) + 1);
  EXPECT_EQ(header.rfind("ranks_per_node", 0), 0u) << "no backend column before it:\n" << gemm;
  const std::string conv = terminal.substr(terminal.find("Results: conv2d"));
  EXPECT_NE(conv.find("\nbackend "), std::string::npos) << "two backends keep their column:\n" << conv;
}

// A column of "complete" on every row tells the terminal nothing: it says so in a line and gives
// the room to the names (the operators campaign cut "resnet50/res3_3x3_stride2" by one character
// for it); a point that is not complete brings the column back; the files keep it always. So with
// a reps column of one count (cpu-frameworks cut "backend-failed" to "backend-fail…" for one of
// 10s): the line says the count, and a point measured with another brings the column back.
TEST(ReportTables, TheTerminalSaysEveryPointCompleteOnceInsteadOfAColumn) {
  std::vector<PointRow> rows;
  for (std::int64_t n : {64, 128})
    for (const char* b : {"reference", "blas"}) rows.push_back(row(b, n, 1, 1, 1e-3));
  auto results = [](const d500::Report& rep) {
    const std::string t = d500::render_console(d500::report_document(rep), 120);
    return t.substr(t.find("Results: gemm"), t.find("\n\n", t.find("Results: gemm")) - t.find("Results: gemm"));
  };
  const std::string all = results(report(rows));
  EXPECT_NE(all.find("Every gemm point is complete, with 12 repetitions each."), std::string::npos) << all;
  EXPECT_EQ(all.find(" status"), std::string::npos) << all;
  EXPECT_EQ(all.find(" reps "), std::string::npos) << all;
  const std::string wide = d500::render_console(d500::report_document(report(rows)), 0);
  EXPECT_NE(wide.find(" status"), std::string::npos) << "--wide keeps the column";
  EXPECT_NE(wide.find(" reps "), std::string::npos) << "--wide keeps the column";
  rows[3].outcome = d500::Outcome::BackendFailed;
  rows[3].status = "backend-failed";
  rows[3].validation_status = "failed";
  rows[3].validation_max_rel_error = std::nan("");
  rows[3].validation_tolerance = 0;
  rows[3].costs.clear();
  rows[3].time = d500::stats::summarize(rows[3].costs);
  const std::string one = results(report(rows));
  EXPECT_EQ(one.find("Every gemm point is complete"), std::string::npos) << one;
  EXPECT_NE(one.find("Every gemm point that measured has 12 repetitions."), std::string::npos) << one;
  EXPECT_NE(one.find(" status"), std::string::npos) << one;
  EXPECT_NE(one.find("backend-failed"), std::string::npos) << one;
  EXPECT_EQ(one.find("nan"), std::string::npos) << "a backend that failed before its output was judged:\n" << one;
  rows[0].costs.resize(8);
  rows[0].time = d500::stats::summarize(rows[0].costs);
  const std::string fewer = results(report(rows));
  EXPECT_EQ(fewer.find("repetitions"), std::string::npos) << fewer;
  EXPECT_NE(fewer.find(" reps "), std::string::npos) << "two counts: the column is back\n" << fewer;
}

// Where many parameters are shared (here 18: twelve defaults, dtype, lr, nodes, ...) and the
// campaign file is known, the ones it names are said first and those it left at their defaults
// after them, which the terminal counts; few shared, or an unknown file, say them all alike.
TEST(ReportTables, SharedParametersTheCampaignNamedComeBeforeItsDefaults) {
  std::vector<PointRow> rows;
  for (std::int64_t n : {64, 128}) {
    d500::Params more;
    for (char c = 'a'; c <= 'l'; ++c) more[std::string("default_") + c] = std::int64_t{1};
    more["lr"] = 0.02;
    rows.push_back(with_params(row("blas", n, 1, 1, 1e-3), more));
  }
  d500::Report rep = report(rows);
  auto said = [&](std::size_t width) {
    const std::string t = d500::render_console(d500::report_document(rep), width);
    const std::size_t at = t.find("Shared by every gemm point");
    return t.substr(at, t.find(".\n", at) - at);
  };
  EXPECT_NE(said(0).find("default_a=1"), std::string::npos) << "no campaign keys: every one said";
  rep.campaign_keys = {"lr", "n", "seed"};
  const std::string terminal = said(120);
  EXPECT_EQ(terminal.find("default_a"), std::string::npos) << terminal;
  EXPECT_NE(terminal.find("Shared by every gemm point: backend=blas lr=0.02 seed=1; 16 more left at their defaults"),
            std::string::npos)
      << terminal;
  const std::string md = d500::find_reporter("markdown").render_report(rep, d500::report_document(rep));
  EXPECT_NE(md.find("Shared by every gemm point: backend=blas lr=0.02 seed=1. Left at their defaults (the campaign "
                    "file does not name them): default_a=1"),
            std::string::npos)
      << md;
}

TEST(PointNames, APlannedPointWithoutResultsReadsLikeItsNeighbours) {
  const PointRow done = row("blas", 64, 2, 42, 1e-3);
  const d500::Params parsed = d500::parse_canonical_point(done.canonical);
  EXPECT_EQ(parsed, done.params);
}

// Per panel (the varying parameters other than x), a series per backend whose line runs along
// x: the points of one series share everything but n.
TEST(ReportFigures, ALineJoinsOnlyPointsThatDifferInItsXParameterAlone) {
  std::vector<PointRow> rows;
  for (std::int64_t rpn : {1, 2})
    for (const char* b : {"reference", "blas"})
      for (std::int64_t n : {512, 64, 1024, 128}) rows.push_back(row(b, n, rpn, 42, 1e-6 * static_cast<double>(n)));
  const std::vector<std::string> rate_figures = figures_named(report(rows), "rate-");
  ASSERT_EQ(rate_figures.size(), 2u) << "one panel per ranks_per_node";
  const std::regex series("<g class=\"series\" data-name=\"([a-z]+)\" data-line=\"1\">([^]*?)</g>"),
      x("data-x=\"([0-9.]+)\""), tip("ranks_per_node=([0-9])");
  for (const auto& svg : rate_figures) {
    EXPECT_NE(svg.find("n (log scale)"), std::string::npos) << "64 to 1024 spans a decade";
    int count = 0;
    for (std::sregex_iterator it(svg.begin(), svg.end(), series), end; it != end; ++it, ++count) {
      const std::string body = (*it)[2];
      std::vector<double> xs;
      for (std::sregex_iterator m(body.begin(), body.end(), x); m != end; ++m) xs.push_back(std::stod((*m)[1]));
      EXPECT_EQ(xs, (std::vector<double>{64, 128, 512, 1024})) << "ordered along x, each n once";
      std::set<std::string> rpn;
      for (std::sregex_iterator m(body.begin(), body.end(), tip); m != end; ++m) rpn.insert((*m)[1]);
      EXPECT_EQ(rpn.size(), 1u) << "a series never mixes rank counts";
    }
    EXPECT_EQ(count, 2) << "a series per backend";
  }
}

// A oneDNN point per fusion ("": unset) in each of `launches` launches, launch k's times
// 1 + k `drift` ms.
std::vector<PointRow> launched_rows(std::int64_t launches, std::initializer_list<const char*> fusions, double drift) {
  std::vector<PointRow> rows;
  for (std::int64_t launch = 1; launch <= launches; ++launch)
    for (const char* fusion : fusions)
      rows.push_back(with_params(row("onednn", 64, 1, 42, 1e-3 * (1.0 + drift * static_cast<double>(launch))),
                                 {{"fusion", std::string(fusion)}, {"launch", launch}}));
  return rows;
}

// The boxes of the repetitions' figure: named by the values that tell the points apart, the x axis
// by their parameters, the backend left out where every point shares it; no two names of a
// figure read alike, although the points' full labels are too long to show (here they differed
// only after the 26th character, and every launch of a fusion looked the same).
TEST(ReportFigures, NoTwoBoxesOfTheRepetitionsFigureReadAlike) {
  const std::vector<std::string> boxes =
      figures_named(report(launched_rows(4, {"", "add_relu", "bn_relu", "add_relu+bn_relu"}, 0.01)), "repetitions-");
  ASSERT_EQ(boxes.size(), 1u);
  const std::string& svg = boxes[0];
  EXPECT_NE(svg.find(">fusion, launch</text>"), std::string::npos) << "the x axis names the boxes' parameters";
  const std::regex tick("<text class=\"tick\"[^>]*>(?:<title>[^<]*</title>)?([^<]*)</text>");
  std::set<std::string> names;
  int count = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), tick), end; it != end; ++it) {
    const std::string shown = (*it)[1];
    if (shown.empty() || std::isdigit(static_cast<unsigned char>(shown[0])) != 0) continue;  // the y axis' numbers
    ++count;
    names.insert(shown);
  }
  EXPECT_EQ(count, 16);
  EXPECT_EQ(names.size(), 16u) << "two boxes read alike";
  EXPECT_TRUE(names.count("default, 1")) << "an unset fusion reads as the results table has it";
  EXPECT_TRUE(names.count("add_relu+bn_relu, 4"));
  for (const auto& n : names) EXPECT_EQ(n.find("onednn"), std::string::npos) << "every point's backend: " << n;
  // A name too long for its room is cut in the middle, so that names that differ at their ends
  // stay apart.
  d500::svg::BoxPlot plot;
  plot.title = "t";
  for (const char* name :
       {"a-parameter-value-far-longer-than-the-room-for-it, 1", "a-parameter-value-far-longer-than-the-room-for-it, 2"})
    plot.boxes.push_back({name, name, {1.0, 2.0, 3.0}, 2.0, 1.0, 3.0, true});
  const std::string two = d500::svg::render(plot);
  std::set<std::string> cut;
  for (std::sregex_iterator it(two.begin(), two.end(), tick), end; it != end; ++it)
    if (const std::string shown = (*it)[1]; shown.find("\u2026") != std::string::npos) cut.insert(shown);
  EXPECT_EQ(cut.size(), 2u) << two;
}

// Sizes swept together (m = k = n) name a box once, and the axis says they are one.
TEST(ReportFigures, ParametersSweptAsOneNameABoxOnce) {
  std::vector<PointRow> rows;
  for (const char* b : {"reference", "blas"})
    for (std::int64_t n : {64, 128})
      rows.push_back(with_params(row(b, n, 1, 42, 1e-6 * static_cast<double>(n)), {{"m", n}, {"k", n}}));
  const std::vector<std::string> boxes = figures_named(report(rows), "repetitions-");
  ASSERT_EQ(boxes.size(), 1u);
  const std::string& svg = boxes[0];
  EXPECT_NE(svg.find(">backend, k = m = n</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">blas, 128</text>"), std::string::npos) << svg;
}

// Repetitions of points whose medians span a decade (60 ms beside 1.6 s) are drawn relative to
// each point's median, so that the fast points' spread is not a line on the slow points' axis;
// a backend keeps its colour; the boxes lie on their side, their names whole in a column as wide as
// the longest (they were slanted, the figure widened for the last of them).
TEST(ReportFigures, RepetitionsOfPointsADecadeApartAreDrawnRelativeToTheirMedians) {
  std::vector<PointRow> rows;
  for (const char* b : {"blas", "reference"})
    for (std::int64_t n = 64; n <= 8192; n *= 2)
      rows.push_back(with_params(row(b, n, 1, 42, n < 1024 ? 0.06 : 1.6),
                                 {{"layout", "a_long_layout_name_nr_" + std::to_string(n)}}));
  std::vector<std::string> boxes = figures_named(report(rows), "repetitions-");
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_NE(boxes[0].find("repetitions of each point, relative to its median"), std::string::npos) << boxes[0];
  EXPECT_NE(boxes[0].find("time per repetition / its point's median"), std::string::npos) << boxes[0];
  EXPECT_EQ(boxes[0].find("log scale"), std::string::npos) << "1% noise around 1: no decade to span";
  std::smatch area;
  ASSERT_TRUE(std::regex_search(boxes[0], area, std::regex("<rect class=\"plot-area\" x=\"([0-9.]+)\"")));
  const double longest = std::string("reference, a_long_layout_name_nr_8192").size() * 6.6;
  EXPECT_GT(std::stod(area[1]), longest) << "the names' column holds the longest: " << boxes[0];
  EXPECT_LT(std::stod(area[1]), longest + 30) << "and no more: " << boxes[0];
  EXPECT_EQ(boxes[0].find("\u2026"), std::string::npos) << "every name whole: " << boxes[0];
  EXPECT_EQ(boxes[0].find("rotate("), std::string::npos) << "no name slanted: " << boxes[0];
  // A backend's boxes in its colour (the report's first backend, blas, the palette's first).
  std::regex stroke("<line x1=\"[^\"]*\" y1=\"[^\"]*\" x2=\"[^\"]*\" y2=\"[^\"]*\" stroke=\"(#[0-9a-f]+)\"/><rect");
  std::vector<std::string> colours;
  for (std::sregex_iterator it(boxes[0].begin(), boxes[0].end(), stroke), end; it != end; ++it)
    colours.push_back((*it)[1]);
  ASSERT_EQ(colours.size(), 16u) << boxes[0];
  EXPECT_EQ(std::set<std::string>(colours.begin(), colours.begin() + 8).size(), 1u) << "blas: one colour";
  EXPECT_EQ(std::set<std::string>(colours.begin() + 8, colours.end()).size(), 1u) << "reference: one colour";
  EXPECT_NE(colours[0], colours[8]);

  // Medians within a decade: times in seconds, as they were.
  rows.clear();
  for (std::int64_t n : {64, 128}) rows.push_back(row("blas", n, 1, 42, n == 64 ? 0.06 : 0.12));
  boxes = figures_named(report(rows), "repetitions-");
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_NE(boxes[0].find("time per repetition [s]"), std::string::npos) << boxes[0];
  EXPECT_EQ(boxes[0].find("relative to its median"), std::string::npos) << boxes[0];
}

// Points measured in launches: one figure of each point's typical launch median with its
// across-launch interval and each launch's median beside it, named by what tells the points
// apart besides the launch, in black and grey; the documents show the table and the figure, and the
// terminal alone the sentences that say the same.
TEST(ReportFigures, AcrossLaunchesEachPointIsOneCategoryWithItsIntervalAndItsLaunchesMedians) {
  d500::Report rep = report(launched_rows(3, {"", "add_relu"}, 0.05));
  rep.launches = d500::launch_groups(rep.rows, 0.95);
  ASSERT_EQ(rep.launches.size(), 2u);
  const d500::Document doc = d500::report_document(rep);
  std::vector<std::string> figures;
  for (const auto& s : doc.sections) {
    if (s.title != "Across launches") continue;
    for (const auto& b : s.blocks) {
      if (b.kind == d500::Block::Kind::Figure) figures.push_back(b.svg);
      if (b.kind == d500::Block::Kind::List) {
        EXPECT_TRUE(b.terminal);
        EXPECT_FALSE(b.document) << "the sentences repeat the table the documents show";
      }
    }
  }
  ASSERT_EQ(figures.size(), 1u);
  const std::string& svg = figures[0];
  EXPECT_NE(svg.find(">default</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">add_relu</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">fusion</text>"), std::string::npos) << "the axis names what tells them apart";
  const std::regex series("<g class=\"series\" data-name=\"([a-z ]+)\"[^>]*>([^]*?)</g>"), x("data-x=\"([0-9.]+)\"");
  std::map<std::string, int> markers;
  for (std::sregex_iterator it(svg.begin(), svg.end(), series), end; it != end; ++it) {
    const std::string body = (*it)[2];
    markers[(*it)[1]] = static_cast<int>(std::distance(std::sregex_iterator(body.begin(), body.end(), x), end));
  }
  EXPECT_EQ(markers["across launches"], 2) << "one per point";
  EXPECT_EQ(markers["each launch"], 6) << "one per point and launch";
  // Black and grey: a summary and its launches are no backend (blue would read as onednn's).
  const std::string across = svg.substr(svg.find("data-name=\"across launches\""));
  EXPECT_NE(across.substr(0, across.find("</g>")).find("fill=\"#000000\""), std::string::npos) << across;
  const std::string each = svg.substr(svg.find("data-name=\"each launch\""));
  EXPECT_NE(each.substr(0, each.find("</g>")).find("#999999"), std::string::npos) << each;
  EXPECT_EQ(svg.find("#1f77b4"), std::string::npos) << "no backend's blue";
  for (const auto& g : rep.launches) EXPECT_NE(svg.find(d500::fmt_time(g.interval.estimate)), std::string::npos);
  EXPECT_EQ(svg.find("relative to"), std::string::npos) << "medians within a decade: times in seconds";

  // One fusion 30 times slower: each point relative to its typical launch, its times in the tips.
  std::vector<PointRow> apart = launched_rows(3, {"", "add_relu"}, 0.05);
  for (auto& r : apart)
    if (d500::str_param_or(r.params, "fusion", "") == "add_relu") {
      for (double& c : r.costs) c *= 30;
      r.time = d500::stats::summarize(r.costs);
    }
  d500::Report far = report(apart);
  far.launches = d500::launch_groups(far.rows, 0.95);
  const std::vector<std::string> rel = figures_named(far, "launches-");
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_NE(rel[0].find("across launches, relative to each point's typical launch"), std::string::npos) << rel[0];
  EXPECT_NE(rel[0].find("time / the point's typical launch median (CI)"), std::string::npos) << rel[0];
  EXPECT_EQ(rel[0].find("log scale"), std::string::npos) << "5% drift around 1 spans no decade";
  for (const auto& g : far.launches) EXPECT_NE(rel[0].find(d500::fmt_time(g.interval.estimate)), std::string::npos);
}

// A point measured in several launches is one panel's category, not a panel per launch: its
// launches' markers stand side by side in launch order, never joined; a lone backend's series are
// the values of a panel parameter (here memory_format), named under their parameter in the
// legend, so that its values share one panel.
TEST(ReportFigures, LaunchesStandSideBySideAndALoneBackendsSeriesAreAParametersValues) {
  std::vector<PointRow> rows;
  for (const auto& r : launched_rows(3, {"", "add_relu"}, 0.05)) {
    rows.push_back(with_params(r, {{"memory_format", std::string("")}}));
    rows.push_back(with_params(r, {{"memory_format", std::string("channels_last")}}));
  }
  const std::vector<std::string> rate = figures_named(report(rows), "rate-");
  ASSERT_EQ(rate.size(), 1u) << "neither the launch nor memory_format splits panels";
  const std::string& svg = rate[0];
  EXPECT_NE(svg.find(">memory_format</text>"), std::string::npos) << "the legend's title";
  EXPECT_NE(svg.find(">fusion</text>"), std::string::npos) << "the x axis";
  const std::regex series("<g class=\"series\" data-name=\"([a-z_]+)\" data-line=\"([01])\">([^]*?)</g>"),
      x("data-x=\"(-?[0-9.]+)\"");
  std::map<std::string, std::vector<double>> xs;
  for (std::sregex_iterator it(svg.begin(), svg.end(), series), end; it != end; ++it) {
    EXPECT_EQ((*it)[2], "0") << "launches are replicates: never joined";
    const std::string body = (*it)[3];
    for (std::sregex_iterator m(body.begin(), body.end(), x); m != end; ++m) xs[(*it)[1]].push_back(std::stod((*m)[1]));
  }
  ASSERT_EQ(xs.size(), 2u);
  ASSERT_TRUE(xs.count("default") && xs.count("channels_last"));
  std::set<double> all;
  for (const auto& [name, v] : xs) {
    EXPECT_EQ(v.size(), 6u) << name << ": two fusions in three launches";
    for (double d : v) {
      all.insert(d);
      EXPECT_LT(std::abs(d - std::round(d)), 0.4) << "beside its category, not in the next";
    }
  }
  EXPECT_EQ(all.size(), 12u) << "no two markers on one spot";
}

// The shown text of every <text class="CLS"> of `svg` (less the hover text of one cut to fit).
std::vector<std::string> shown_texts(const std::string& svg, const std::string& cls) {
  const std::regex text("<text class=\"" + cls + "\"[^>]*>(?:<title>[^<]*</title>)?(.*?)</text>");
  const std::regex tag("<[^>]*>");  // a name on two lines: its <tspan>s' texts, joined
  std::vector<std::string> out;
  for (std::sregex_iterator it(svg.begin(), svg.end(), text), end; it != end; ++it)
    out.push_back(std::regex_replace((*it)[1].str(), tag, ""));
  return out;
}

// Parameters swept together (gemm's k = m = n) are one column of the Results table, not three of
// the same numbers; one that differs in a single row keeps its own.
TEST(ReportTables, ParametersSweptTogetherAreOneColumn) {
  auto head_of = [](std::vector<PointRow> rows) {
    for (const auto& s : d500::report_document(report(std::move(rows))).sections)
      if (s.title == "Results: gemm")
        for (const auto& b : s.blocks)
          if (b.kind == d500::Block::Kind::Table) return b.table.table.at(0);
    return std::vector<std::string>{};
  };
  std::vector<PointRow> rows;
  for (std::int64_t n : {64, 128})
    for (const char* backend : {"reference", "blas"})
      rows.push_back(with_params(row(backend, n, 1, 1, 0.01), {{"k", n}, {"m", n}}));
  std::vector<std::string> head = head_of(rows);
  ASSERT_GE(head.size(), 3u);
  EXPECT_EQ(head[1], "k = m = n");
  EXPECT_EQ(std::count(head.begin(), head.end(), "n"), 0);
  // The figure's axis names them as the column does (it was "n = k = m": n is the axis, k and m tied).
  const std::vector<std::string> figs = figures_named(report(rows), "rate-gemm");
  ASSERT_FALSE(figs.empty());
  EXPECT_EQ(shown_texts(figs[0], "xlabel"), (std::vector<std::string>{"k = m = n"}));
  rows[3] = with_params(rows[3], {{"m", std::int64_t{32}}});
  head = head_of(rows);
  ASSERT_GE(head.size(), 3u);
  EXPECT_EQ(head[1], "k = n");
  EXPECT_EQ(head[2], "m");
}

// HTML shades a row whose median has no interval (or too wide a one) and one not complete; the
// report says what the shades mean under the table (report.md and report.html, not the terminal).
TEST(ReportTables, TheShadedRowsAreExplained) {
  auto notes = [](std::vector<PointRow> rows) {
    std::vector<std::string> out;
    for (const auto& s : d500::report_document(report(std::move(rows))).sections)
      if (s.title == "Results: gemm")
        for (const auto& b : s.blocks)
          if (b.kind == d500::Block::Kind::Text && b.text.find("shaded") != std::string::npos) {
            EXPECT_FALSE(b.terminal);
            out.push_back(b.text);
          }
    return out;
  };
  std::vector<PointRow> rows{row("reference", 64, 1, 1, 0.01), row("blas", 64, 1, 1, 0.001),
                             row("blas", 128, 1, 1, 0.001)};
  for (auto& r : rows) {
    std::vector<double> sorted = r.costs;
    std::sort(sorted.begin(), sorted.end());
    r.advice = d500::stats::repetition_advice(sorted, r.time);
  }
  EXPECT_TRUE(notes(rows).empty()) << "12 repetitions 1% apart: every interval is narrow";
  rows[1].costs.resize(3);
  rows[1].time = d500::stats::summarize(rows[1].costs);
  rows.back().outcome = d500::Outcome::BackendFailed;
  const std::vector<std::string> said = notes(rows);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("1 row shaded yellow: no interval"), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("1 row shaded red: not complete"), std::string::npos) << said[0];
}

// Many backend comparisons read as one table per baseline, a row per group and a column per
// backend compared with it, not a sentence per pair; a few stay sentences. The documents add the
// table of every pair's figures beside a few, and beside many only where a ratio of means (which
// the speedups' table lacks) is there to show.
TEST(ReportConsole, ManyComparisonsAreOneTableOfSpeedups) {
  auto comparisons = [](std::vector<std::int64_t> sizes, bool means = false) {
    std::vector<PointRow> rows;
    for (std::int64_t n : sizes)
      for (const char* backend : {"reference", "blas", "onednn"})
        rows.push_back(row(backend, n, 1, 1, std::string(backend) == "reference" ? 0.01 : 0.001));
    d500::Report rep = report(rows);
    rep.comparisons = d500::compare_backends(rep.rows, 0.95, 7);
    for (auto& c : rep.comparisons) c.has_mean_ratio = false;
    if (means) rep.comparisons[0].has_mean_ratio = true, rep.comparisons[0].mean_ratio = rep.comparisons[0].speedup;
    const d500::Document doc = d500::report_document(rep);
    const std::string console = d500::render_console(doc, 120);
    const std::string html = d500::find_reporter("html").render_report(rep, doc);
    EXPECT_EQ(html.find("<td class=\"faster\">10.0 [") != std::string::npos, sizes.size() > 1)
        << "a significant speedup shaded in the speedups' table (where there is one)";
    for (const auto& s : doc.sections)
      if (s.title == "Backend comparisons") {
        const auto tables = std::count_if(s.blocks.begin(), s.blocks.end(), [](const d500::Block& b) {
          return b.kind == d500::Block::Kind::Table && b.document;
        });
        EXPECT_EQ(tables, sizes.size() > 1 && means ? 2 : 1)
            << "the speedups' table where there are many, the pairs' where there are few or a ratio of means";
      }
    return console.substr(console.find("Backend comparisons"));
  };
  const std::string many = comparisons({64, 128, 256});
  EXPECT_NE(many.find("Speedup over reference"), std::string::npos) << many;
  EXPECT_NE(many.find("blas"), std::string::npos);
  EXPECT_EQ(many.find("faster than"), std::string::npos) << "no sentences beside the table:\n" << many;
  const std::regex line("\nn=128 +10\\.0 \\[[0-9.]+, [0-9.]+\\] +10\\.0 \\[");
  EXPECT_TRUE(std::regex_search(many, line)) << many;
  EXPECT_NE(many.find("\ngemm points "), std::string::npos) << "one workload: said once, in the header\n" << many;
  comparisons({64, 128, 256}, true);
  // A configuration whose varying parameters are all unset (math left at its default) reads
  // "defaults" under the header that names the workload.
  std::vector<PointRow> maths;
  for (const char* math : {"", "tf32", "bf16", "fp16", "fp32"})
    for (const char* backend : {"reference", "blas"})
      maths.push_back(with_params(row(backend, 64, 1, 1, std::string(backend) == "reference" ? 0.01 : 0.001),
                                  {{"math", std::string(math)}}));
  d500::Report by_math = report(maths);
  by_math.comparisons = d500::compare_backends(by_math.rows, 0.95, 7);
  const std::string console = d500::render_console(d500::report_document(by_math), 120);
  EXPECT_NE(console.find("\ngemm points "), std::string::npos) << console;
  EXPECT_NE(console.find("\ndefaults "), std::string::npos) << console;
  EXPECT_NE(console.find("\nmath=tf32 "), std::string::npos) << console;
  const std::string few = comparisons({64});
  EXPECT_NE(few.find("blas is 10.0x faster than reference"), std::string::npos) << few;
  EXPECT_EQ(few.find("Speedup over"), std::string::npos);
}

// An overlapped step that gained more than the plain scheme's whole communication did not gain it
// by overlap: the Overlap section says so where the hidden share's interval lies above 100%, and
// names each such point by its rank count, never by its scheme (every one is allreduce-overlap).
TEST(ReportOverlap, AGainBeyondTheWholeCommunicationIsSaidNotToBeOverlaps) {
  PointRow r = row("reference", 64, 2, 1, 0.03);
  r.workload = "distributed";
  r.facts["dist.scheme"] = std::string("allreduce-overlap");
  auto overlap_words = [&](double lo, double hi) {
    d500::Report rep = report({r});
    d500::OverlapComparison c;
    c.group = "distributed:reference, 2 ranks";
    c.workers = 2;
    c.plain_step = 0.044, c.overlap_step = 0.030, c.plain_exposed = 0.0004;
    c.hidden = (lo + hi) / 2, c.hidden_lo = lo, c.hidden_hi = hi;
    rep.overlap.push_back(c);
    std::string out;
    for (const auto& s : d500::report_document(rep).sections)
      if (s.title == "Overlap")
        for (const auto& b : s.blocks) {
          if (b.kind == d500::Block::Kind::Text) out += b.text + "\n";
          if (b.kind == d500::Block::Kind::Table) out += b.table.table.at(1).at(0) + "\n";
        }
    return out;
  };
  const std::string beyond = overlap_words(19.0, 45.0);
  EXPECT_NE(beyond.find("Hidden beyond 100% (distributed:reference, 2 ranks)"), std::string::npos) << beyond;
  EXPECT_NE(beyond.find("\nreference, 2 ranks\n"), std::string::npos) << "the row, less its workload: " << beyond;
  const std::string within = overlap_words(0.4, 1.2);
  EXPECT_EQ(within.find("Hidden beyond"), std::string::npos) << "its interval reaches below 100%: " << within;
}

// On one backend, the series are the values of the parameter with the most values the palette
// tells apart (the distributed campaign's six schemes), a panel per value of the rest (ps_servers);
// a value keeps its colour in every panel, and a few whole numbers on x (the rank counts) are the
// axis's ticks. Sizes in bytes tick in powers of 1024.
TEST(ReportFigures, ALoneBackendsPanelsCompareItsManySettingsAtTheRankCountsMeasured) {
  std::vector<PointRow> rows;
  const std::vector<std::string> schemes{"allreduce", "ps-sync", "model-averaging", "dpsgd", "ps-async"};
  for (std::int64_t servers : {0, 1})
    for (const auto& scheme : schemes)
      for (std::int64_t rpn : {1, 2, 4}) {
        if ((servers == 1 && scheme.rfind("ps-", 0) != 0) || (servers == 0 && scheme == "ps-async") || rpn <= servers)
          continue;  // ps-sync runs with and without a server, as in campaigns/distributed.toml
        PointRow r =
            with_params(row("reference", 64, rpn, 1, 0.03 / static_cast<double>(rpn)),
                        {{"scheme", scheme}, {"ps_servers", servers}, {"workload", std::string("distributed")}});
        r.workload = "distributed";
        rows.push_back(r);
      }
  const std::vector<std::string> rate = figures_named(report(rows), "rate-");
  ASSERT_EQ(rate.size(), 2u) << "a panel per ps_servers";
  std::vector<std::string> colour;
  for (const auto& svg : rate) {
    EXPECT_NE(svg.find(">scheme</text>"), std::string::npos) << "the legend's title: " << svg;
    std::vector<std::string> x_ticks;
    const std::regex tick("<text class=\"tick\" x=\"[0-9.]+\" y=\"[0-9.]+\" text-anchor=\"middle\">([^<]+)</text>");
    for (std::sregex_iterator it(svg.begin(), svg.end(), tick), end; it != end; ++it) x_ticks.push_back((*it)[1]);
    EXPECT_EQ(x_ticks, (std::vector<std::string>{"1", "2", "4"})) << "no 1.5 ranks";
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(svg, m, std::regex("data-name=\"ps-sync\"[^\n]*\n<polyline[^>]*stroke=\"(#[0-9a-f]+)\"")));
    colour.push_back(m[1]);
  }
  EXPECT_EQ(colour[0], colour[1]) << "ps-sync has one colour in both panels";
  // Bytes: 1Ki, 64Ki, 1Mi.
  std::vector<PointRow> sizes;
  for (std::int64_t bytes : {1024, 65536, 1048576}) {
    PointRow r = with_params(row("mpi", 64, 2, 1, 1e-6 * static_cast<double>(bytes) / 1024),
                             {{"bytes", bytes}, {"workload", std::string("allreduce")}});
    r.params.erase("n");
    r.workload = "allreduce";
    sizes.push_back(r);
  }
  const std::vector<std::string> b = figures_named(report(sizes), "rate-");
  ASSERT_EQ(b.size(), 1u);
  for (const char* t : {">1Ki<", ">64Ki<", ">1Mi<"}) EXPECT_NE(b[0].find(t), std::string::npos) << t << b[0];
}

// The targets a training campaign reports (report_targets) are read off the same curves: one
// figure per configuration holds every target's line and median mark, not a figure per target
// of the same runs; a seed that missed the highest target is dashed.
TEST(ReportFigures, EveryTargetOfOneConfigurationIsOneFigureOfItsCurves) {
  std::vector<PointRow> rows;
  for (std::int64_t seed : {1, 2, 3}) {
    PointRow r = with_params(row("blas", 64, 1, seed, 0.01), {{"workload", std::string("train")}});
    r.workload = "train";
    for (int k = 1; k <= 10; ++k)
      r.curve.push_back({static_cast<double>(k), (seed == 3 ? 0.7 : 0.8) * (1 - std::exp(-0.5 * k))});
    rows.push_back(r);
  }
  d500::Report rep = report(rows);
  for (double target : {0.6, 0.75}) {
    d500::TtaConfig c;
    c.group = "train:blas";
    for (const auto& r : rows) c.ids.push_back(r.id), c.seeds.push_back(d500::int_param_or(r.params, "seed", 0));
    std::vector<double> times;
    for (const auto& r : rows) {
      double t = std::numeric_limits<double>::infinity();
      for (auto [s, a] : r.curve)
        if (a >= target && !std::isfinite(t)) t = s;
      times.push_back(t);
    }
    c.summary = d500::summarize_tta(times, target, 20.0, 0.95);
    rep.tta.push_back(c);
  }
  const std::vector<std::string> figs = figures_named(rep, "tta-");
  ASSERT_EQ(figs.size(), 1u) << "one figure for both targets";
  const std::vector<std::string> legend = shown_texts(figs[0], "legend");
  for (const char* name : {"target 0.600", "target 0.750", "seed 3 (missed)", "seed 1", "budget"})
    EXPECT_NE(std::find(legend.begin(), legend.end(), name), legend.end()) << name;
  std::size_t marks = 0;
  for (std::size_t at = figs[0].find("<g class=\"mark\">"); at != std::string::npos;
       at = figs[0].find("<g class=\"mark\">", at + 1))
    ++marks;
  EXPECT_EQ(marks, 2u) << "a median mark on each target's line";
  EXPECT_TRUE(figures_named(rep, "tta-compare").empty()) << "one configuration: nothing to compare";
  // A second configuration (another backend, the same seeds and targets): a figure per target
  // sets the two side by side, each a category named by its backend.
  std::vector<d500::TtaConfig> more = rep.tta;
  for (auto& c : more) {
    c.group = "train:reference";
    for (auto& id : c.ids) {
      PointRow r = *std::find_if(rep.rows.begin(), rep.rows.end(), [&](const PointRow& x) { return x.id == id; });
      r = with_params(r, {{"backend", std::string("reference")}});
      r.backend = "reference";
      id = r.id;
      rep.rows.push_back(r);
    }
  }
  rep.tta.insert(rep.tta.end(), more.begin(), more.end());
  rep.names = d500::point_names(rep.rows);
  auto tta_table = [](const d500::Report& r) {
    for (const auto& s : d500::report_document(r).sections)
      if (s.title == "Time to accuracy")
        for (const auto& b : s.blocks)
          if (b.kind == d500::Block::Kind::Table) return b.table.table;
    return d500::Table{};
  };
  d500::Table t = tta_table(rep);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0][0], "train configuration") << "one workload: said once, in the header";
  EXPECT_EQ(t[1][0], "blas");
  // The budget and the evaluation interval every configuration shares: said once, not columns;
  // the targets differ: a column.
  EXPECT_EQ(t[0], (std::vector<std::string>{"train configuration", "target", "runs reaching it (95% CI)",
                                            "median time to accuracy", "95% CI"}));
  EXPECT_NE(d500::render_console(d500::report_document(rep), 120)
                .find("Shared by every configuration: budget 20.00 s, eval every 0 steps."),
            std::string::npos);
  const std::vector<std::string> compare = figures_named(rep, "tta-compare");
  ASSERT_EQ(compare.size(), 2u) << "a figure per target";
  EXPECT_NE(compare[1].find("time to accuracy 0.750"), std::string::npos);
  EXPECT_EQ(shown_texts(compare[1], "tick"), (std::vector<std::string>{"blas", "reference"}))
      << "a category per configuration, named by its backend";
  // A configuration of another workload at the same target neither joins nor hides the figure.
  PointRow other = with_params(rep.rows.front(), {{"workload", std::string("distributed")}});
  other.workload = "distributed";
  rep.rows.push_back(other);
  d500::TtaConfig lone = rep.tta.front();
  lone.group = "distributed:blas";
  lone.ids = {other.id};
  rep.tta.push_back(lone);
  rep.names = d500::point_names(rep.rows);
  const std::vector<std::string> mixed = figures_named(rep, "tta-compare");
  ASSERT_EQ(mixed.size(), 2u);
  t = tta_table(rep);
  EXPECT_EQ(t[0][0], "configuration");
  EXPECT_EQ(t.back()[0], "distributed:blas") << "two workloads: each row names its own";
  EXPECT_NE(mixed[0].find("train: time to accuracy 0.600"), std::string::npos) << mixed[0];
}

// Configurations that ran once each (a scheme per rank count, one seed) share a figure per panel:
// a line per scheme, a panel per rank count, instead of a figure of one line each; a budget far
// beyond the curves is said in the title rather than drawn (it would squeeze them to the left).
TEST(ReportFigures, ConfigurationsThatRanOnceShareTheirCurvesFigure) {
  std::vector<PointRow> rows;
  d500::Report rep;
  for (std::int64_t rpn : {1, 2})
    for (const char* scheme : {"allreduce", "ps-sync", "dpsgd"}) {
      PointRow r = with_params(row("reference", 64, rpn, 1, 0.01),
                               {{"workload", std::string("distributed")}, {"scheme", std::string(scheme)}});
      r.workload = "distributed";
      for (int k = 1; k <= 10; ++k) r.curve.push_back({static_cast<double>(k), 0.9 * (1 - std::exp(-0.4 * k))});
      rows.push_back(r);
    }
  rep = report(rows);
  for (const auto& r : rep.rows) {
    d500::TtaConfig c;
    c.group = rep.names.label(r, {"seed"});
    c.ids = {r.id};
    c.seeds = {1};
    double t = std::numeric_limits<double>::infinity();
    for (auto [s, a] : r.curve)
      if (a >= 0.6 && !std::isfinite(t)) t = s;
    c.summary = d500::summarize_tta({t}, 0.6, 100.0, 0.95);
    rep.tta.push_back(c);
  }
  const std::vector<std::string> together = figures_named(rep, "tta-curves-");
  ASSERT_EQ(together.size(), 2u) << "a panel per ranks_per_node";
  for (const auto& svg : together) {
    EXPECT_NE(svg.find(">scheme</text>"), std::string::npos) << "the legend's title: " << svg;
    const std::vector<std::string> legend = shown_texts(svg, "legend");
    for (const char* name : {"allreduce", "ps-sync", "dpsgd", "target"})
      EXPECT_NE(std::find(legend.begin(), legend.end(), name), legend.end()) << name;
    EXPECT_EQ(std::find(legend.begin(), legend.end(), "budget"), legend.end()) << "100 s beyond curves of 10 s";
    EXPECT_NE(svg.find("budget 100.0 s, off the axis"), std::string::npos);
  }
  std::size_t own = 0;
  for (const auto& svg : figures_named(rep, "tta-"))
    own += svg.find("one line per seed") != std::string::npos || svg.find(">seed 1<") != std::string::npos;
  EXPECT_EQ(own, 0u) << "no figure of one configuration's one run besides them";
}

// Configurations that differ in their rank count (the distributed campaign's schemes at 1, 2 and 4
// ranks, with and without a parameter server) compare their times to accuracy as lines against
// the ranks, a line per scheme and a panel per ps_servers, instead of 18 slanted categories; a
// configuration that missed the target is not drawn but named in the caption.
TEST(ReportFigures, TimesToAccuracyAcrossRankCountsAreLinesAgainstTheRanks) {
  std::vector<PointRow> rows;
  for (std::int64_t servers : {0, 1})
    for (std::int64_t rpn : {1, 2, 4})
      for (const char* scheme : {"allreduce", "ps-sync", "dpsgd"}) {
        PointRow r = with_params(
            row("reference", 64, rpn, 1, 0.01),
            {{"workload", std::string("distributed")}, {"scheme", std::string(scheme)}, {"ps_servers", servers}});
        r.workload = "distributed";
        rows.push_back(r);
      }
  d500::Report rep = report(rows);
  for (const auto& r : rep.rows) {
    d500::TtaConfig c;
    c.group = rep.names.label(r, {"seed"});
    c.ids = {r.id};
    c.seeds = {1};
    const bool missed = r.params.at("ps_servers") == d500::Value(std::int64_t{1}) && r.ranks == 4 &&
                        r.params.at("scheme") == d500::Value(std::string("ps-sync"));
    c.summary =
        d500::summarize_tta({missed ? std::numeric_limits<double>::infinity() : 12.0 / r.ranks}, 0.8, 60.0, 0.95);
    rep.tta.push_back(c);
  }
  std::vector<const d500::Block*> figs;
  const d500::Document d = d500::report_document(rep);
  for (const auto& s : d.sections)
    for (const auto& b : s.blocks)
      if (b.kind == d500::Block::Kind::Figure && b.name.rfind("tta-compare", 0) == 0) figs.push_back(&b);
  ASSERT_EQ(figs.size(), 2u) << "a panel per ps_servers";
  for (const auto* f : figs) {
    EXPECT_NE(f->svg.find(">scheme</text>"), std::string::npos) << "the legend's title";
    const std::vector<std::string> legend = shown_texts(f->svg, "legend");
    EXPECT_EQ(legend, (std::vector<std::string>{"scheme", "allreduce", "ps-sync", "dpsgd"}));
    const std::vector<std::string> ticks = shown_texts(f->svg, "tick");
    for (const char* at : {"1", "2", "4"})
      EXPECT_NE(std::find(ticks.begin(), ticks.end(), at), ticks.end()) << "x ticks at the rank counts: " << at;
    EXPECT_NE(f->svg.find("<polyline"), std::string::npos) << "a line joins a scheme's rank counts";
  }
  EXPECT_NE(figs[0]->svg.find("time to accuracy 0.800, ps_servers=0"), std::string::npos) << figs[0]->svg;
  EXPECT_EQ(figs[0]->text.find("Not reached"), std::string::npos) << figs[0]->text;
  EXPECT_NE(figs[1]->text.find("Not reached within the budget, so not drawn: ps_servers=1 ranks_per_node=4 "
                               "scheme=ps-sync"),
            std::string::npos)
      << figs[1]->text;
}

// Curve figures are capped as rate panels are: a campaign of many configurations, each with its
// seeds, draws twelve and says how many more there are and where their curves are.
TEST(ReportFigures, ManyConfigurationsCurvesAreCappedAndTheRestSaid) {
  std::vector<PointRow> rows;
  for (std::int64_t n = 1; n <= 14; ++n)
    for (std::int64_t seed : {1, 2}) {
      PointRow r = with_params(row("blas", n, 1, seed, 0.01), {{"workload", std::string("train")}});
      r.workload = "train";
      for (int k = 1; k <= 5; ++k) r.curve.push_back({static_cast<double>(k), 0.2 * k});
      rows.push_back(r);
    }
  d500::Report rep = report(rows);
  for (std::size_t i = 0; i < rows.size(); i += 2) {
    d500::TtaConfig c;
    c.group = "train:blas n=" + std::to_string(i / 2 + 1);
    c.ids = {rows[i].id, rows[i + 1].id};
    c.seeds = {1, 2};
    c.summary = d500::summarize_tta({3.0, 3.0}, 0.6, 5.0, 0.95);
    rep.tta.push_back(c);
  }
  std::size_t curves = 0;
  bool said = false;
  for (const auto& s : d500::report_document(rep).sections)
    for (const auto& b : s.blocks) {
      curves += b.kind == d500::Block::Kind::Figure && b.name.rfind("tta-train-blas", 0) == 0;
      said = said || b.text.find("2 more configurations' curves are not drawn") != std::string::npos;
    }
  EXPECT_EQ(curves, 12u);
  EXPECT_TRUE(said);
}

// The panels of one workload's rate figure share their axes: one panel whose rates span a decade
// and one whose rates do not are both drawn on the same log axis, with the same ticks, so that a
// point's height means the same in each.
TEST(ReportFigures, PanelsOfOneFigureShareTheirAxes) {
  std::vector<PointRow> rows;
  for (std::int64_t n : {64, 128, 256}) {
    const double flop = 2.0 * static_cast<double>(n * n * n);
    rows.push_back(row("reference", n, 1, 1, flop / 10e9));  // one rank: 10 and 50 GFLOP/s
    rows.push_back(row("blas", n, 1, 1, flop / 50e9));
    rows.push_back(row("reference", n, 2, 1, flop / 1e9));  // two: 1 and 5, a decade below
    rows.push_back(row("blas", n, 2, 1, flop / 5e9));
  }
  const std::vector<std::string> rate = figures_named(report(rows), "rate-");
  ASSERT_EQ(rate.size(), 2u) << "a panel per ranks_per_node";
  for (const auto& svg : rate) EXPECT_NE(svg.find("log scale"), std::string::npos);
  EXPECT_EQ(shown_texts(rate[0], "tick ytick"), shown_texts(rate[1], "tick ytick"));
  EXPECT_FALSE(shown_texts(rate[0], "tick ytick").empty());
  // One panel alone keeps its own axis: the one-rank points span less than a decade.
  rows.erase(std::remove_if(rows.begin(), rows.end(), [](const PointRow& r) { return r.ranks == 2; }), rows.end());
  const std::vector<std::string> alone = figures_named(report(rows), "rate-");
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].find("log scale"), std::string::npos);
}

// Settings of one backend's own (cuda's cudnn_api and fusion; libtorch-cuda has neither) neither
// split a workload's figures into panels nor take their x axis: cuda and libtorch-cuda share a
// figure, a cuda series for each fusion, named as the comparisons name it; cudnn_api, the same on
// every cuda point, names nothing. No two legend entries or boxes read alike, however cut.
TEST(ReportFigures, ABackendsOwnSettingsNameItsSeriesAndSplitNoPanel) {
  std::vector<PointRow> rows;
  for (const char* math : {"fp32", "tf32", "bf16"}) {
    const d500::Params work{{"math", std::string(math)}, {"memory_format", std::string("channels_last")}};
    rows.push_back(with_params(row("libtorch-cuda", 256, 1, 1, 0.012), work));
    for (const char* fusion : {"add_relu", "add_relu+bn_relu"}) {
      PointRow r = with_params(row("cuda", 256, 1, 1, 0.010), work);
      rows.push_back(with_params(r, {{"cudnn_api", std::string("graph")}, {"fusion", std::string(fusion)}}));
    }
  }
  const d500::Report rep = report(rows);
  const std::vector<std::string> rate = figures_named(rep, "rate-");
  ASSERT_EQ(rate.size(), 1u) << "one figure: no panel per cudnn_api or fusion";
  const std::string& svg = rate[0];
  EXPECT_NE(svg.find(">math</text>"), std::string::npos) << "the x axis is the work's parameter";
  std::set<std::string> series;
  const std::regex name("<g class=\"series\" data-name=\"([^\"]+)\"");
  for (std::sregex_iterator it(svg.begin(), svg.end(), name), end; it != end; ++it) series.insert((*it)[1]);
  EXPECT_EQ(series,
            (std::set<std::string>{"libtorch-cuda", "cuda (fusion=add_relu)", "cuda (fusion=add_relu+bn_relu)"}));
  const std::vector<std::string> legend = shown_texts(svg, "legend");
  EXPECT_EQ(std::set<std::string>(legend.begin(), legend.end()).size(), 3u) << "two legend entries read alike";
  const std::vector<std::string> boxes = figures_named(rep, "repetitions-");
  ASSERT_EQ(boxes.size(), 1u);
  std::set<std::string> names;
  for (const auto& t : shown_texts(boxes[0], "tick")) {
    if (t.empty() || std::isdigit(static_cast<unsigned char>(t[0])) != 0) continue;  // the y axis' numbers
    EXPECT_EQ(t.find("graph"), std::string::npos) << t;
    names.insert(t);
  }
  EXPECT_EQ(names.size(), rows.size()) << "two boxes read alike";
  EXPECT_NE(boxes[0].find(">backend, math</text>"), std::string::npos) << "the boxes' axis";
  // The Results table: fusion, which tells cuda's points apart, is a column; cudnn_api, graph on
  // every cuda point and unset on libtorch-cuda's, is said once.
  for (const auto& sec : d500::report_document(rep).sections) {
    if (sec.title != "Results: gemm") continue;
    std::string said;
    for (const auto& b : sec.blocks) {
      if (b.kind == d500::Block::Kind::Text) said += b.text + "\n";
      if (b.kind != d500::Block::Kind::Table) continue;
      const auto& head = b.table.table.at(0);
      EXPECT_NE(std::find(head.begin(), head.end(), "fusion"), head.end());
      EXPECT_EQ(std::find(head.begin(), head.end(), "cudnn_api"), head.end());
    }
    EXPECT_NE(said.find("A backend's own settings, the same on all its points: cuda: cudnn_api=graph."),
              std::string::npos)
        << said;
  }
}

// Names too long for their room are cut so that the cut ones still read apart: a legend's entries
// that differ only in their middles (or, where two lines hold one, shown whole on them), and boxes
// whose names differ in one of their parts.
TEST(ReportFigures, NamesCutToFitStillReadApart) {
  d500::svg::Plot plot;
  plot.title = "t";
  plot.xcats = {"a"};
  for (const char* name : {"cuda (fusion=add_relu)", "cuda (fusion=add_relu+bn_relu)",
                           "cuda (fusion=add_relu+bn_relu, cudnn_api=legacy)"}) {
    d500::svg::Series s;
    s.name = name;
    s.x = {0};
    s.y = {1};
    plot.series.push_back(s);
  }
  const std::vector<std::string> legend = shown_texts(d500::svg::render(plot), "legend");
  ASSERT_EQ(legend.size(), 3u);
  EXPECT_EQ(std::set<std::string>(legend.begin(), legend.end()).size(), 3u)
      << legend[0] << " | " << legend[1] << " | " << legend[2];
  // One that breaks into two lines that fit is shown whole on them, not cut in the middle
  // ("cuda (fus…+bn_relu)"): "cuda (fusion=" above "add_relu+bn_relu)".
  EXPECT_EQ(legend[1], "cuda (fusion=add_relu+bn_relu)");
  EXPECT_NE(d500::svg::render(plot).find("<tspan>cuda (fusion=</tspan>"), std::string::npos);
  d500::svg::BoxPlot boxes;
  boxes.title = "t";
  for (const char* fusion : {"add_relu", "add_relu+bn_relu"})
    for (const char* math : {"fp32", "tf32", "bf16"})
      for (const char* format : {"nchw", "channels_last"}) {
        const std::string name = std::string("cuda (fusion=") + fusion + "), " + math + ", " + format;
        boxes.boxes.push_back({name, name, {1.0, 2.0, 3.0}, 2.0, 1.0, 3.0, true});
      }
  std::set<std::string> shown;
  for (const auto& t : shown_texts(d500::svg::render(boxes), "tick"))
    if (!t.empty() && std::isdigit(static_cast<unsigned char>(t[0])) == 0) shown.insert(t);
  EXPECT_EQ(shown.size(), boxes.boxes.size()) << "two boxes read alike";
}

// A section's table of one workload's points names them as its results table does (the backend and
// each parameter that varies among them), not by labels the terminal cuts; each row's hover text is
// its point's canonical form. Points of several workloads keep their labels.
TEST(ReportTables, OneWorkloadsPointsAreNamedByTheResultsTablesColumns) {
  std::vector<PointRow> rows;
  for (const char* backend : {"onednn", "libtorch-native"})
    for (const char* math : {"", "bf16"}) {
      PointRow r = with_params(row(backend, 64, 1, 1, 0.01), {{"workload", std::string("network")},
                                                              {"math", std::string(math)},
                                                              {"network", std::string("resnet20-cifar")}});
      r.workload = "network";
      r.level = 1;
      r.rate_unit = "samples/s";
      rows.push_back(r);
    }
  // The first table of the report's section `title`.
  auto table_in = [](const d500::Report& rep, const std::string& title) {
    for (const auto& s : d500::report_document(rep).sections)
      if (s.title == title)
        for (const auto& b : s.blocks)
          if (b.kind == d500::Block::Kind::Table) return b.table;
    return d500::TableBlock{};
  };
  auto networks = [&](const d500::Report& rep) { return table_in(rep, "Networks"); };
  const d500::TableBlock t = networks(report(rows));
  ASSERT_EQ(t.table.size(), 5u);
  EXPECT_EQ(t.table[0][0], "backend");
  EXPECT_EQ(t.table[0][1], "math");
  EXPECT_EQ(t.table[0][2], "samples/s");
  EXPECT_EQ(t.table[1][0], "onednn");
  EXPECT_EQ(t.table[1][1], "default") << "an unset math reads as in Results";
  EXPECT_EQ(t.table[4][0], "libtorch-native");
  EXPECT_EQ(t.table[4][1], "bf16");
  EXPECT_EQ(t.table[1][2].find("samples/s"), std::string::npos) << "the unit is the header's: " << t.table[1][2];
  EXPECT_EQ(t.wide_only, (std::set<std::size_t>{3})) << "the rate's interval, after the naming columns";
  ASSERT_EQ(t.row_title.size(), 4u);
  EXPECT_EQ(t.row_title[3], rows[3].canonical + " (" + rows[3].id + ")");
  // The Results table's rank count, one for every point, is said by the shared nodes and
  // ranks_per_node: no output has a column of it (report.html's cpu-frameworks table scrolled
  // for a column of 1s); on one node with ranks_per_node a column, it would repeat that column and
  // is none.
  auto results = [&](const d500::Report& rep) { return table_in(rep, "Results: network"); };
  auto ranks_column = [](const d500::TableBlock& r) {
    const auto& head = r.table.at(0);
    return static_cast<std::size_t>(std::find(head.begin(), head.end(), "ranks") - head.begin());
  };
  const d500::TableBlock one = results(report(rows));
  EXPECT_EQ(ranks_column(one), one.table[0].size()) << "one rank count, which the Shared line says";
  std::vector<PointRow> two = rows;
  two[1] = with_params(row("onednn", 64, 2, 1, 0.01), {{"workload", std::string("network")},
                                                       {"math", std::string("bf16")},
                                                       {"network", std::string("resnet20-cifar")}});
  two[1].workload = "network";
  two[1].level = 1;
  const d500::TableBlock one_node = results(report(two));
  EXPECT_EQ(ranks_column(one_node), one_node.table[0].size())
      << "on one node, the ranks_per_node column says the ranks: none of its own, in no output";
  two[1] = with_params(two[1], {{"nodes", std::int64_t{2}}});
  two[1].nodes = 2;
  two[1].ranks = 4;
  const d500::TableBlock varied = results(report(two));
  ASSERT_LT(ranks_column(varied), varied.table[0].size()) << "rank counts over nodes have their column";
  EXPECT_FALSE(varied.wide_only.count(ranks_column(varied))) << "rank counts over nodes are shown";
  // A second workload's point among them: the labels stay.
  PointRow other = rows[0];
  other.workload = "layer";
  other.params["workload"] = std::string("layer");
  other.canonical = d500::canonical_point(other.params);
  other.id = other.canonical;
  rows.push_back(other);
  const d500::TableBlock mixed = networks(report(rows));
  ASSERT_EQ(mixed.table.size(), 6u);
  EXPECT_EQ(mixed.table[0][0], "point");
  EXPECT_EQ(mixed.row_title.size(), 5u);
}

// A failed validation's reason is its whole judgement (a paragraph of 15 lines in 120 columns): the
// terminal's item says the verdict and the decisive tensor and where the rest is; report.md's item
// has it whole (and --wide, width 0).
TEST(ReportAttention, TheTerminalSaysAFailedValidationsVerdictAndReportMdItsJudgement) {
  std::vector<PointRow> rows = {row("onednn", 64, 1, 1, 0.01), row("blas", 64, 1, 1, 0.01)};
  rows[0].outcome = d500::Outcome::FailedValidation;
  rows[0].status = "failed-validation";
  const std::string judgement =
      "relative error 0.568 exceeds tolerance 0.444 (relative L2 error of the loss and the gradient of each of the "
      "65 weights; ... Monte Carlo arithmetic ...; a step with one tensor 2% off would fail in 6 of 66 tensors)";
  rows[0].status_reason = judgement;
  rows[0].facts["validation.decisive"] = std::string("the gradient of 'bn_bias_0'");
  const d500::Report rep = report(rows);
  const std::vector<std::string> whole = d500::attention(rep), brief = d500::attention_brief(rep);
  ASSERT_EQ(whole.size(), 1u);
  ASSERT_EQ(brief.size(), 1u);
  EXPECT_NE(whole[0].find(judgement), std::string::npos) << whole[0];
  EXPECT_EQ(brief[0], "gemm:onednn (" + rows[0].id +
                          "): failed-validation: relative error 0.568 exceeds tolerance 0.444; decisive: the gradient "
                          "of 'bn_bias_0' (report.md has the whole judgement)");
  const d500::Document d = d500::report_document(rep);
  const std::string terminal = d500::render_console(d, 120), wide = d500::render_console(d, 0);
  EXPECT_EQ(terminal.find("Monte Carlo"), std::string::npos) << terminal;
  EXPECT_NE(terminal.find("report.md has the whole judgement"), std::string::npos) << terminal;
  EXPECT_NE(wide.find("Monte Carlo"), std::string::npos) << "--wide prints it whole";
}

// Points flagged for one reason (the distributed campaign's 11 oversubscribed points) are one
// item that says the reason once: report.md's names each point with its id, the terminal's
// without the ids; a lone point keeps an item of its own.
TEST(ReportAttention, PointsFlaggedForOneReasonAreOneItem) {
  std::vector<PointRow> rows;
  for (std::int64_t rpn : {1, 4, 8}) rows.push_back(row("blas", 64, rpn, 1, 0.01));
  rows[1].oversubscribed = rows[2].oversubscribed = true;
  const d500::Report rep = report(rows);
  const std::vector<std::string> whole = d500::attention(rep), brief = d500::attention_brief(rep);
  ASSERT_EQ(whole.size(), 1u);
  ASSERT_EQ(brief.size(), 1u);
  EXPECT_EQ(whole[0],
            "2 points ran with more ranks than CPUs on a host (oversubscribed): their times measure core "
            "sharing, not the operation: gemm ranks_per_node=4 (" +
                rows[1].id + "); gemm ranks_per_node=8 (" + rows[2].id + ")");
  EXPECT_EQ(brief[0].find(rows[1].id), std::string::npos) << brief[0];
  EXPECT_NE(brief[0].find("gemm ranks_per_node=4; gemm ranks_per_node=8 (report.md has their ids)"), std::string::npos)
      << brief[0];
  rows[2].oversubscribed = false;
  const std::vector<std::string> one = d500::attention(report(rows));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], "gemm ranks_per_node=4 (" + rows[1].id +
                        "): ran with more ranks than CPUs on a host (oversubscribed): its times measure core sharing, "
                        "not the operation");
}

// A point that failed alike in each of its launches is one item of "Points needing attention",
// naming its launches and ids; one that failed otherwise in one launch is an item of its own; a
// backend all of whose points failed alike is one item.
TEST(ReportAttention, APointThatFailedAlikeInEveryLaunchIsSaidOnce) {
  std::vector<PointRow> rows;
  for (std::int64_t launch : {1, 2, 3})
    for (const char* backend : {"onednn", "blas"}) {
      PointRow r = with_params(row(backend, 64, 1, 1, 0.01), {{"launch", launch}});
      if (std::string(backend) == "onednn") {
        r.outcome = d500::Outcome::BackendFailed;
        r.status = "backend-failed";
        r.status_reason = launch == 3 ? "out of memory" : "no AVX-512";
      }
      rows.push_back(r);
    }
  const std::vector<std::string> items = d500::attention(report(rows));
  ASSERT_EQ(items.size(), 2u) << items.at(0);
  EXPECT_EQ(items[0],
            "gemm:onednn (launches 1, 2: " + rows[0].id + ", " + rows[2].id + "): backend-failed: no AVX-512");
  EXPECT_EQ(items[1], "gemm:onednn (launch 3, " + rows[4].id + "): backend-failed: out of memory");
  // Every point of a backend failed alike (no GPU on this host): one item for all of them.
  for (auto& r : rows)
    if (r.backend == "blas") {
      r.outcome = d500::Outcome::BackendFailed;
      r.status = "backend-failed";
      r.status_reason = "no device";
    }
  const std::vector<std::string> all = d500::attention(report(rows));
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1], "every gemm:blas point (3; results.csv has their ids): backend-failed: no device")
      << "where its first point would have been";
}

// In the terminal, a table too wide for 120 columns is cut, but never so that two rows' names read
// alike: points that differ only in their last parameters keep 8 columns past what they share,
// the other columns giving way (here the names were cut to "network:libtorch-native launch=1
// math=bf1…", and two rows looked the same but for that ellipsis).
TEST(ReportConsole, TwoRowsNamesNeverReadAlikeWhenATableIsCut) {
  d500::Document d;
  d500::Section sec{"Networks", 2, true, {}};
  d500::Block b;
  b.kind = d500::Block::Kind::Table;
  b.table.table = {{"point", "samples/s", "GFLOP/s", "forward", "backward", "planned memory", "peak RSS", "where"}};
  const std::string base = "network:libtorch-native launch=1";
  const std::vector<std::string> names = {base, base + " memory_format=channels_last", base + " math=bf16",
                                          base + " math=bf16 memory_format=channels_last"};
  for (const auto& n : names)
    b.table.table.push_back({n, "1122 samples/s [1058, 1163]", "278.7", "10.43 ms", "17.96 ms", "71.0 MiB", "338 MiB",
                             "the framework's own executor"});
  sec.blocks.push_back(b);
  d.sections.push_back(sec);
  const std::string out = d500::render_console(d, 120);
  std::set<std::string> shown;
  std::size_t rows = 0;
  for (const auto& line : d500::split(out, '\n')) {
    if (line.rfind("network:", 0) != 0) continue;
    ++rows;
    EXPECT_LE(line.size(), 120u + 2 * 8) << line;  // each ellipsis is 3 bytes, one column
    const std::string name = line.substr(0, line.find("  "));
    shown.insert(name);
    if (name.find("math=bf16 ") != std::string::npos) {
      EXPECT_NE(name.find("math=bf16 memory_"), std::string::npos) << "8 columns past the shared start: " << name;
    }
  }
  EXPECT_EQ(rows, names.size()) << out;
  EXPECT_EQ(shown.size(), names.size()) << out;
}

// A backend has one colour in every figure of a report: the roofline listed its series by name
// (blas blue, reference red) where the rate figures list them in plan order (reference blue, blas red).
TEST(ReportFigures, ABackendHasOneColourInEveryFigure) {
  std::vector<PointRow> rows;
  for (const char* backend : {"reference", "blas"})
    for (std::int64_t n : {128, 256, 512}) {
      PointRow r = row(backend, n, 1, 1, 1e-3 * static_cast<double>(n) / (backend[0] == 'b' ? 8 : 1));
      r.flops = 2.0 * static_cast<double>(n * n * n);
      r.work_bytes = 12.0 * static_cast<double>(n * n);
      rows.push_back(r);
    }
  const d500::Report rep = report(rows);
  auto colours = [](const std::string& svg) {
    std::map<std::string, std::set<std::string>> out;  // series -> the colours its marks are drawn in
    const std::regex series("<g class=\"series\" data-name=\"([^\"]+)\"[^>]*>([^]*?)</g>"),
        colour("(?:fill|stroke)=\"(#[0-9a-f]{6})\"");
    for (std::sregex_iterator it(svg.begin(), svg.end(), series), end; it != end; ++it) {
      const std::string body = (*it)[2];
      for (std::sregex_iterator c(body.begin(), body.end(), colour); c != end; ++c) out[(*it)[1]].insert((*c)[1]);
    }
    return out;
  };
  const auto rate = figures_named(rep, "rate-"), roof = figures_named(rep, "roofline");
  ASSERT_EQ(rate.size(), 1u);
  ASSERT_EQ(roof.size(), 1u);
  const auto in_rate = colours(rate[0]), in_roof = colours(roof[0]);
  ASSERT_EQ(in_rate.size(), 2u);
  for (const char* backend : {"reference", "blas"}) {
    EXPECT_EQ(in_rate.at(backend).size(), 1u) << backend;
    EXPECT_EQ(in_rate.at(backend), in_roof.at(backend)) << backend;
  }
  EXPECT_NE(in_rate.at("reference"), in_rate.at("blas"));
}

// Several scaling series of a workload share one figure of their efficiencies, each series named
// by what tells it from the others ("blas, 256"), its x axis labelled at the rank counts measured;
// a series of two rank counts has no figure of its own (its table has both rows), one of three has.
// A series that starts at another rank count (a parameter server's series at 2 ranks, the
// others at 1) is named by what tells it apart, never by its base's ranks_per_node: that is the
// axis along which every series runs.
TEST(ReportFigures, AScalingSeriesIsNotNamedByItsBasesRankCount) {
  std::vector<PointRow> rows;
  for (std::int64_t servers : {0, 1})
    for (std::int64_t rpn : {1, 2, 4})
      if (rpn > servers)
        rows.push_back(
            with_params(row("blas", 128, rpn, 1, 1e-2 / static_cast<double>(rpn)), {{"ps_servers", servers}}));
  for (auto& r : rows) r.scaling = "strong";
  d500::Report rep = report(rows);
  rep.scaling = d500::scaling_series(rep.rows, 0.95, 1);
  ASSERT_EQ(rep.scaling.size(), 2u);
  const std::string terminal = d500::render_console(d500::report_document(rep), 120);
  EXPECT_NE(terminal.find("ps_servers  ranks  median time"), std::string::npos) << terminal;
  EXPECT_EQ(terminal.find("ranks_per_node  ranks"), std::string::npos) << terminal;
  const std::vector<std::string> figs = figures_named(rep, "scaling-");
  ASSERT_FALSE(figs.empty());
  for (const char* name : {"data-name=\"0\"", "data-name=\"1\""})
    EXPECT_NE(figs[0].find(name), std::string::npos) << name << figs[0];
}

TEST(ReportFigures, ScalingSeriesShareAnEfficiencyFigureLabelledAtTheirRankCounts) {
  for (const std::vector<std::int64_t>& counts :
       {std::vector<std::int64_t>{1, 2}, std::vector<std::int64_t>{1, 2, 4}}) {
    std::vector<PointRow> rows;
    for (const char* backend : {"reference", "blas"})
      for (std::int64_t n : {128, 256})
        for (std::int64_t rpn : counts) rows.push_back(row(backend, n, rpn, 1, 1e-3 * static_cast<double>(n) / rpn));
    d500::Report rep = report(rows);
    rep.scaling = d500::scaling_series(rep.rows, 0.95, 1);
    ASSERT_EQ(rep.scaling.size(), 4u);
    const std::vector<std::string> figs = figures_named(rep, "scaling-");
    ASSERT_EQ(figs.size(), counts.size() == 2 ? 1u : 5u) << "the overview, and a figure per series of 3 counts";
    const std::string& overview = figs[0];
    EXPECT_NE(overview.find("scaling efficiency of each series"), std::string::npos);
    for (const char* name : {"reference, 128", "reference, 256", "blas, 128", "blas, 256"})
      EXPECT_NE(overview.find("data-name=\"" + std::string(name) + "\""), std::string::npos) << name;
    EXPECT_NE(overview.find(">backend, n<"), std::string::npos) << "the legend's title";
    std::set<std::string> ticks;
    const std::regex tick("<text class=\"tick\" x=\"[0-9.]+\" y=\"[0-9.]+\" text-anchor=\"middle\">([^<]+)</text>");
    for (std::sregex_iterator it(overview.begin(), overview.end(), tick), end; it != end; ++it) ticks.insert((*it)[1]);
    std::set<std::string> want;
    for (auto c : counts) want.insert(std::to_string(c));
    EXPECT_EQ(ticks, want) << "no 0.8, 0.9, 1.2 ranks";
    // The terminal prints one table of every series' points, named as the figure names them, with
    // each series' model on its first row; the files keep each series' own table and words too.
    const d500::Document doc = d500::report_document(rep);
    const std::string terminal = d500::render_console(doc, 120),
                      md = d500::find_reporter("markdown").render_report(rep, doc);
    EXPECT_NE(terminal.find("backend, n      ranks  median time  efficiency (95% CI)  model"), std::string::npos)
        << terminal;
    EXPECT_NE(terminal.find("blas, 256"), std::string::npos) << terminal;
    EXPECT_EQ(terminal.find("strong scaling of gemm:"), std::string::npos) << "each series' own words: the files";
    EXPECT_EQ(terminal.find("T(base)/T(p) (CI)"), std::string::npos) << "each series' own table: the files";
    EXPECT_NE(md.find("Strong scaling of gemm:blas"), std::string::npos);
    EXPECT_NE(md.find("| T(base)/T(p) (CI) | efficiency (CI) |"), std::string::npos)
        << "strong: the speedup and efficiency";
  }
  // In weak scaling the efficiency is T(base)/T(p): one column.
  d500::ScalingSeries weak;
  weak.kind = "weak";
  weak.points.resize(2);
  const d500::Table t = d500::scaling_table(weak);
  EXPECT_EQ(t[0].back(), "efficiency = T(base)/T(p) (CI)");
  EXPECT_EQ(std::count(t[0].begin(), t[0].end(), "T(base)/T(p) (CI)"), 0);
}

// A number that a named shape fixes (conv2d's c, h, k, ... by resnet50/...) is left to --wide in
// the terminal, which says so: the operators campaign's Results had 11 naming columns and cut the
// shapes to "resnet5…" and both backward passes to "backwar…". The files keep every column.
TEST(ReportTables, NumbersANamedShapeFixesAreLeftToWideInTheTerminal) {
  std::vector<PointRow> rows;
  for (const char* backend : {"blas", "onednn"})
    for (const char* pass : {"forward", "backward_data", "backward_filter"})
      for (const auto& [shape, c] : {std::pair{"resnet50/conv1", 3}, std::pair{"resnet50/res3_3x3_stride2", 128}})
        rows.push_back(
            with_params(row(backend, 64, 1, 1, 0.01),
                        {{"pass", std::string(pass)}, {"shape", std::string(shape)}, {"c", std::int64_t{c}}}));
  const d500::Document d = d500::report_document(report(rows));
  const std::string terminal = d500::render_console(d, 120);
  EXPECT_NE(terminal.find("--wide shows c too: another column's values fix them."), std::string::npos) << terminal;
  EXPECT_NE(terminal.find("blas     backward_filter  resnet50/res3_3x3_stride2"), std::string::npos) << terminal;
  EXPECT_EQ(terminal.find("  c  "), std::string::npos) << terminal;
  const std::string wide = d500::render_console(d, 0);
  EXPECT_NE(wide.find("status    c\n"), std::string::npos) << "--wide keeps it, after the figures: " << wide;
  // Its figures: the parameter of most values (here pass) on x and a panel per shape, c neither
  // (it was the x axis, every shape and pass a panel of one point each), the boxes named without c.
  const d500::Report rep = report(rows);
  const std::vector<std::string> rate = figures_named(rep, "rate-");
  ASSERT_EQ(rate.size(), 2u) << "a panel per shape";
  for (const auto& svg : rate) {
    EXPECT_NE(svg.find(">pass</text>"), std::string::npos) << svg;
    std::smatch title;
    ASSERT_TRUE(std::regex_search(svg, title, std::regex("class=\"title\"[^>]*>([^<]*)<")));
    EXPECT_EQ(title[1].str().rfind("gemm: shape=resnet50/", 0), 0u) << title[1];
    EXPECT_EQ(title[1].str().find("c="), std::string::npos) << title[1];
  }
  const std::vector<std::string> boxes = figures_named(rep, "repetitions-");
  ASSERT_FALSE(boxes.empty());
  EXPECT_NE(boxes[0].find(">backend, pass, shape</text>"), std::string::npos) << boxes[0];
}

// A parameter's name wider than its values breaks after an underscore rather than being cut: the
// distributed campaign's "ranks_per_node" over 1, 2 and 4 read "ranks_per_no…".
TEST(ReportConsole, AParametersNameBreaksAfterAnUnderscore) {
  d500::Document d;
  d500::Section sec{"Results", 2, true, {}};
  d500::Block b;
  b.kind = d500::Block::Kind::Table;
  b.table.table = {{"point", "ranks_per_node", "status"}};
  for (const char* rpn : {"1", "2", "4"})
    b.table.table.push_back({"distributed:reference " + std::string(75, 'x') + rpn, rpn, "complete"});
  sec.blocks.push_back(b);
  d.sections.push_back(sec);
  const std::vector<std::string> lines = d500::split(d500::render_console(d, 120), '\n');
  std::size_t underline = 0;
  while (underline < lines.size() && lines[underline].rfind("---", 0) != 0) ++underline;
  ASSERT_GE(underline, 2u) << d500::join(lines, "\n");
  EXPECT_NE(lines[underline - 2].find("ranks_per_"), std::string::npos) << d500::join(lines, "\n");
  EXPECT_NE(lines[underline - 1].find("node"), std::string::npos) << d500::join(lines, "\n");
  for (const auto& line : lines) EXPECT_EQ(line.find("\u2026"), std::string::npos) << "nothing cut: " << line;
}

// A table of the Networks section as a cpu-frameworks campaign has it (the backend, launch, math and
// memory_format naming each row, eleven columns): in 120 columns the headers wider than their values
// wrap ("planned" over "memory") before any cell is cut, and the naming columns are cut last, so that
// "libtorch-native" and "channels_last" read whole (they read "libtorch-na…", "channels_la…").
TEST(ReportConsole, HeadersWrapAndTheNamingColumnsAreCutLast) {
  d500::Document d;
  d500::Section sec{"Networks", 2, true, {}};
  d500::Block b;
  b.kind = d500::Block::Kind::Table;
  b.table.table = {{"backend", "launch", "math", "memory_format", "samples/s", "GFLOP/s", "forward", "backward",
                    "planned memory", "peak RSS", "on the backend"}};
  b.table.naming = 4;
  for (const char* backend : {"onednn", "libtorch-native"})
    for (const char* layout : {"nchw", "channels_last"})
      b.table.table.push_back({backend, "1", "fp32", layout, "317.5", "78.84", "7.643 ms", "17.58 ms", "17.8 MiB",
                               "281 MiB", std::string(backend) == "onednn" ? "100%" : "own executor"});
  sec.blocks.push_back(b);
  d.sections.push_back(sec);
  const std::vector<std::string> lines = d500::split(d500::render_console(d, 120), '\n');
  std::size_t underline = lines.size(), body = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].find("\u2026"), std::string::npos) << "nothing cut: " << lines[i];
    EXPECT_LE(lines[i].size(), 120u) << lines[i];
    if (lines[i].rfind("---", 0) == 0 && underline == lines.size()) underline = i;
    if (lines[i].rfind("libtorch-native  1       fp32  channels_last", 0) == 0) ++body;
  }
  ASSERT_LT(underline, lines.size());
  ASSERT_GE(underline, 2u);
  EXPECT_EQ(body, 1u) << "the names whole, in their columns:\n" << d500::join(lines, "\n");
  const std::string &top = lines[underline - 2], &bottom = lines[underline - 1];
  EXPECT_NE(top.find("planned"), std::string::npos) << top;
  EXPECT_EQ(top.find("memory_format"), std::string::npos) << "a one-line header sits on the last line: " << top;
  EXPECT_NE(bottom.find("memory_format"), std::string::npos) << bottom;
  EXPECT_EQ(top.find("planned"), bottom.find("memory  ")) << "\n" << top << "\n" << bottom;
}

// Where a cell must be cut, the column whose cut touches the fewest cells gives way, a number
// counting four times a word: a status cut on its two failed rows, never the validation's
// "8.4e-04" on every passed one (it read "passed (8.4e-0…").
TEST(ReportConsole, TheCutTouchesFewCellsAndNumbersLast) {
  d500::Document d;
  d500::Section sec{"Results", 2, true, {}};
  d500::Block b;
  b.kind = d500::Block::Kind::Table;
  b.table.table = {{"backend", "filler", "validation", "status"}};
  for (int k = 0; k < 6; ++k)
    b.table.table.push_back(
        {"onednn", std::string(80, 'x'), "passed (8.4e-04)", k < 2 ? "failed-validation" : "complete"});
  sec.blocks.push_back(b);
  d.sections.push_back(sec);
  const std::string out = d500::render_console(d, 120);  // 6 + 80 + 16 + 17 + 6 = 125: five columns to give
  EXPECT_EQ(out.find("8.4e-0\u2026"), std::string::npos) << out;
  EXPECT_NE(out.find("passed (8.4e-04)"), std::string::npos) << out;
  EXPECT_NE(out.find("failed-vali\u2026"), std::string::npos) << "down to 12, then the filler: " << out;
}

// In report.html a table scrolls sideways where the page is narrower: its cells keep their line
// ("passed (8.4e-04)" wrapped read as two values) but for long texts, which wrap; the columns that
// name a row read on the left.
TEST(ReportHtml, CellsKeepTheirLineInABoxThatScrollsAndNamesReadLeft) {
  std::vector<PointRow> rows;
  for (const char* math : {"fp32", "bf16"})
    rows.push_back(with_params(row("onednn", 64, 1, 1, 0.01), {{"math", std::string(math)}}));
  rows.push_back(with_params(row("blas", 64, 1, 1, 0.01), {{"math", std::string("fp32")}}));  // backend a column
  rows[1].outcome = d500::Outcome::BackendFailed;
  rows[1].status = "backend-failed";
  rows[1].status_reason = std::string(60, 'r');
  const d500::Report rep = report(rows);
  d500::Document d = d500::report_document(rep);
  d500::Block reason;
  reason.kind = d500::Block::Kind::Table;
  reason.table.table = {{"point", "reason", "ranks_per_node"}, {"p", rows[1].status_reason, "4"}};
  d.sections.back().blocks.push_back(reason);
  const std::string html = d500::find_reporter("html").render_report(rep, d);
  EXPECT_NE(html.find("td{white-space:nowrap}"), std::string::npos);
  EXPECT_NE(html.find("<div class=\"scroll\"><table class=\"sortable\">"), std::string::npos) << html;
  EXPECT_NE(html.find("<th class=\"name\">math</th>"), std::string::npos) << "math names the Results' rows";
  EXPECT_NE(html.find("<td class=\"name\">bf16</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"text name\">" + rows[1].status_reason + "</td>"), std::string::npos)
      << "a long text wraps, and in a column of words reads on the left";
  EXPECT_NE(html.find("<td class=\"name\">complete</td>"), std::string::npos) << "a status reads on the left too";
  EXPECT_NE(html.find("<td>12</td>"), std::string::npos) << "a number (the reps) stays on the right";
  EXPECT_NE(html.find("<td>4</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>ranks_<wbr>per_<wbr>node</th>"), std::string::npos) << "a header breaks after a '_'";
  d.sections.back().blocks.back().table.table[0][2] = "memory_format=channels_last";
  EXPECT_NE(
      d500::find_reporter("html").render_report(rep, d).find("<th>memory_<wbr>format=<wbr>channels_<wbr>last</th>"),
      std::string::npos)
      << "and after a '='";
}

// The report's first line says when its jobs started and where (the files' created_utc, the hosts
// rank 0 recorded), the date once where both ends share it.
TEST(ReportDocument, TheFirstLineSaysWhenAndWhereTheJobsRan) {
  d500::Report rep = report({row("blas", 64, 1, 1, 1e-3), row("blas", 128, 1, 1, 1e-3)});
  EXPECT_EQ(d500::join(d500::report_document(rep).facts, "; ").find("started"), std::string::npos)
      << "no file: nothing said";
  rep.first_started = "2026-12-07T20:32:38Z";
  rep.last_started = "2026-12-07T20:32:46Z";
  rep.environments.push_back(d500::Environment{{}, {"nid001"}, 1});
  const std::vector<std::string> facts = d500::report_document(rep).facts;
  EXPECT_NE(std::find(facts.begin(), facts.end(), "jobs started 2026-12-07 20:32:38 to 20:32:46 UTC on nid001"),
            facts.end())
      << d500::join(facts, "; ");
  rep.last_started = "2026-12-08T01:00:00Z";
  for (const char* h : {"nid002", "nid003", "nid004"}) rep.environments[0].hosts.insert(h);
  const std::string two_days = d500::join(d500::report_document(rep).facts, "; ");
  EXPECT_NE(two_days.find("jobs started 2026-12-07 20:32:38 to 2026-12-08 01:00:00 UTC on 4 hosts"), std::string::npos)
      << two_days;
}

// Measurement quality lists a workload's points together, as the Results tables do, however the
// plan interleaved them; each tail quantile is a column of its own, a bare value where the point
// has too few repetitions for its interval (the note says how many it needs).
TEST(ReportQuality, AWorkloadsPointsTogetherAndATailQuantileAColumn) {
  std::vector<PointRow> rows{row("blas", 64, 1, 1, 1e-3), row("blas", 128, 1, 1, 2e-3), row("blas", 256, 1, 1, 4e-3)};
  rows[1] = with_params(rows[1], {{"workload", std::string("other")}});
  rows[1].workload = "other";
  for (auto& r : rows) {
    std::vector<double> sorted = r.costs;
    std::sort(sorted.begin(), sorted.end());
    for (double q : {0.9, 0.99}) r.tail.push_back(d500::stats::summarize_quantile(sorted, q, 0.95));
  }
  const d500::Report rep = report(rows);
  const d500::Table t = d500::quality_table(rep, "gemm");
  ASSERT_EQ(t.size(), 3u) << "gemm's two points, not the other workload's";
  ASSERT_EQ(t[0].size(), 10u) << "one rank count: no ranks column";
  EXPECT_EQ(t[0], (std::vector<std::string>{"point", "reps", "mean (t-interval)", "p90", "p99", "outliers (low/high)",
                                            "enough repetitions", "rank durations", "independent", "machine"}));
  EXPECT_EQ(t[1][0].rfind("gemm", 0), 0u);
  EXPECT_EQ(t[2][0].rfind("gemm", 0), 0u);
  ASSERT_EQ(d500::quality_table(rep, "other").size(), 2u);
  // In the documents a table per workload, under a subsection each, named as in Results.
  const d500::Document doc = d500::report_document(rep);
  std::vector<std::string> titles;
  for (const auto& s : doc.sections)
    if (s.title.rfind("Measurement quality", 0) == 0) {
      titles.push_back(s.title);
      if (s.depth == 3) {
        ASSERT_EQ(s.blocks.size(), 1u);
        EXPECT_NE(s.blocks[0].table.table[0][0], "point") << "the point column is the Results' columns";
      }
    }
  EXPECT_EQ(titles, (std::vector<std::string>{"Measurement quality", "Measurement quality: gemm",
                                              "Measurement quality: other"}));
  EXPECT_EQ(t[1][3], d500::fmt_time(rep.rows[0].tail[0].estimate)) << "12 repetitions: no interval, a bare value";
  EXPECT_NE(d500::quality_note(rep).find("(from 36 repetitions for p90, 368 for p99;"), std::string::npos)
      << d500::quality_note(rep);
}

// Where the overview's table has every series' points, each series' own caption, table and figure
// are detail: report.html and report.md fold them into one closed box per workload, after the
// overview.
TEST(ReportHtml, EachSeriesInFullFoldsUnderTheOverview) {
  const d500::Report rep = two_series({1, 2, 4}, [](std::int64_t, int p) { return 1e-3 / p * 1.2; });
  ASSERT_EQ(rep.scaling.size(), 2u);
  const d500::Document doc = d500::report_document(rep);
  const std::string html = d500::find_reporter("html").render_report(rep, doc);
  const std::string summary =
      "<details><summary>Each of gemm's 2 series in full: base, model in words, figure and table (click to "
      "open)</summary>";
  const std::size_t at = html.find(summary);
  ASSERT_NE(at, std::string::npos) << html;
  EXPECT_EQ(html.find("<details>", at + 1), std::string::npos) << "one box for both series";
  const std::size_t end = html.find("</details>", at);
  ASSERT_NE(end, std::string::npos);
  const std::string inside = html.substr(at, end - at);
  EXPECT_NE(inside.find("Strong scaling of gemm n=64"), std::string::npos) << inside;
  EXPECT_NE(inside.find("Strong scaling of gemm n=128"), std::string::npos);
  EXPECT_NE(inside.find("<svg"), std::string::npos) << "each series' figure inside";
  EXPECT_LT(html.find("scaling efficiency of each series"), at) << "the overview's figure before, open";
  EXPECT_LT(end, html.find("<h2", at)) << "closed within the section";
  // report.md folds them alike (GitHub and GitLab render <details>), a blank line after the summary
  // so that the tables inside stay Markdown.
  const std::string md = d500::find_reporter("markdown").render_report(rep, doc);
  const std::size_t md_at = md.find(summary + "\n\n");
  ASSERT_NE(md_at, std::string::npos) << md;
  EXPECT_EQ(md.find("<details>", md_at + 1), std::string::npos) << "one box for both series";
  const std::size_t md_end = md.find("</details>\n", md_at);
  ASSERT_NE(md_end, std::string::npos);
  EXPECT_NE(md.substr(md_at, md_end - md_at).find("Strong scaling of gemm n=64"), std::string::npos);
  EXPECT_LT(md_end, md.find("\n## ", md_at)) << "closed within the section";
}

// Times that grow with the rank count faster than any serial share allows: no Amdahl model with
// s > 1, but the reason; a real serial share is fitted inside [0, 1]; a series faster than ideal
// in every resample has its share clipped to 0, which reads so, not as "0.00 [0.00, 0.00]".
TEST(ScalingModel, AFitOutsideTheLawsRangeIsReportedAsFailed) {
  auto series = [](double (*time)(int)) {
    std::vector<PointRow> rows;
    for (int ranks : {1, 2, 4}) {
      PointRow r = row("x", 64, 1, 42, 0.01 * time(ranks));
      r.params.erase("ranks_per_node");
      r.ranks = ranks;
      rows.push_back(r);
    }
    return d500::scaling_series(rows, 0.95, 3);
  };
  const auto bad = series([](int p) { return p == 1 ? 1.0 : 1.5 * p; });  // 2 ranks: 3x the time; 4 ranks: 6x
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_TRUE(bad[0].model.law.empty());
  EXPECT_NE(bad[0].model.failed.find("outside the law's range [0, 1]"), std::string::npos) << bad[0].model.failed;
  EXPECT_NE(d500::scaling_model_text(bad[0]).find("No scaling model: "), std::string::npos);
  const auto good = series([](int p) { return 0.2 + 0.8 / p; });  // Amdahl, s = 0.2
  ASSERT_EQ(good.size(), 1u);
  EXPECT_FALSE(good[0].model.law.empty());
  EXPECT_GE(good[0].model.s_lo, 0.0);
  EXPECT_LE(good[0].model.s_hi, 1.0);
  EXPECT_LE(good[0].model.s_lo, 0.2);
  EXPECT_GE(good[0].model.s_hi, 0.2);
  EXPECT_NE(
      d500::scaling_model_text(good[0]).find("; s (the serial share) = " + d500::fmt_sig(good[0].model.s, 3) + " ["),
      std::string::npos)
      << d500::scaling_model_text(good[0]);
  const auto superlinear = series([](int p) { return p == 1 ? 1.0 : 0.4 / p; });  // 2.5x ideal past 1 rank
  ASSERT_EQ(superlinear.size(), 1u);
  EXPECT_EQ(superlinear[0].model.s_hi, 0.0);
  EXPECT_NE(d500::scaling_model_text(superlinear[0]).find("; s (the serial share) = 0 (at or above ideal);"),
            std::string::npos)
      << d500::scaling_model_text(superlinear[0]);
  // Weak scaling (every rank the same work): Amdahl's form fits contention, the time growing as
  // T(base) (1 + s (n-1)); the report names it "USL (k = 0)" and s contention, no serial share.
  auto weak = [](double (*time)(int)) {
    std::vector<PointRow> rows;
    for (int ranks : {1, 2}) {
      PointRow r = row("x", 64, 1, 42, 0.01 * time(ranks));
      r.params.erase("ranks_per_node");
      r.ranks = ranks;
      r.scaling = "weak";
      rows.push_back(r);
    }
    return d500::scaling_series(rows, 0.95, 3);
  };
  const auto contended = weak([](int p) { return 1.0 + 0.3 * (p - 1); });  // s = 0.3
  ASSERT_EQ(contended.size(), 1u);
  ASSERT_EQ(contended[0].kind, "weak");
  EXPECT_EQ(contended[0].model.law, "Amdahl") << "results.json's name of the k = 0 law";
  EXPECT_NEAR(contended[0].model.s, 0.3, 0.03);
  const std::string words = d500::scaling_model_text(contended[0]);
  EXPECT_NE(words.find("Fitted model (USL (k = 0), "), std::string::npos) << words;
  EXPECT_NE(words.find("so that T(p) = T(base) (1 + s (n-1)); s (contention: "), std::string::npos) << words;
  EXPECT_EQ(words.find("(the serial share)"), std::string::npos) << words;
  EXPECT_EQ(d500::law_words("strong", "Amdahl"), "Amdahl");
  const auto beyond = weak([](int p) { return p == 1 ? 1.0 : 3.0; });  // 2 ranks take 3x: beyond 2 T(base)
  ASSERT_EQ(beyond.size(), 1u);
  EXPECT_TRUE(beyond[0].model.law.empty());
  EXPECT_NE(beyond[0].model.failed.find("beyond n T(base)"), std::string::npos) << beyond[0].model.failed;
}

}  // namespace

namespace {

// Level 0's roofline: every FLOP point at its arithmetic intensity, on a GPU over its device
// time, with the GPU's peak where d500 knows it; none without a level-0 FLOP point.
TEST(ReportFigures, TheRooflinePlacesOperatorsByIntensityUnderTheKnownPeak) {
  std::vector<PointRow> rows;
  for (std::int64_t n : {64, 256}) {
    PointRow r = row("cuda", n, 1, 42, 1e-4);
    r.flops = 2.0 * static_cast<double>(n * n * n);
    r.work_bytes = 4.0 * 3 * static_cast<double>(n * n);
    r.facts["device.peak_flops"] = 6.7e13;
    r.facts["device.peak_basis"] = std::string("132 SMs x 128 FP32 FMA");
    rows.push_back(r);
  }
  auto rep = report(rows);
  const std::vector<std::string> roofline = figures_named(rep, "roofline");
  ASSERT_EQ(roofline.size(), 1u);
  const std::string& svg = roofline[0];
  EXPECT_NE(svg.find("data-x=\"10.6666667\""), std::string::npos) << "n = 64: 2n^3 / 12n^2 FLOP per byte";
  EXPECT_NE(svg.find(">peak 67.0 TFLOP/s</text>"), std::string::npos) << svg.substr(svg.find("legend"), 400);
  EXPECT_NE(svg.find("data-line=\"0\""), std::string::npos) << "operators of different sizes are never joined";
  rep.rows[0].level = rep.rows[1].level = 1;
  EXPECT_TRUE(figures_named(rep, "roofline").empty());
}

// A network's step judged against the yardstick: the report's Validation section names, per
// point, the decisive tensor, its error and allowance, and what the judgement could see; a
// campaign without such points has no section.
TEST(ReportValidation, EachNetworksStepNamesItsDecisiveTensorItsAllowanceAndWhatItCouldSee) {
  std::vector<PointRow> rows = {row("cuda", 64, 1, 1, 1e-3), row("blas", 64, 1, 1, 2e-3)};
  auto has_section = [](const d500::Report& rep) {
    for (const auto& s : d500::report_document(rep).sections)
      if (s.title == "Validation") return true;
    return false;
  };
  EXPECT_FALSE(has_section(report(rows))) << "operators carry no step judgement";
  rows[0].validation_status = "passed";
  rows[0].facts["validation.decisive"] = std::string("the gradient of 'bn_scale_3'");
  rows[0].facts["validation.decisive_error"] = 0.0731;
  rows[0].facts["validation.decisive_allowed"] = 0.224;
  rows[0].facts["validation.tensors"] = std::int64_t{66};
  rows[0].facts["validation.caught_2pct"] = std::int64_t{10};
  const auto rep = report(rows);
  EXPECT_TRUE(has_section(rep));
  const d500::Table t = d500::validation_table(rep);
  ASSERT_EQ(t.size(), 2u) << "a row for the point that has one, none for the other";
  EXPECT_EQ(t[1][1], "passed");
  EXPECT_EQ(t[1][2], "the gradient of 'bn_scale_3'");
  EXPECT_EQ(t[1][3], "0.0731");
  EXPECT_EQ(t[1][4], "0.224");
  EXPECT_EQ(t[1][5], "10 of 66 tensors");
}

}  // namespace

namespace {

// The items of the report's first section, At a glance (empty where it has none).
std::vector<std::string> glance(const d500::Report& rep) {
  const d500::Document d = d500::report_document(rep);
  if (d.sections.empty() || d.sections.front().title != "At a glance") return {};
  for (const auto& b : d.sections.front().blocks)
    if (b.kind == d500::Block::Kind::List) return b.items;
  return {};
}

// At a glance counts what the sections below say: whether every point completed (what the others
// did, how many shared cores), each pair of backends' verdicts in a workload (faster only where the interval
// excludes 1), and where the points are seeds of one configuration, the comparison across seeds
// instead of one per seed (seeds that disagree: 0.9x, 1.2x and 2.7x, each significant alone).
TEST(ReportGlance, TheFirstSectionCountsTheVerdictsOfTheSectionsBelow) {
  std::vector<PointRow> rows;
  for (std::int64_t n : {128, 64})  // blas 10x faster at n=128, 5x at 64: the range names each end's n
    for (const char* b : {"reference", "blas"})
      rows.push_back(row(b, n, 1, 1, std::string(b) == "reference" ? 1e-3 : n == 64 ? 2e-4 : 1e-4));
  d500::Report rep = report(rows);
  rep.comparisons = d500::compare_backends(rep.rows, 0.95, 7);
  ASSERT_EQ(rep.comparisons.size(), 2u);
  std::vector<std::string> items = glance(rep);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0], "All 4 points completed.");
  EXPECT_EQ(items[1],
            "gemm: blas against reference, 2 configurations, faster in both: speedup from 5.00 (n=64) to "
            "10.0 (n=128).");
  rep.rows[3].outcome = d500::Outcome::BackendFailed;
  rep.rows[3].status = "backend-failed";
  EXPECT_EQ(glance(rep)[0],
            "3 of 4 points completed; 1 did not (backend-failed 1): Points needing attention says why.");
  rep.rows[0].oversubscribed = true;
  EXPECT_EQ(glance(rep)[0],
            "3 of 4 points completed, 1 of them with more ranks or threads than CPUs (their times measure core "
            "sharing); 1 did not (backend-failed 1): Points needing attention says why.");
  rep.rows[0].oversubscribed = false;
  // Terminal first: the section leads the report there too.
  const std::string terminal = d500::render_console(d500::report_document(rep), 120);
  EXPECT_LT(terminal.find("At a glance"), terminal.find("Results: gemm")) << terminal;

  std::vector<PointRow> seeds;
  const double speedups[] = {0.9, 1.2, 2.7};
  for (std::int64_t seed : {1, 2, 3})
    for (const char* b : {"reference", "blas"})
      seeds.push_back(row(b, 64, 1, seed, std::string(b) == "blas" ? 1e-3 / speedups[seed - 1] : 1e-3));
  d500::Report by_seed = report(seeds);
  by_seed.comparisons = d500::compare_backends(by_seed.rows, 0.95, 7);
  by_seed.seed_comparisons = d500::compare_backends_across(by_seed.rows, 0.95, "seed");
  ASSERT_EQ(by_seed.comparisons.size(), 3u);
  ASSERT_EQ(by_seed.seed_comparisons.size(), 1u);
  for (const auto& c : by_seed.comparisons) EXPECT_TRUE(c.speedup.excludes_one()) << c.group;
  items = glance(by_seed);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1], "gemm: blas against reference across seeds, speedup " +
                          d500::ratio_text(by_seed.seed_comparisons[0].speedup) + ", no significant difference.");
  EXPECT_TRUE(glance(report({rows[0]})).empty()) << "one point: nothing to count";

  // Scaling: each series' efficiency at its largest rank count, the range naming each end's series
  // (2 ranks: 1.6x the speedup at n=64, efficiency 0.8; 1.2x at n=128, 0.6).
  const d500::Report series =
      two_series({1, 2}, [](std::int64_t n, int p) { return p == 1 ? 1e-3 : 1e-3 / (n == 64 ? 1.6 : 1.2); });
  ASSERT_EQ(series.scaling.size(), 2u);
  items = glance(series);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1], "gemm (strong scaling), 2 series: efficiency at 2 ranks from 0.600 (n=128) to 0.800 (n=64).");

  // Time to accuracy: the shortest and the longest median with their configurations, and whether
  // their intervals tell them apart (none at 3 runs; apart at 12 runs of times that do not overlap).
  d500::Report tta = report(rows);
  for (const char* b : {"reference", "blas"})
    for (int runs : {3, 12}) {
      d500::TtaConfig c;
      c.group = std::string("train:") + b + " runs=" + std::to_string(runs);
      std::vector<double> times;
      for (int i = 0; i < runs; ++i) times.push_back((std::string(b) == "blas" ? 10.0 : 20.0) + 0.1 * i);
      c.summary = d500::summarize_tta(times, 0.8, 100.0, 0.95);
      if (runs == 12)
        tta.tta.push_back(c);
      else
        tta.tta.insert(tta.tta.begin(), c);
    }
  tta.tta.erase(tta.tta.begin() + 2, tta.tta.end());  // the 3-run configurations
  items = glance(tta);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1],
            "train: time to 0.800, 2 configurations: median from 10.10 s (blas runs=3) to 20.10 s (reference runs=3), "
            "no interval at 3 runs each.");
  tta.tta.clear();
  for (const char* b : {"reference", "blas"}) {
    d500::TtaConfig c;
    c.group = std::string("train:") + b;
    std::vector<double> times;
    for (int i = 0; i < 12; ++i) times.push_back((std::string(b) == "blas" ? 10.0 : 20.0) + 0.1 * i);
    c.summary = d500::summarize_tta(times, 0.8, 100.0, 0.95);
    tta.tta.push_back(c);
  }
  items = glance(tta);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_NE(items[1].find("median from " + d500::fmt_time(tta.tta[1].summary.median) + " (blas) to " +
                          d500::fmt_time(tta.tta[0].summary.median) + " (reference), their 95% intervals apart."),
            std::string::npos)
      << items[1];
}

}  // namespace
