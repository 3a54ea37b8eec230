// The d500 command line: a table of subcommands. Errors from every stage arrive here as
// d500::Error and leave as one line on stderr and a non-zero exit code.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "analysis/compare.hpp"
#include "analysis/document.hpp"
#include "analysis/format.hpp"
#include "analysis/mllog.hpp"
#include "analysis/reporters.hpp"
#include "backends/graph_ops.hpp"
#include "backends/registry.hpp"
#include "campaign/campaign.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "d500/version.hpp"
#include "launch/local.hpp"
#include "launch/slurm.hpp"
#include "networks/builtin.hpp"
#include "networks/conformance.hpp"
#include "plan/plan.hpp"
#include "rundir/layout.hpp"
#include "store/guarded.hpp"
#include "workloads/registry.hpp"

namespace fs = std::filesystem;
using namespace d500;

namespace {

// An error for the terminal: control characters (an escape sequence from a hostile value)
// written as \xNN, line breaks kept.
std::string terminal_safe(const std::string& s) {
  const std::vector<std::string> lines = split(s, '\n');
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + printable(lines[i]);
  return out;
}

struct Subcommand {
  const char* name;
  const char* help;
};
const Subcommand kSubcommands[] = {
    {"plan", "expand a campaign into points and jobs; write job scripts and specs"},
    {"run", "run a plan's jobs on this machine with mpirun"},
    {"submit", "submit a plan's jobs to Slurm through libslurm (--resume: only what is left)"},
    {"status",
     "what runs now (local: the point, i of n) or per job the Slurm state and reason; per point done/incomplete/missing"},
    {"cancel", "cancel the campaign's queued and running Slurm jobs"},
    {"report", "summarise a run's results files: table, report.md, report.html, results.csv"},
    {"compare", "compare runs point by point (matched by id): time ratios with bootstrap CIs; exit 4 on a regression"},
    {"check", "validate results files against the schema; say what is wrong, where"},
    {"export", "export a run's results in another format: mllog (MLPerf-style training logs, one per run)"},
    {"backends", "list the backends d500 knows, with library versions and availability"},
    {"workloads", "list the workloads and their parameters"},
    {"networks", "list the built-in networks with their parameters, parameter count and FLOPs per sample"},
    {"export-network", "write a built-in network as an ONNX file (-o FILE.onnx)"},
    {"onnx-test",
     "run ONNX backend-test cases (model.onnx + test_data_set_N) on a backend; pass/fail per case and operator"},
    {"version", "print the d500 version and commit"},
};

std::string worker_path() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  fs::path w = (ec ? fs::path(".") : self.parent_path()) / "d500-worker";
  if (!fs::exists(w)) throw Error("cannot find d500-worker next to d500 (looked for " + w.string() + ")");
  return w.string();
}

// A plan of up to this many points is listed point by point; a larger one is summarised
// (jobs per shape, points per axis value) unless --list asks for every point.
constexpr std::size_t kListedPoints = 60;

