#include "report.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"
#include "store/index.hpp"
#include "store/reader.hpp"

namespace fs = std::filesystem;

namespace d500 {

std::string method_statement(double confidence) {
  int pct = static_cast<int>(confidence * 100 + 0.5);
  return "Each repetition starts after an MPI_Barrier; its cost is the maximum over ranks of the rank's own "
         "duration (end - start, std::chrono::steady_clock). Warm-up repetitions are recorded but excluded; "
         "repetitions missing on some rank are excluded and counted. The summary is the median with an exact, "
         "distribution-free " +
         std::to_string(pct) +
         "% confidence interval from binomial order statistics (none exists for n <= 5). Rates are work / "
         "time (GFLOP/s = flops / s / 1e9; GB/s = bytes / s / 1e9, bytes being the message size per rank for "
         "collectives); the rate interval is the time interval mapped through that same function. No outliers "
         "are removed.";
}

namespace {

struct Planned {
  std::string id, job, canonical;
  int level = 0;
};

std::vector<Planned> read_points_csv(const fs::path& p) {
  std::vector<Planned> out;
  if (!fs::exists(p)) return out;
  std::istringstream in(read_file(p.string()));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    Planned x;
    std::size_t a = line.find(','), b = line.find(',', a + 1), c = line.find(',', b + 1);
    if (c == std::string::npos) continue;
    x.id = line.substr(0, a);
    x.job = line.substr(a + 1, b - a - 1);
    x.level = std::atoi(line.substr(b + 1, c - b - 1).c_str());
    x.canonical = line.substr(c + 1);
    if (x.canonical.size() >= 2 && x.canonical.front() == '"') {
      std::string u;
      for (std::size_t i = 1; i + 1 < x.canonical.size(); ++i) {
        if (x.canonical[i] == '"' && x.canonical[i + 1] == '"') ++i;
        u += x.canonical[i];
      }
      x.canonical = u;
    }
    out.push_back(x);
  }
  return out;
}

int status_rank(const std::string& s) {
  if (s == "complete") return 3;
  if (s == "failed-validation") return 2;
  if (s == "running") return 1;
  return 0;
}

PointRow summarize_point(const PointResult& p, const JobResult& j, double confidence) {
  PointRow r;
  r.id = p.id;
  r.job_id = j.job_id;
  r.file = j.path;
  r.canonical = p.canonical;
  r.params = p.params;
  r.workload = p.params.count("workload") ? canonical(p.params.at("workload")) : "?";
  r.backend = p.params.count("backend") ? canonical(p.params.at("backend")) : "?";
  r.level = p.level;
  r.ranks = j.ranks;
  r.status = p.status == "running" ? "incomplete" : p.status;
  r.status_reason = p.status_reason;
  r.validation_status = p.validation_status;
  r.validation_method = p.validation_method;
  r.validation_max_rel_error = p.validation_max_rel_error;
  r.validation_tolerance = p.validation_tolerance;
  r.rate_unit = p.rate_unit;
  std::set<std::string> hosts(j.hosts.begin(), j.hosts.end());
  r.hosts = join(std::vector<std::string>(hosts.begin(), hosts.end()), " ");

  // Per repetition: the slowest rank's duration, if every rank recorded it.
  std::map<int, std::pair<int, std::int64_t>> reps;  // rep -> (ranks seen, max duration)
  for (const auto& s : p.samples) {
    if (s.warmup) continue;
    auto& e = reps[s.rep];
    e.first += 1;
    e.second = std::max(e.second, s.end_ns - s.start_ns);
  }
  std::set<int> warm;
  for (const auto& s : p.samples)
    if (s.warmup) warm.insert(s.rep);
  r.warmups_excluded = static_cast<int>(warm.size());
  std::vector<double> cost;
  for (const auto& [rep, e] : reps) {
    if (e.first == j.ranks) cost.push_back(static_cast<double>(e.second) * 1e-9);
    else ++r.reps_incomplete;
  }
  r.time = stats::summarize(cost, confidence);
  r.work = static_cast<double>(p.rate_unit == "GFLOP/s" ? p.work_flops : p.work_bytes);
  if (r.time.n > 0 && r.time.median > 0) {
    r.rate = r.work / r.time.median / 1e9;
    if (r.time.has_ci) {
      r.rate_lo = r.work / r.time.hi / 1e9;
      r.rate_hi = r.work / r.time.lo / 1e9;
    }
  }
  return r;
}

std::string fmt_time(double s) {
  if (s >= 1) return fmt_sig(s, 4) + " s";
  if (s >= 1e-3) return fmt_sig(s * 1e3, 4) + " ms";
  return fmt_sig(s * 1e6, 4) + " us";
}

std::string params_text(const PointRow& r) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : r.params)
    if (k != "workload" && k != "backend" && k != "seed" && k != "nodes" && k != "ranks_per_node")
      parts.push_back(k + "=" + canonical(v));
  return join(parts, " ");
}

