#include "store/reader.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"
#include "store/h5.hpp"
#include "store/schema.hpp"

namespace d500 {

namespace {

herr_t collect_names(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

herr_t collect_attr_names(hid_t, const char* name, const H5A_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

// Schema version 1 had no `phase` column: such rows are read without it (phase 0, op).
bool has_phase_column(hid_t point, const std::string& what) {
  h5::Handle d(h5::check(H5Dopen2(point, "samples", H5P_DEFAULT), "H5Dopen2", what + "/samples"), H5Dclose);
  h5::Handle t(h5::check(H5Dget_type(d), "H5Dget_type", what + "/samples"), H5Tclose);
  return H5Tget_member_index(t, "phase") >= 0;
}

// A count a file states (ranks, warm-ups, repetitions): what sizes the reader's and the
// summary's buffers, so never taken unchecked.
constexpr std::int64_t kMaxCount = 1'000'000'000;
constexpr std::int64_t kMaxRanks = 1 << 20;  // beyond the largest machines' rank counts

int bounded_count(std::int64_t v, const std::string& what, const char* name, std::int64_t max = kMaxCount) {
  if (v < 0 || v > max)
    throw Error(what + ": damaged: its `" + name + "` attribute is " + std::to_string(v) + ", outside 0.." +
                std::to_string(max));
  return static_cast<int>(v);
}

// A point's counts against its data: every sample of a rank the job had and of a repetition it
// states, warm-ups flagged as such; a complete point holds the warm-ups and repetitions it
// states (the worker writes the repetitions it ran over the planned ones when it stops early).
// A training point still running has run as many steps as it has: its count is written at its
// end (as store/check.cpp reads it).
void check_counts(const PointResult& p, int ranks, const std::string& what) {
  const bool open_ended = p.level >= 2 && p.outcome == Outcome::Incomplete;
  const std::int64_t total = std::int64_t{p.warmups} + p.repetitions;
  std::int32_t last = -1;
  for (std::size_t i = 0; i < p.samples.size(); ++i) {
    const Sample& s = p.samples[i];
    if (const std::string why = sample_count_problem(s, ranks, p.warmups, p.repetitions, open_ended); !why.empty())
      throw Error(what + ": damaged: sample row " + std::to_string(i) + ": " + why +
                  " (the point's ranks = " + std::to_string(ranks) + ", warmups = " + std::to_string(p.warmups) +
                  ", repetitions = " + std::to_string(p.repetitions) + ")");
    last = std::max(last, s.rep);
  }
  if (p.outcome == Outcome::Complete && !p.samples.empty() && last + 1 != total)
    throw Error(what + ": damaged: it says complete with warmups = " + std::to_string(p.warmups) +
                " and repetitions = " + std::to_string(p.repetitions) + ", but its samples end at repetition " +
                std::to_string(last + 1) + " of " + std::to_string(total));
}

}  // namespace

std::string sample_count_problem(const Sample& s, std::int64_t ranks, std::int64_t warmups, std::int64_t repetitions,
                                 bool open_ended) {
  const std::int64_t total = warmups + repetitions;
  if (s.rank < 0 || s.rank >= ranks)
    return "rank " + std::to_string(s.rank) + " outside 0.." + std::to_string(ranks - 1);
  if (s.rep < 0 || (s.rep >= total && !open_ended))
    return "rep " + std::to_string(s.rep) + " outside 0.." + std::to_string(total - 1);
  if ((s.rep < warmups) != (s.warmup != 0))
    return "rep " + std::to_string(s.rep) + " has warmup = " + std::to_string(s.warmup);
  return "";
}

namespace {

PointResult read_point(hid_t file, const std::string& id, const std::string& path, int ranks) {
  const std::string what = path + ":/points/" + id;
  h5::Handle g(h5::check(H5Gopen2(file, ("/points/" + id).c_str(), H5P_DEFAULT), "H5Gopen2", what), H5Gclose);
  PointResult p;
  p.id = id;
  p.canonical = h5::read_attr_string(g, "canonical", what);
  p.status = h5::read_attr_string(g, "status", what);
  const auto outcome = outcome_from_file_status(p.status);
  if (!outcome)
    throw Error(what + ": status \"" + p.status +
                "\" is not one this d500 knows (running, complete, "
                "failed-validation, backend-failed): damaged, or written by a newer d500");
  p.outcome = *outcome;
  p.status_reason = h5::read_attr_string(g, "status_reason", what);
  p.rate_unit = h5::read_attr_string(g, "rate_unit", what);
  p.backend_version = h5::read_attr_string(g, "backend_version", what);
  p.index = static_cast<int>(h5::read_attr_int(g, "index", what));
  p.level = static_cast<int>(h5::read_attr_int(g, "level", what));
  p.warmups = bounded_count(h5::read_attr_int(g, "warmups", what), what, "warmups");
  p.repetitions = bounded_count(h5::read_attr_int(g, "repetitions", what), what, "repetitions");
  p.work_flops = h5::read_attr_int(g, "work_flops", what);
  p.work_bytes = h5::read_attr_int(g, "work_bytes", what);
  if (h5::has_attr(g, "seconds")) p.seconds = h5::read_attr_double(g, "seconds", what);
  if (h5::has_attr(g, "peak_rss_bytes")) p.peak_rss_bytes = h5::read_attr_int(g, "peak_rss_bytes", what);
  if (h5::has_attr(g, "memory_estimate_bytes"))
    p.memory_estimate_bytes = h5::read_attr_int(g, "memory_estimate_bytes", what);
  if (h5::has_attr(g, "threads_oversubscribed"))
    p.threads_oversubscribed = h5::read_attr_int(g, "threads_oversubscribed", what) != 0;
  if (h5::has_attr(g, "scaling")) p.scaling = h5::read_attr_string(g, "scaling", what);
  if (h5::has_attr(g, "scaling_note")) p.scaling_note = h5::read_attr_string(g, "scaling_note", what);
  if (h5::has_attr(g, "validation_status")) {
    p.validation_status = h5::read_attr_string(g, "validation_status", what);
    p.validation_method = h5::read_attr_string(g, "validation_method", what);
    p.validation_max_rel_error = h5::read_attr_double(g, "validation_max_rel_error", what);
    p.validation_tolerance = h5::read_attr_double(g, "validation_tolerance", what);
  }
  std::vector<std::string> attrs;
  h5::check(H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attr_names, &attrs), "H5Aiterate2", what);
  for (const auto& n : attrs) {
    if (n.rfind("param.", 0) == 0) p.params[n.substr(6)] = h5::read_attr_value(g, n, what);
    if (n.rfind("unset.", 0) == 0) p.unset[n.substr(6)] = h5::read_attr_string(g, n, what);
    if (n.rfind("network.", 0) == 0 || n.rfind("memory.", 0) == 0 || n.rfind("executor", 0) == 0 ||
        n.rfind("train.", 0) == 0 || n.rfind("dist.", 0) == 0 || n.rfind("comm.", 0) == 0 ||
        n.rfind("repetitions.", 0) == 0 || n.rfind("machine.", 0) == 0 || n.rfind("device.", 0) == 0 ||
        n.rfind("library.", 0) == 0 || n.rfind("cuda.", 0) == 0 || n.rfind("cudnn.", 0) == 0 ||
        n.rfind("nccl.", 0) == 0 || n.rfind("validation.", 0) == 0 || n == "ranks_differ")
      p.facts[n] = h5::read_attr_value(g, n, what);
  }
  if (h5::has_attr(g, "work_items")) p.work_items = h5::read_attr_int(g, "work_items", what);
  if (h5::has_attr(g, "tta_target")) {
    p.tta_target = h5::read_attr_double(g, "tta_target", what);
    p.tta_budget_s = h5::read_attr_double(g, "tta_budget_s", what);
    p.eval_interval_steps = h5::read_attr_int(g, "eval_interval_steps", what);
  }
  if (h5::has_attr(g, "checksum")) {
    const std::string stored = h5::read_attr_string(g, "checksum", what);
    const std::string computed = h5::attributes_checksum(h5::read_all_attributes(g, what));
    if (stored != computed)
      throw Error(what + ": damaged: the point's attributes do not match their checksum (stored " + stored +
                  ", computed " + computed + ")");
  }
  if (H5Lexists(g, "events", H5P_DEFAULT) > 0) p.events = h5::read_rows<Event>(g, "events", h5::event_mem_type(), what);
  if (H5Lexists(g, "samples", H5P_DEFAULT) > 0)
    p.samples = h5::read_rows<Sample>(g, "samples", h5::sample_mem_type(has_phase_column(g, what)), what);
  if (H5Lexists(g, "steps", H5P_DEFAULT) > 0) {
    auto field = [](const char* c, std::size_t n) { return std::string(c, strnlen(c, n)); };
    for (const auto& r : h5::read_rows<h5::StepRow>(g, "steps", h5::step_mem_type(), what))
      p.steps.push_back(StepInfo{field(r.name, sizeof r.name), field(r.op, sizeof r.op),
                                 field(r.direction, sizeof r.direction), field(r.impl, sizeof r.impl), r.flops});
    for (const auto& r : h5::read_rows<h5::StepTimeRow>(g, "step_times", h5::step_time_mem_type(), what))
      p.step_times.push_back(PointResult::StepTime{r.rank, r.rep, r.step, r.ns});
  }
  check_counts(p, ranks, what);
  return p;
}

}  // namespace

JobStatus read_job_status(const std::string& path) {
  h5::init();
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(path + ": not an HDF5 file (truncated, or not a d500 results file)");
  h5::Handle f(
      h5::check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "H5Fopen", path + " (truncated or damaged?)"),
      H5Fclose);
  JobStatus s;
  s.status = h5::read_attr_string(f, "status", path);
  if (h5::has_attr(f, "writer")) s.writer = h5::read_attr_string(f, "writer", path);
  return s;
}

JobResult read_job_file(const std::string& path) {
  h5::init();
  if (!std::filesystem::exists(path)) throw Error(path + ": no such file");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(path + ": not an HDF5 file (truncated, or not a d500 results file)");
  h5::Handle f(
      h5::check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "H5Fopen", path + " (truncated or damaged?)"),
      H5Fclose);
  JobResult r;
  r.path = path;
  if (!h5::has_attr(f, "schema") || h5::read_attr_string(f, "schema", path) != schema::kName)
    throw Error(path + ": not a d500 results file (no schema = \"" + std::string(schema::kName) + "\" attribute)");
  r.schema_version = h5::read_attr_int(f, "schema_version", path);
  if (r.schema_version > schema::kVersion)
    throw Error(path + ": written with results schema version " + std::to_string(r.schema_version) +
                ", newer than this d500 reads (" + std::to_string(schema::kVersion) + "); use a newer d500");
  r.job_id = h5::read_attr_string(f, "job_id", path);
  r.campaign = h5::read_attr_string(f, "campaign", path);
  r.campaign_hash = h5::read_attr_string(f, "campaign_hash", path);
  r.status = h5::read_attr_string(f, "status", path);
  r.d500_version = h5::read_attr_string(f, "d500_version", path);
  r.d500_commit = h5::read_attr_string(f, "d500_commit", path);
  r.created_utc = h5::read_attr_string(f, "created_utc", path);
  r.ranks = bounded_count(h5::read_attr_int(f, "ranks", path), path, "ranks", kMaxRanks);
  if (h5::has_attr(f, "oversubscribed")) r.oversubscribed = h5::read_attr_int(f, "oversubscribed", path) != 0;