void print_plan_summary(const Plan& plan, std::ostream& out) {
  // Jobs by shape, in the order the shapes first appear.
  struct Shape {
    int nodes, rpn;
    std::size_t jobs = 0, fewest = SIZE_MAX, most = 0;
    double longest_s = -1;  // packing by time: the longest job's estimate
  };
  std::vector<Shape> shapes;
  for (const auto& j : plan.jobs) {
    auto it = std::find_if(shapes.begin(), shapes.end(),
                           [&](const Shape& s) { return s.nodes == j.nodes && s.rpn == j.ranks_per_node; });
    if (it == shapes.end()) it = shapes.insert(shapes.end(), Shape{j.nodes, j.ranks_per_node});
    ++it->jobs;
    it->fewest = std::min(it->fewest, j.points.size());
    it->most = std::max(it->most, j.points.size());
    it->longest_s = std::max(it->longest_s, j.estimate_s);
  }
  for (const auto& s : shapes) {
    out << "  " << s.jobs << " job(s) of " << s.nodes << " node(s) x " << s.rpn << " rank(s), "
        << (s.fewest == s.most ? std::to_string(s.most) : std::to_string(s.fewest) + "-" + std::to_string(s.most))
        << " points each";
    if (s.longest_s >= 0) out << ", the longest estimated " << fmt_sig(s.longest_s / 60, 3) << " min";
    if (plan.tmpl.launcher == "slurm")
      out << ", time limit " << slurm_time(plan.campaign.slurm.time_limit_min) << ", "
          << fmt_sig(static_cast<double>(s.jobs) * s.nodes * plan.campaign.slurm.time_limit_min / 60.0, 3)
          << " node-hours";
    out << "\n";
  }
  out << "  points per axis value (d500 plan --list prints every point; points.csv lists them all):\n";
  constexpr std::size_t kShown = 12;
  for (std::size_t a = 0; a < plan.campaign.axes.size(); ++a) {
    const Axis& axis = plan.campaign.axes[a];
    std::vector<std::string> parts;
    for (std::size_t v = 0; v < axis.values.size() && v < kShown; ++v)
      parts.push_back(canonical(axis.values[v].value) + " (" + std::to_string(plan.value_counts[a][v]) + ")");
    if (axis.values.size() > kShown)
      parts.push_back("... " + std::to_string(axis.values.size() - kShown) + " more values");
    out << "    " << axis.name << ": " << join(parts, ", ") << "\n";
  }
}

int cmd_plan(const std::string& campaign_path, std::string out_dir, bool dry_run, bool force, bool list) {
  refuse_control_chars(out_dir, "the run directory (-o)");  // before any output: write_plan checks again
  Campaign c = load_campaign(campaign_path);
  set_plan_loads_code(!dry_run);  // a dry run loads no library a campaign names
  Plan plan = make_plan(c, builtin_workloads(), PlanOptions{force});
  if (out_dir.empty()) out_dir = "runs/" + c.name;
  // What plan prints beyond the listing is wrapped to 120 columns, continued indented.
  std::cout << wrap_words("campaign " + c.name + ": " + std::to_string(plan.points.size()) + " points in " +
                              std::to_string(plan.jobs.size()) + " jobs (" + c.path + ", hash " + c.hash + ")",
                          120)
            << "  template " << plan.tmpl.name << " (" << plan.tmpl.path
            << ")\n";  // the template's path on a line of its own: the paths outgrew 120 columns
  if (c.auto_repetitions.on) std::cout << "repetitions " << c.auto_repetitions.rule() << "\n";
  if (!plan.packing_text.empty()) std::cout << plan.packing_text << "\n";
  // A listed point is named by what varies among its workload's points, the rest said once per
  // workload (as the report names it); a listing of over 10^4 points keeps the canonical forms.
  std::vector<Params> parsed;
  std::map<std::string, std::vector<std::string>> varying;
  const bool short_names = (plan.points.size() <= kListedPoints || list) && plan.points.size() <= 10000;
  if (short_names) {
    std::map<std::string, std::vector<const Params*>> by_workload;
    parsed.reserve(plan.points.size());
    for (const auto& pt : plan.points) parsed.push_back(parse_canonical_point(pt.canonical));
    for (const auto& p : parsed) by_workload[str_param_or(p, "workload", "?")].push_back(&p);
    for (const auto& [w, pts] : by_workload) {
      ParamSpread s = param_spread(pts);
      varying[w] = s.varying;
      // A number another parameter fixes (a named shape's dimensions) is left out of the names.
      for (const auto& k : fixed_by_another(pts, s.varying)) std::erase(varying[w], k);
      std::vector<std::string> shared;
      for (const auto& [k, v] : s.shared) shared.push_back(k + "=" + canonical(v));
      if (shared.empty()) continue;
      std::string line = "  every " + w + " point:";  // within 120 columns, continued indented
      for (const auto& kv : shared) {
        if (line.size() + 1 + kv.size() > 120) std::cout << line << "\n", line = "   ";
        line += " " + kv;
      }
      std::cout << line << "\n";
    }
  }
  auto name = [&](std::size_t i) {
    if (!short_names) return plan.points[i].canonical;
    return short_point_text(parsed[i], varying[str_param_or(parsed[i], "workload", "?")]);
  };
  if (plan.points.size() > kListedPoints && !list)
    print_plan_summary(plan, std::cout);
  else {
    std::string text;  // one write: 10^6 points are listed in a fraction of a second
    for (const auto& j : plan.jobs) {
      text += "  " + j.id + ": " + std::to_string(j.nodes) + " node(s) x " + std::to_string(j.ranks_per_node) +
              " rank(s), " + std::to_string(j.points.size()) + " points";
      if (j.estimate_s >= 0) text += ", estimated " + fmt_sig(j.estimate_s / 60, 3) + " min";
      if (plan.tmpl.launcher == "slurm")
        text += ", time limit " + slurm_time(c.slurm.time_limit_min) + ", " + fmt_sig(job_node_hours(plan, j), 3) +
                " node-hours";
      text += "\n";
      for (auto i : j.points) {
        text += "    ";
        text += plan.points[i].id;
        text += "  ";
        text += name(i);
        text += "\n";
      }
    }
    std::cout << text;
  }
  if (plan.tmpl.launcher == "slurm")
    std::cout << wrap_words(
        "total: at most " + fmt_sig(total_node_hours(plan), 4) +
            " node-hours: " + node_hours_text(plan, node_hours(plan)) +
            (c.slurm.budget_node_hours > 0 ? " (budget " + fmt_sig(c.slurm.budget_node_hours, 4) + ")" : ""),
        120);
  if (plan.largest_memory_point >= 0) {
    const Point& big = plan.points[static_cast<std::size_t>(plan.largest_memory_point)];
    const std::int64_t rpn = big.ranks_per_node;
    std::cout << wrap_words(
        "memory: the largest point needs about " + fmt_bytes(big.memory_bytes) + " per rank" +
            (rpn > 1 ? " (" + fmt_bytes(big.memory_bytes * rpn) + " per node)" : "") + " of " +
            (plan.node_memory_bytes > 0
                 ? plan.node_memory_source
                 : std::string("a node's memory, which is unknown (set [slurm] mem_per_node to check it)")) +
            ": " + (short_names ? name(static_cast<std::size_t>(plan.largest_memory_point)) : big.canonical),
        120);
  }
  for (const auto& w : plan.warnings) std::cout << wrap_words("warning: " + w, 120);
  if (dry_run) {
    std::cout << "dry run: nothing written\n";
    return 0;
  }
  write_plan(plan, out_dir, worker_path());
  std::cout << "wrote " << out_dir << " (jobs/, results/, logs/); next: d500 "
            << (plan.tmpl.launcher == "slurm" ? "submit " : "run ") << shell_quote(out_dir) << "\n";
  return 0;
}