std::string ci_text(const PointRow& r) {
  if (r.time.n == 0) return "-";
  if (!r.time.has_ci) return "none (n=" + std::to_string(r.time.n) + ")";
  return "[" + fmt_time(r.time.lo) + ", " + fmt_time(r.time.hi) + "]";
}

std::string rate_text(const PointRow& r) {
  if (r.time.n == 0) return "-";
  return fmt_sig(r.rate, 4) + " " + r.rate_unit;
}

std::string rate_ci_text(const PointRow& r) {
  if (!r.time.has_ci) return "-";
  return "[" + fmt_sig(r.rate_lo, 4) + ", " + fmt_sig(r.rate_hi, 4) + "]";
}

std::string validation_text(const PointRow& r) {
  if (r.validation_status == "not-run") return "not run";
  return r.validation_status + " (" + fmt_sig(r.validation_max_rel_error, 2) + ")";
}

std::vector<std::vector<std::string>> table(const Report& rep) {
  std::vector<std::vector<std::string>> t;
  t.push_back({"point", "ranks", "n", "median", std::to_string(static_cast<int>(rep.confidence * 100 + .5)) + "% CI",
               "rate", "rate CI", "validation", "status"});
  for (const auto& r : rep.rows)
    t.push_back({r.workload + ":" + r.backend + " " + params_text(r), std::to_string(r.ranks),
                 std::to_string(r.time.n), r.time.n ? fmt_time(r.time.median) : "-", ci_text(r), rate_text(r),
                 rate_ci_text(r), validation_text(r), r.status});
  return t;
}

}  // namespace

Report analyze_run(const std::string& dir, double confidence) {
  Report rep;
  rep.dir = dir;
  rep.confidence = confidence;
  fs::path d(dir);
  if (!fs::is_directory(d / "results"))
    throw Error(dir + ": not a d500 run directory (no results/); create one with `d500 plan CAMPAIGN -o DIR`");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(d / "results")) {
    std::string name = e.path().filename().string();
    if (name.ends_with(".h5") || name.find(".h5.prev-") != std::string::npos) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());

  // The best record of each point across files: complete beats failed beats incomplete;
  // among equals, the file written last.
  struct Best {
    PointRow row;
    int rank;
    std::string created;
  };
  std::map<std::string, Best> best;
  for (const auto& f : files) {
    JobResult j;
    try {
      j = read_job_file(f);
    } catch (const Error& e) {
      rep.unreadable.push_back(e.what());
      continue;
    }
    rep.files.push_back(f);
    if (rep.campaign.empty()) {
      rep.campaign = j.campaign;
      rep.campaign_hash = j.campaign_hash;
      rep.d500_version = j.d500_version + " (" + j.d500_commit + ")";
    }
    for (const auto& p : j.points) {
      auto it = best.find(p.id);
      int rank = status_rank(p.status);
      if (it == best.end() || rank > it->second.rank || (rank == it->second.rank && j.created_utc >= it->second.created))
        best[p.id] = Best{summarize_point(p, j, confidence), rank, j.created_utc};
    }
  }

  std::vector<Planned> planned = read_points_csv(d / "points.csv");
  std::set<std::string> listed;
  for (const auto& p : planned) {
    listed.insert(p.id);
    auto it = best.find(p.id);
    if (it != best.end()) {
      rep.rows.push_back(it->second.row);
      continue;
    }
    PointRow r;
    r.id = p.id;
    r.job_id = p.job;
    r.canonical = p.canonical;
    r.level = p.level;
    auto colon = p.canonical.find(':'), space = p.canonical.find(' ');
    r.workload = p.canonical.substr(0, colon);
    r.backend = p.canonical.substr(colon + 1, space - colon - 1);
    r.status = "missing";
    r.status_reason = "no results file holds this point (job not run, or killed before it started)";
    r.validation_status = "not-run";
    rep.rows.push_back(r);
  }
  for (const auto& [id, rb] : best)
    if (!listed.count(id)) rep.rows.push_back(rb.row);  // results without a plan listing
  return rep;
}