  if (H5Lexists(f, "/env", H5P_DEFAULT) > 0) {
    h5::Handle g(h5::check(H5Gopen2(f, "/env", H5P_DEFAULT), "H5Gopen2", path + ":/env"), H5Gclose);
    for (const auto& [name, v] : h5::read_all_attributes(g, path + ":/env"))
      if (const auto* s = std::get_if<std::string>(&v)) r.env[name] = *s;
  }
  if (H5Lexists(f, "/env/hosts", H5P_DEFAULT) > 0) {
    h5::Handle d(h5::check(H5Dopen2(f, "/env/hosts", H5P_DEFAULT), "H5Dopen2", path + ":/env/hosts"), H5Dclose);
    h5::Handle t(h5::check(H5Dget_type(d), "H5Dget_type", path), H5Tclose);
    const std::size_t len = H5Tget_size(t);
    h5::Handle space(h5::check(H5Dget_space(d), "H5Dget_space", path + ":/env/hosts"), H5Sclose);
    const hssize_t n = H5Sget_simple_extent_npoints(space);
    // Sized from the dataset itself, after checking it against `ranks`: never from an attribute.
    if (n != r.ranks || len == 0 || len > 4096 || H5Tis_variable_str(t) > 0)
      throw Error(path + ":/env/hosts: damaged: " + std::to_string(n) + " names of " + std::to_string(len) +
                  " bytes, for ranks = " + std::to_string(r.ranks));
    std::vector<char> buf(len * static_cast<std::size_t>(r.ranks) + 1, 0);
    h5::check(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), "H5Dread", path + ":/env/hosts");
    for (int i = 0; i < r.ranks; ++i)
      r.hosts.emplace_back(buf.data() + static_cast<std::size_t>(i) * len,
                           strnlen(buf.data() + static_cast<std::size_t>(i) * len, len));
  }

  std::vector<std::string> ids;
  if (H5Lexists(f, "/points", H5P_DEFAULT) > 0) {
    h5::Handle g(h5::check(H5Gopen2(f, "/points", H5P_DEFAULT), "H5Gopen2", path + ":/points"), H5Gclose);
    h5::check(H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_names, &ids), "H5Literate", path);
  }
  for (const auto& id : ids) r.points.push_back(read_point(f, id, path, r.ranks));
  std::sort(r.points.begin(), r.points.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  return r;
}

}  // namespace d500