int cmd_run(const std::string& dir, bool rerun) {
  auto outcomes = run_local(dir, LocalRunOptions{rerun}, std::cout);
  int failed = 0, ran = 0, skipped = 0, stopped = 0;
  for (const auto& o : outcomes) {
    if (o.skipped)
      ++skipped;
    else if (o.stopped_by)
      ++stopped;
    else
      ++ran, failed += o.exit_code != 0;
  }
  std::cout << "d500 run: " << ran << " job(s) run, " << (ran - failed) << " succeeded, " << failed << " failed";
  if (stopped) std::cout << ", " << stopped << " stopped";
  if (skipped) std::cout << ", " << skipped << " already complete";
  std::cout << "\n";
  // A job can succeed with points that failed: say how the points ended, so that a backend that
  // could not run (or ran out of memory) is not read as success.
  std::map<Outcome, int> points;
  for (const auto& o : outcomes)
    for (const auto& [k, n] : o.points) points[k] += n;
  if (!points.empty()) {
    std::vector<std::string> parts;
    for (const auto& [k, n] : points) parts.push_back(std::to_string(n) + " " + outcome_name(k));
    std::cout << "points: " << join(parts, ", ") << "\n";
  }
  for (const auto& o : outcomes)
    if (!o.skipped && o.exit_code)
      std::cout << "  " << o.job_id << ": exit code " << o.exit_code << ", log " << o.log << "\n";
  if (!outcomes.empty() && outcomes.back().stopped_by) {
    std::cout << "stopped: " << outcomes.back().job_id << " was stopped with its processes; `d500 run "
              << shell_quote(dir) << "` runs it and the jobs after it again\n";
    return 128 + outcomes.back().stopped_by;
  }
  std::cout << "next: d500 report " << shell_quote(dir) << "\n";
  return failed ? 1 : 0;
}

