#include "analysis/mllog.hpp"

#include <cmath>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "analysis/format.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "rundir/state.hpp"

namespace fs = std::filesystem;

namespace d500 {

namespace {

// "2026-11-23T20:30:26Z" as milliseconds since the epoch (0 when it does not parse).
long long epoch_ms(const std::string& utc) {
  std::tm tm{};
  std::istringstream in(utc);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  return in.fail() ? 0 : static_cast<long long>(timegm(&tm)) * 1000;
}

// A parameter as a JSON value: a string quoted, a number as it is ("null" when absent).
std::string param_json(const PointResult& p, const std::string& name) {
  auto it = p.params.find(name);
  if (it == p.params.end()) return "null";
  if (const auto* s = std::get_if<std::string>(&it->second)) return js(*s);
  return canonical(it->second);
}

class Log {
 public:
  explicit Log(long long t0) : t0_(t0) {}
  // One line; `value` and `metadata` are JSON text.
  void line(double training_s, const char* type, const char* key, const std::string& value,
            const std::string& metadata = "{}") {
    o_ << ":::MLLOG {\"namespace\": \"\", \"time_ms\": " << t0_ + std::llround(training_s * 1e3)
       << ", \"event_type\": \"" << type << "\", \"key\": \"" << key << "\", \"value\": " << value
       << ", \"metadata\": " << metadata << "}\n";
  }
  void event(const char* key, const std::string& value) { line(0, "POINT_IN_TIME", key, value); }
  std::string text() const { return o_.str(); }

 private:
  long long t0_;
  std::ostringstream o_;
};

}  // namespace

std::string mllog_text(const JobResult& job, const PointResult& p) {
  Log log(epoch_ms(job.created_utc));
  const auto fact = [&](const char* name) -> const Value* {
    auto it = p.facts.find(name);
    return it == p.facts.end() ? nullptr : &it->second;
  };
  const auto number = [&](const char* name, double dflt) {
    const Value* v = fact(name);
    if (!v) return dflt;
    if (std::holds_alternative<double>(*v)) return std::get<double>(*v);
    if (std::holds_alternative<std::int64_t>(*v)) return static_cast<double>(std::get<std::int64_t>(*v));
    return dflt;
  };
  // Epochs per step, from the run's own count of both (the sampler's batches per epoch).
  const double steps = number("train.steps", 0), epochs = number("train.epochs", 0);
  const double epochs_per_step = steps > 0 ? epochs / steps : 0;
  const auto batch = p.params.find("batch");
  const long long per_rank = batch != p.params.end() && std::holds_alternative<std::int64_t>(batch->second)
                                 ? std::get<std::int64_t>(batch->second)
                                 : 0;
  log.event("submission_benchmark", param_json(p, "network"));
  log.event("submission_org", js("d500"));
  log.event("submission_platform", js(join(job.hosts, ",")));
  log.event("submission_status", js("research"));
  log.event("submission_division", js("open"));
  log.event("seed", param_json(p, "seed"));
  log.event("global_batch_size", std::to_string(per_rank * std::max(1, job.ranks)));
  log.event("gradient_accumulation_steps", "1");
  log.event("opt_name", param_json(p, "optimizer"));
  log.event("opt_base_learning_rate", param_json(p, "lr"));
  log.event("opt_weight_decay", param_json(p, "weight_decay"));
  log.event("opt_learning_rate_warmup_steps", param_json(p, "warmup_steps"));
  if (const Value* d = fact("train.dataset"); d && std::holds_alternative<std::string>(*d))
    log.event("d500_train_dataset", js(std::get<std::string>(*d)));
  log.event("eval_samples", param_json(p, "eval_samples"));
  log.event("d500_point", js(p.id + " " + p.canonical));
  log.line(0, "INTERVAL_START", "run_start", "null");
  // Rank 0's curve (every rank evaluates its own model at level 2; MLPerf logs one).
  const double target = p.tta_target, budget = p.tta_budget_s;
  double stop_s = number("train.training_seconds", 0);
  bool success = false;
  for (const Event& e : p.events) {
    if (e.rank != 0) continue;
    const double t = static_cast<double>(e.time_ns) * 1e-9;
    const std::string meta = "{\"epoch_num\": " + jn(static_cast<double>(e.step) * epochs_per_step) +
                             ", \"step\": " + std::to_string(e.step) + ", \"loss\": " + jn(e.loss) + "}";
    log.line(t, "POINT_IN_TIME", "eval_accuracy", jn(e.accuracy), meta);
    if (target > 0 && e.accuracy >= target && (!(budget > 0) || t <= budget)) {
      success = true;  // MLPerf's run ends at the first evaluation on target
      stop_s = t;
      break;
    }
    stop_s = std::max(stop_s, t);
  }
  // Aborted: no target, a target missed within the budget, or a record the job left unfinished.
  if (p.outcome != Outcome::Complete) success = false;
  log.line(stop_s, "INTERVAL_END", "run_stop", "null",
           std::string("{\"status\": \"") + (success ? "success" : "aborted") + "\"}");
  return log.text();
}

std::vector<std::string> export_mllogs(const std::string& dir, const std::string& out_dir) {
  const RunLayout layout(dir);
  layout.require_plan(dir);
  struct Log {
    std::string id, file, text;
  };
  std::vector<Log> logs;  // every record's; only each point's best is written
  const RunState state = scan_results(layout, [&](const JobResult& j) {
    for (const auto& p : j.points)
      if (p.level >= 2 && !p.events.empty()) logs.push_back({p.id, j.path, mllog_text(j, p)});
  });
  std::vector<std::string> written;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw Error(out_dir + ": cannot create the directory: " + ec.message());
  for (const auto& log : logs) {
    if (state.of(log.id).file != log.file) continue;  // another file holds the point's best record
    const std::string path = (fs::path(out_dir) / (log.id + ".log")).string();
    write_file_atomic(path, log.text);
    written.push_back(path);
  }
  if (written.empty()) throw Error(dir + ": no training run (a level-2 point with evaluations) in its results files");
  return written;
}

}  // namespace d500