std::string report_text_table(const Report& rep) {
  auto t = table(rep);
  std::vector<std::size_t> w(t.front().size(), 0);
  for (const auto& row : t)
    for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  std::ostringstream o;
  for (std::size_t k = 0; k < t.size(); ++k) {
    for (std::size_t i = 0; i < t[k].size(); ++i)
      o << t[k][i] << std::string(w[i] - t[k][i].size() + (i + 1 < t[k].size() ? 2 : 0), ' ');
    o << "\n";
    if (k == 0) {
      for (std::size_t i = 0; i < w.size(); ++i) o << std::string(w[i], '-') << (i + 1 < w.size() ? "  " : "");
      o << "\n";
    }
  }
  for (const auto& u : rep.unreadable) o << "unreadable: " << u << "\n";
  return o.str();
}

std::string report_markdown(const Report& rep) {
  std::ostringstream o;
  o << "# d500 report: " << rep.campaign << "\n\n"
    << "- campaign hash: `" << rep.campaign_hash << "`\n- d500: " << rep.d500_version << "\n- files read: "
    << rep.files.size() << "\n\n## Method\n\n" << method_statement(rep.confidence) << "\n\n## Results\n\n";
  auto t = table(rep);
  for (std::size_t k = 0; k < t.size(); ++k) {
    o << "|";
    for (const auto& c : t[k]) o << " " << c << " |";
    o << "\n";
    if (k == 0) {
      o << "|";
      for (std::size_t i = 0; i < t[k].size(); ++i) o << "---|";
      o << "\n";
    }
  }
  bool notes = false;
  for (const auto& r : rep.rows)
    if (r.status != "complete" || r.reps_incomplete) {
      if (!notes) o << "\n## Points needing attention\n\n";
      notes = true;
      o << "- `" << r.canonical << "` (" << r.id << "): " << r.status << (r.status_reason.empty() ? "" : ": " + r.status_reason);
      if (r.reps_incomplete) o << "; " << r.reps_incomplete << " repetitions lacked some rank and were excluded";
      o << "\n";
    }
  if (!rep.unreadable.empty()) {
    o << "\n## Unreadable files\n\n";
    for (const auto& u : rep.unreadable) o << "- " << u << "\n";
  }
  return o.str();
}