// The point parameters the run's campaign file names ([fixed], [axes]): the report says those
// apart from the ones left at their defaults. None where its copy cannot be read or parsed (a
// run planned by another version): the report then says every shared parameter alike.
std::set<std::string> campaign_keys(const RunLayout& layout) {
  try {
    const Campaign c = load_campaign(layout.campaign_file().string(), layout.campaign_dir());
    std::set<std::string> keys;
    for (const auto* axes : {&c.fixed, &c.axes})
      for (const Axis& a : *axes) keys.insert(a.name);
    return keys;
  } catch (const std::exception&) {
    return {};
  }
}

int cmd_report(const std::string& dir, double confidence, std::uint64_t seed, bool wide) {
  if (!(confidence > 0.5 && confidence < 1))
    throw Error("--confidence must lie between 0.5 and 1 (e.g. 0.95), got " + std::to_string(confidence));
  const RunLayout layout(dir);
  layout.refuse_links_out();  // the report's files are written into it
  Report r = analyze_run(dir, AnalysisOptions{confidence, seed, campaign_keys(layout)});
  const Document doc = report_document(r);  // once: the terminal and every file render it
  std::cout << render_console(doc, wide ? 0 : 120);
  const std::vector<std::string> written = write_reports(r, doc);
  std::vector<std::string> names;
  for (const auto& w : written) names.push_back(std::filesystem::path(w).filename().string());
  // The run directory on a line of its own: with it, the line outgrew a 120-column terminal.
  std::cout << "\nwrote " << join(names, ", ") << " (the index) and " << figures_dir(r.confidence) << "/\n  in " << dir
            << "\n";
  return 0;
}

int cmd_compare(const std::vector<std::string>& dirs, const CompareOptions& opt, const std::string& csv) {
  if (dirs.size() < 2) throw Error("d500 compare needs a base run and at least one other (d500 compare BASE OTHER...)");
  const std::vector<std::string> others(dirs.begin() + 1, dirs.end());
  const auto cmp = compare_runs(dirs.front(), others, opt);
  std::cout << comparison_text(cmp, opt);
  if (!csv.empty()) {
    write_file_atomic(csv, comparison_csv(cmp));
    std::cout << "wrote " << csv << "\n";
  }
  int regressions = 0;
  for (const auto& rc : cmp) regressions += rc.count(Change::Regression);
  if (regressions) {
    std::cout << "compare: " << regressions << " regression(s) beyond the threshold: exit status 4\n";
    return 4;
  }
  return 0;
}

int cmd_check(const std::vector<std::string>& files) {
  int bad = 0;
  for (const auto& f : files) {
    CheckResult r = check_file_guarded(f);
    if (r.ok()) std::cout << f << ": ok (" << r.summary << ")\n";
    for (const auto& p : r.problems) std::cout << p << "\n";
    bad += !r.ok();
  }
  if (bad) std::cout << bad << " of " << files.size() << " file(s) have problems\n";
  return bad ? 1 : 0;
}

int cmd_backends() {
  for (const auto& b : all_backends()) {
    std::vector<std::string> wl;
    for (const auto& w : builtin_workloads().all())
      if (w.backends.count(b.name)) wl.push_back(w.name);
    // A backend in a module is loaded to be listed: what `d500 backends` says is what a job gets.
    const std::string load_error = b.built ? load_backend(b.name) : "";
    std::cout << (b.built ? "  " : "- ") << b.name << ": " << b.description << "\n      "
              << (!b.built             ? "not in this build: " + b.not_built_reason
                  : load_error.empty() ? "version: " + b.version()
                                       : "in this build, but its module did not load: " + load_error)
              << "\n";
    if (b.built && !b.module.empty()) std::cout << "      module: " << b.module << " (loaded at first use)\n";
    if (b.built) std::cout << "      workloads: " << (wl.empty() ? "-" : join(wl, ", ")) << "\n";
    if (!load_error.empty()) continue;
    if (b.built && b.no_device)
      if (const std::string why = b.no_device(); !why.empty())
        std::cout << "      built, no CUDA device: its points fail at setup on this host (" << why << ")\n";
  }
  return 0;
}

// "integer, default 1, 1 to 4096" / "string, required, one of a, b": a parameter as a user must write it.
// A key's valid values: named sets can be long, so the first `shown`, and how many in all.
std::string choices_text(const ParamSpec& p, std::size_t shown, const std::string& quote) {
  std::vector<std::string> first;
  for (std::size_t i = 0; i < p.choices.size() && i < shown; ++i)
    first.push_back(quote + canonical(Value{p.choices[i]}) + quote);
  return join(first, ", ") +
         (p.choices.size() > shown ? ", ... (" + std::to_string(p.choices.size()) + " in all)" : "");
}

std::string param_text(const ParamSpec& p) {
  std::string o =
      std::string(type_name(p.type)) + (p.dflt ? ", default " + canonical(*p.dflt) : std::string(", required"));
  if (p.type == ValueType::Int && p.min < p.max) o += ", " + std::to_string(p.min) + " to " + std::to_string(p.max);
  if (!p.choices.empty()) o += ", one of " + choices_text(p, 6, "");
  return o;
}

int cmd_workloads() {
  for (const auto& w : builtin_workloads().all()) {
    std::vector<std::string> be;
    for (const auto& [b, f] : w.backends) be.push_back(b);
    std::cout << w.name << " (level " << w.level << "): " << w.description << "\n  backends: " << join(be, ", ")
              << "\n";
    for (const auto& p : w.params) std::cout << "  " << p.name << " (" << param_text(p) << "): " << p.help << "\n";
  }
  std::cout << "every workload also takes:\n";
  for (const auto& p : common_params()) std::cout << "  " << p.name << " (" << param_text(p) << "): " << p.help << "\n";
  return 0;
}

// One row per key: its type, default, what values are valid, what it means.
void markdown_params(const std::vector<ParamSpec>& params) {
  Table t{{"key", "type", "default", "valid values", "meaning"}};
  for (const auto& p : params) {
    std::string valid = "any";
    if (p.type == ValueType::Int && p.min < p.max) valid = std::to_string(p.min) + " to " + std::to_string(p.max);
    if (!p.choices.empty()) valid = choices_text(p, 8, "`");
    t.push_back(
        {"`" + p.name + "`", type_name(p.type), p.dflt ? "`" + canonical(*p.dflt) + "`" : "required", valid, p.help});
  }
  std::ostringstream o;
  markdown_table(o, t);
  std::cout << o.str();
}

// The campaign reference: every workload's keys and every key all take, from the tables the
// planner checks campaigns against (workloads' parameters, backends' settings), so that it cannot
// drift from them. Independent of the build: which backends run a workload is `d500 workloads`'.
int cmd_workloads_markdown() {
  std::cout << "# Campaign reference: the keys of each workload\n\n"
               "<!-- Generated by `d500 workloads --markdown` from the workloads' parameter tables and the backends' "
               "own settings; the CTest campaign_reference fails when this file differs from it. Regenerate it with "
               "`build/d500 workloads --markdown > docs/campaign-reference.md`. -->\n\n"
               "A point's keys go in a campaign's `[fixed]` table or `[axes]` (docs/campaigns.md says how a file is "
               "laid out). The planner checks each value against the rows below, names the file, line and key of a "
               "wrong one and what would be valid, and refuses a key no row lists (a typo's nearest key is "
               "suggested). A key for some backends only (`math`, `cudnn_api`, `library`, ...) says which; "
               "`d500 workloads` lists the backends this build runs each workload on.\n\n"
               "## Every workload\n\n";
  markdown_params(common_params());
  for (const auto& w : builtin_workloads().all()) {
    std::cout << "## " << w.name << " (level " << w.level << ")\n\n" << w.description << ".\n\n";
    markdown_params(w.params);
  }
  return 0;
}