std::string report_html(const Report& rep) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>d500 report: "
    << html_escape(rep.campaign) << "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:80em}"
    << "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}"
    << "td:first-child,th:first-child{text-align:left;font-family:monospace}"
    << ".bad{background:#fdd}.warn{background:#ffd}</style></head><body>\n<h1>d500 report: "
    << html_escape(rep.campaign) << "</h1>\n<p>campaign hash <code>" << html_escape(rep.campaign_hash)
    << "</code>; d500 " << html_escape(rep.d500_version) << "; " << rep.files.size() << " files read</p>\n"
    << "<h2>Method</h2>\n<p>" << html_escape(method_statement(rep.confidence)) << "</p>\n<h2>Results</h2>\n<table>\n";
  auto t = table(rep);
  for (std::size_t k = 0; k < t.size(); ++k) {
    std::string cls;
    if (k > 0) {
      const auto& r = rep.rows[k - 1];
      if (r.status == "failed-validation" || r.status == "missing" || r.status == "incomplete") cls = " class=\"bad\"";
      else if (!r.time.has_ci) cls = " class=\"warn\"";
    }
    o << "<tr" << cls << ">";
    for (const auto& c : t[k]) o << (k == 0 ? "<th>" : "<td>") << html_escape(c) << (k == 0 ? "</th>" : "</td>");
    o << "</tr>\n";
  }
  o << "</table>\n";
  if (!rep.unreadable.empty()) {
    o << "<h2>Unreadable files</h2>\n<ul>\n";
    for (const auto& u : rep.unreadable) o << "<li>" << html_escape(u) << "</li>\n";
    o << "</ul>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

std::string report_csv(const Report& rep) {
  std::set<std::string> names;
  for (const auto& r : rep.rows)
    for (const auto& [k, v] : r.params) names.insert(k);
  std::ostringstream o;
  o << "point_id,job_id,canonical,level,workload,backend,ranks";
  for (const auto& n : names) o << ",param_" << n;
  o << ",n,warmups_excluded,reps_incomplete,median_s,ci_lo_s,ci_hi_s,ci_level,ci_coverage,rate_unit,rate_median,"
       "rate_ci_lo,rate_ci_hi,validation_status,validation_max_rel_error,validation_tolerance,status,status_reason,"
       "hosts,file\n";
  auto num = [](double v) { char b[40]; std::snprintf(b, sizeof b, "%.9g", v); return std::string(b); };
  for (const auto& r : rep.rows) {
    o << r.id << "," << r.job_id << "," << csv_field(r.canonical) << "," << r.level << "," << csv_field(r.workload)
      << "," << csv_field(r.backend) << "," << r.ranks;
    for (const auto& n : names) o << "," << (r.params.count(n) ? csv_field(canonical(r.params.at(n))) : "");
    bool has = r.time.n > 0;
    o << "," << r.time.n << "," << r.warmups_excluded << "," << r.reps_incomplete << "," << (has ? num(r.time.median) : "")
      << "," << (r.time.has_ci ? num(r.time.lo) : "") << "," << (r.time.has_ci ? num(r.time.hi) : "") << ","
      << num(rep.confidence) << "," << (r.time.has_ci ? num(r.time.coverage) : "") << "," << r.rate_unit << ","
      << (has ? num(r.rate) : "") << "," << (r.time.has_ci ? num(r.rate_lo) : "") << ","
      << (r.time.has_ci ? num(r.rate_hi) : "") << "," << r.validation_status << ","
      << num(r.validation_max_rel_error) << "," << num(r.validation_tolerance) << "," << r.status << ","
      << csv_field(r.status_reason) << "," << csv_field(r.hosts) << "," << csv_field(r.file) << "\n";
  }
  return o.str();
}

void write_reports(const Report& rep) {
  fs::path d(rep.dir);
  write_file_atomic((d / "report.md").string(), report_markdown(rep));
  write_file_atomic((d / "report.html").string(), report_html(rep));
  write_file_atomic((d / "results.csv").string(), report_csv(rep));
  std::vector<IndexEntry> pts;
  for (const auto& r : rep.rows)
    if (!r.file.empty()) pts.push_back({r.id, r.file});
  write_campaign_index(rep.dir, rep.campaign, rep.campaign_hash, rep.files, pts);
}

}  // namespace d500