int cmd_networks() {
  std::cout
      << "built-in networks (weights seeded per network; FLOPs count multiply-adds twice, per sample, at batch 1):\n";
  for (const auto& n : builtin_networks()) {
    ModelFacts model;
    const NetworkFacts f = network_facts(load_builtin_network(n.name, LoadOptions{1, {}}, &model));
    const int written = model.nodes;
    const std::string folded =
        written == f.nodes ? ""
                           : " (" + std::to_string(written) + " in the ONNX file; its shape computations fold at load)";
    std::cout << "  " << n.name << ": " << n.description << "\n      input " << n.input << "; "
              << fmt_sig(static_cast<double>(f.params) / 1e6, 4) << " M parameters (" << fmt_bytes(f.weight_bytes)
              << " of weights); " << fmt_sig(f.forward_flops / 1e9, 4) << " GFLOP forward, "
              << fmt_sig(f.training_flops / 1e9, 4) << " GFLOP a training step; " << f.nodes << " nodes" << folded
              << "\n      operators: " << join(f.ops, ", ") << "\n";
  }
  std::cout
      << "A campaign names one with network = \"NAME\", or the path of an .onnx file. d500 runs these operators (opsets "
      << kMinOpset << "-" << kMaxOpset << "; older models are upgraded by ONNX's version converter):\n  "
      << supported_ops_text() << "\n";
  return 0;
}

int cmd_export_network(const std::string& name, const std::string& out) {
  if (out.empty()) throw Error("export-network: give the file to write with -o FILE.onnx");
  refuse_control_chars(out, "the output file (-o)");
  const std::string bytes = builtin_network_onnx(name);
  write_file_atomic(out, bytes);
  std::cout << "wrote " << out << " (" << fmt_bytes(static_cast<std::int64_t>(bytes.size())) << ", ONNX opset "
            << kMaxOpset << ", batch axis symbolic 'N')\n";
  return 0;
}

int cmd_onnx_test(const std::vector<std::string>& dirs, const std::string& backend, int threads) {
  const BackendInfo* b = find_backend(backend);
  std::vector<std::string> names;
  for (const auto& x : all_backends()) names.push_back(x.name);
  if (!b)
    throw Error("--backend: no backend '" + backend + "'" + did_you_mean(backend, names) +
                " (backends: " + join(names, ", ") + ")");
  if (!b->built) throw Error("--backend " + backend + ": " + b->not_built_reason);
  if (!b->make_node_kernel && !b->make_graph_runner && backend != "reference")
    throw Error("--backend " + backend + " runs no networks (level 1)");
  const ConformanceSummary s = run_conformance(dirs, *b, std::cout, threads);
  return s.failed ? 1 : 0;
}

}  // namespace

// OpenBLAS (linked into d500core) starts its thread pool when it is loaded, before main, unless
// OPENBLAS_NUM_THREADS says 1. This process plans, reads and writes files and forks readers; a
// pool of idle BLAS threads only hurts it: under a tight `ulimit -v` they retry failed
// allocations forever, and OpenBLAS's fork and exit hooks wait on them (d500 report and d500 run
// then never ended). So the CLI starts itself once more with one BLAS thread (25 ms), and gives
// the jobs it starts the user's own setting back.
void start_with_one_blas_thread(char** argv) {
  constexpr const char* kMark = "D500_CLI_USER_OPENBLAS_NUM_THREADS";
  if (const char* user = std::getenv(kMark)) {  // the second start: the user's setting back
    if (user[0] == '=')
      setenv("OPENBLAS_NUM_THREADS", user + 1, 1);
    else
      unsetenv("OPENBLAS_NUM_THREADS");
    unsetenv(kMark);
    return;
  }
  const char* blas = std::getenv("OPENBLAS_NUM_THREADS");
  if (blas && std::string(blas) == "1") return;
  setenv(kMark, blas ? (std::string("=") + blas).c_str() : "-", 1);
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  execv("/proc/self/exe", argv);
  unsetenv(kMark);  // no /proc: go on as started
  if (blas)
    setenv("OPENBLAS_NUM_THREADS", blas, 1);
  else
    unsetenv("OPENBLAS_NUM_THREADS");
}

namespace {

// A mistyped subcommand gets the nearest one, as ninja does for its tools: 2 when refused, else 0.
int refuse_unknown_subcommand(int argc, char** argv) {
  if (argc <= 1 || argv[1][0] == '-') return 0;
  std::vector<std::string> names;
  for (const auto& s : kSubcommands) names.push_back(s.name);
  std::string given = argv[1];
  if (std::find(names.begin(), names.end(), given) != names.end()) return 0;
  std::cerr << "d500: error: unknown subcommand '" << given << "'" << did_you_mean(given, names)
            << " (subcommands: " << join(names, ", ") << ")\n";
  return 2;
}

// Every subcommand's arguments and options, as the command line gave them.
struct Args {
  std::string campaign, dir, out;
  bool dry_run = false, rerun = false, force = false, list_points = false, resume = false, retry_failed = false,
       wide = false, markdown = false;
  double confidence = 0.95;
  std::uint64_t seed = 1;
  std::vector<std::string> files, compare_dirs, test_dirs;
  std::string export_format, export_dir, compare_csv, test_backend = "reference", export_name, export_out;
  CompareOptions compare_opt;
  int test_threads = 1;
};

void add_options(std::map<std::string, CLI::App*>& sub, Args& a) {
  sub["plan"]->add_option("campaign", a.campaign, "campaign file (TOML)")->required();
  sub["plan"]->add_option("-o,--output", a.out, "run directory to create (default runs/<campaign name>)");
  sub["plan"]->add_flag("-n,--dry-run", a.dry_run, "print the plan, write nothing");
  sub["plan"]->add_flag("--force", a.force, "plan even over the campaign's node-hour budget or a node's memory");
  sub["plan"]->add_flag("--list", a.list_points,
                        "list every point by job (a plan of more than 60 points is otherwise summarised)");
  sub["run"]->add_option("dir", a.dir, "run directory written by d500 plan")->required();
  sub["run"]->add_flag("--rerun", a.rerun, "also run jobs that completed before (earlier results are kept)");
  sub["report"]->add_option("dir", a.dir, "run directory")->required();
  sub["submit"]->add_option("dir", a.dir, "run directory written by d500 plan (Slurm template)")->required();
  sub["submit"]->add_flag("--resume", a.resume, "submit only points neither complete nor queued or running");
  sub["submit"]->add_flag(
      "--retry-failed", a.retry_failed,
      "with --resume: submit again jobs that failed more than max_retries times (once their cause is fixed)");
  sub["status"]->add_option("dir", a.dir, "run directory")->required();
  sub["cancel"]->add_option("dir", a.dir, "run directory")->required();
  sub["check"]->add_option("files", a.files, "results files (.h5)")->required();
  sub["export"]->add_option("format", a.export_format, "mllog")->required()->check(CLI::IsMember({"mllog"}));
  sub["export"]->add_option("dir", a.dir, "run directory")->required();
  sub["export"]->add_option("-o,--output", a.export_dir, "where to write the logs (default DIR/mllog)");
  sub["report"]->add_option("--confidence", a.confidence, "confidence level of the intervals (default 0.95)");
  sub["report"]->add_option("--seed", a.seed, "seed of the bootstrap resampling (default 1)");
  sub["report"]->add_flag("--wide", a.wide,
                          "print every column of every table (by default the terminal output fits 120 columns)");
  sub["compare"]
      ->add_option("runs", a.compare_dirs, "run directories: the base first, then the runs compared with it")
      ->required();
  sub["compare"]->add_option("--threshold", a.compare_opt.threshold,
                             "smallest change that counts as a regression or improvement, a fraction (default 0.05)");
  sub["compare"]->add_option("--confidence", a.compare_opt.confidence,
                             "confidence level of the intervals (default 0.95)");
  sub["compare"]->add_option("--seed", a.compare_opt.seed, "seed of the bootstrap resampling (default 1)");
  sub["compare"]->add_option("--csv", a.compare_csv, "also write every matched point's comparison to this CSV file");
  sub["onnx-test"]
      ->add_option("dirs", a.test_dirs,
                   "case directories, or directories of them (e.g. /usr/share/libonnx-testdata/data/node)")
      ->required();
  sub["onnx-test"]->add_option("--backend", a.test_backend,
                               "backend whose kernels (or own executor) run the cases (default reference)");
  sub["onnx-test"]->add_option("--threads", a.test_threads, "threads for the backend's library (default 1)");
  sub["export-network"]->add_option("name", a.export_name, "a built-in network (see d500 networks)")->required();
  sub["export-network"]->add_option("-o,--output", a.export_out, "the .onnx file to write")->required();
  sub["workloads"]->add_flag("--markdown", a.markdown,
                             "print the campaign reference instead (docs/campaign-reference.md is this output)");
}

// Runs the subcommand the command line named; its exit status.
int dispatch(std::map<std::string, CLI::App*>& sub, const Args& a) {
  if (sub["plan"]->parsed()) return cmd_plan(a.campaign, a.out, a.dry_run, a.force, a.list_points);
  if (sub["run"]->parsed()) return cmd_run(a.dir, a.rerun);
  if (sub["report"]->parsed()) return cmd_report(a.dir, a.confidence, a.seed, a.wide);
  if (sub["check"]->parsed()) return cmd_check(a.files);
  if (sub["compare"]->parsed()) return cmd_compare(a.compare_dirs, a.compare_opt, a.compare_csv);
  if (sub["export"]->parsed()) {
    const auto written =
        export_mllogs(a.dir, a.export_dir.empty() ? (fs::path(a.dir) / "mllog").string() : a.export_dir);
    std::cout << "wrote " << written.size() << " MLPerf-style log(s), one per training run: " << join(written, ", ")
              << "\n";
    return 0;
  }
  if (sub["submit"]->parsed()) {
    slurm_submit(a.dir, SubmitOptions{a.resume, a.retry_failed}, std::cout);
    return 0;
  }
  if (sub["status"]->parsed()) {
    // A local plan has no Slurm jobs: its state is its lock, its jobs' status files and logs.
    if (RunLayout(a.dir).launcher() == "local") return local_status(a.dir, std::cout), 0;
    return slurm_status(a.dir, std::cout), 0;
  }
  if (sub["cancel"]->parsed()) return slurm_cancel(a.dir, std::cout), 0;
  if (sub["backends"]->parsed()) return cmd_backends();
  if (sub["workloads"]->parsed()) return a.markdown ? cmd_workloads_markdown() : cmd_workloads();
  if (sub["networks"]->parsed()) return cmd_networks();
  if (sub["export-network"]->parsed()) return cmd_export_network(a.export_name, a.export_out);
  if (sub["onnx-test"]->parsed()) return cmd_onnx_test(a.test_dirs, a.test_backend, a.test_threads);
  if (sub["version"]->parsed()) {
    std::cout << "d500 " << kVersion << " (" << kGitCommit << ")\n";
    return 0;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  start_with_one_blas_thread(argv);
  if (const int refused = refuse_unknown_subcommand(argc, argv)) return refused;
  CLI::App app{"d500: deep-learning benchmark campaigns for HPC systems"};
  const std::string version = std::string("d500 ") + kVersion + " (" + kGitCommit + ")";
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", version);
  std::map<std::string, CLI::App*> sub;
  for (const auto& s : kSubcommands) sub[s.name] = app.add_subcommand(s.name, s.help);
  Args args;
  add_options(sub, args);
  CLI11_PARSE(app, argc, argv);
  if (app.get_subcommands().empty()) {  // plain `d500`: what it is and what it can do
    std::cout << version << "\n" << app.help();
    return 0;
  }
  try {
    return dispatch(sub, args);
  } catch (const Error& e) {
    std::cerr << "d500: error: " << terminal_safe(e.what()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "d500: internal error: " << terminal_safe(e.what()) << "\n";
    return 3;
  }
}
