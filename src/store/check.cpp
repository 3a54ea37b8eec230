#include "store/check.hpp"

#include <toml++/toml.h>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "common/error.hpp"
#include "common/text.hpp"
#include "d500/schema_text.hpp"
#include "metrics/metrics.hpp"
#include "metrics/outcome.hpp"
#include "store/checkpoint.hpp"
#include "store/h5.hpp"
#include "store/reader.hpp"
#include "store/schema.hpp"

namespace d500 {
namespace {

const toml::table& description() {
  static const toml::table t =
      toml::parse(std::string_view(schema::kDescriptionToml), std::string_view("hdf5-schema/schema.toml"));
  return t;
}

H5T_class_t class_of(const std::string& type) {
  if (type == "string") return H5T_STRING;
  if (type == "int") return H5T_INTEGER;
  if (type == "float") return H5T_FLOAT;
  return H5T_COMPOUND;
}

// The schema version that added `name` to the table (its `since` list), 1 when not listed.
long added_in(const toml::table* spec_parent, const std::string& name) {
  if (!spec_parent) return 1;
  if (const toml::table* since = (*spec_parent)["since"].as_table()) return (*since)[name].value_or(1L);
  return 1;
}

class Checker {
 public:
  Checker(CheckResult& r, long version = schema::kVersion) : r_(r), version_(version) {}
  void set_version(long v) { version_ = v; }

  void problem(const std::string& where, const std::string& what) {
    r_.problems.push_back(r_.path + (where.empty() ? "" : ":" + where) + ": " + what);
  }

  // Checks the attributes of `obj` listed in `spec` (a table of name = type); returns false
  // when one is missing or of the wrong type.
  // `parent` holds the `since` list: an attribute newer than the file's version may be absent.
  bool attributes(hid_t obj, const std::string& where, const toml::table* spec, bool required,
                  const toml::table* parent = nullptr) {
    if (!spec) return true;
    bool ok = true;
    for (auto&& [k, v] : *spec) {
      std::string name(k.str());
      std::string type = v.value_or(std::string());
      if (!h5::has_attr(obj, name)) {
        if (required && added_in(parent, name) <= version_)
          problem(where, "missing attribute '" + name + "' (" + type + ")"), ok = false;
        continue;
      }
      h5::Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
      h5::Handle t(H5Aget_type(a), H5Tclose);
      if (a < 0 || t < 0 || H5Tget_class(t) != class_of(type))
        problem(where, "attribute '" + name + "' is not of type " + type), ok = false;
    }
    return ok;
  }

  void values(hid_t obj, const std::string& where, const toml::table* spec) {
    if (!spec) return;
    for (auto&& [k, v] : *spec) {
      std::string name(k.str());
      if (!h5::has_attr(obj, name)) continue;
      std::string have;
      try {
        have = h5::read_attr_string(obj, name, where);
      } catch (const Error&) {
        continue;  // the type problem was reported already
      }
      std::vector<std::string> allowed;
      for (auto&& x : *v.as_array()) allowed.push_back(x.value_or(std::string()));
      if (std::find(allowed.begin(), allowed.end(), have) == allowed.end())
        problem(where, "attribute '" + name + "' is \"" + have + "\"; valid: " + join(allowed, ", "));
    }
  }

  // Checks one dataset against its description; returns false if it is unusable.
  bool dataset(hid_t parent, const std::string& name, const std::string& where, const toml::table& spec, long ranks) {
    const bool protect = spec["checksummed_since"].value_or(99L) <= version_;
    bool optional = spec["optional"].value_or(false);
    if (H5Lexists(parent, name.c_str(), H5P_DEFAULT) <= 0) {
      if (!optional) problem(where, "missing dataset '" + name + "'");
      return false;
    }
    h5::Handle d(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), H5Dclose);
    if (d < 0) {
      problem(where, "dataset '" + name + "' cannot be opened (damaged?)");
      return false;
    }
    h5::Handle t(H5Dget_type(d), H5Tclose);
    h5::Handle s(H5Dget_space(d), H5Sclose);
    std::string type = spec["type"].value_or(std::string());
    if (H5Tget_class(t) != class_of(type)) {
      problem(where, "dataset '" + name + "' is not of type " + type);
      return false;
    }
    std::string shape = spec["shape"].value_or(std::string());
    int nd = H5Sget_simple_extent_ndims(s);
    if (shape == "scalar" && H5Sget_simple_extent_type(s) != H5S_SCALAR)
      problem(where, "dataset '" + name + "' is not scalar");
    if (shape == "ranks" && (nd != 1 || H5Sget_simple_extent_npoints(s) != ranks))
      problem(where, "dataset '" + name + "' should have one element per rank (" + std::to_string(ranks) + ")");
    if (shape == "rows" && nd != 1) problem(where, "dataset '" + name + "' should be one-dimensional");
    if (shape.rfind("slots,ranks", 0) == 0) {
      const int want = shape == "slots,ranks" ? 2 : 3;
      hsize_t dims[3] = {0, 0, 0};
      if (nd == want) H5Sget_simple_extent_dims(s, dims, nullptr);
      if (nd != want || dims[0] != 2 || dims[1] != static_cast<hsize_t>(ranks))
        problem(where, "dataset '" + name + "' should be [2, " + std::to_string(ranks) + (want == 3 ? ", n" : "") +
                           "] (two slots, one row per rank)");
    }
    if (protect) {
      h5::Handle dcpl(H5Dget_create_plist(d), H5Pclose);
      if (dcpl < 0 ||
          H5Pget_filter_by_id2(dcpl, H5Z_FILTER_FLETCHER32, nullptr, nullptr, nullptr, 0, nullptr, nullptr) < 0)
        problem(where, "dataset '" + name + "' is not protected by the Fletcher-32 checksum filter");
    }
    if (const toml::table* fields = spec["fields"].as_table()) {
      for (auto&& [k, v] : *fields) {
        std::string f(k.str());
        int idx = H5Tget_member_index(t, f.c_str());
        if (idx < 0 && added_in(&spec, f) > version_) continue;  // not in this file's version
        if (idx < 0) {
          problem(where, "dataset '" + name + "' lacks field '" + f + "'");
          return false;
        }
        if (H5Tget_member_class(t, static_cast<unsigned>(idx)) != class_of(v.value_or(std::string()))) {
          problem(where, "field '" + f + "' of '" + name + "' is not of type " + v.value_or(std::string()));
          return false;
        }
      }
    }
    return true;
  }

  // A training point that is still running (levels 2, 3) has as many steps as it has run: its
  // `repetitions` is written when it ends.
  void samples(hid_t g, const std::string& where, long ranks, long warmups, long reps, const std::string& status,
               bool training) {
    const bool open_ended = training && status == file_status(Outcome::Incomplete);
    std::vector<Sample> rows;
    try {
      rows = h5::read_rows<Sample>(g, "samples", h5::sample_mem_type(version_ >= 2), where);
    } catch (const Error& e) {
      problem(where, std::string("samples cannot be read (damaged?): ") + e.what());
      return;
    }
    std::set<std::pair<int, int>> seen;  // (rank, rep) with at least one phase
    std::set<std::tuple<int, int, int>> phases;
    int bad = 0;
    auto problem_of = [&](const Sample& x) -> std::string {
      if (std::string why = sample_count_problem(x, ranks, warmups, reps, open_ended); !why.empty())
        return why;  // the reader's rule too
      if (x.end_ns < x.start_ns) return "end_ns before start_ns";
      if (x.phase >= kPhaseCount)
        return "phase " + std::to_string(x.phase) + " outside 0.." + std::to_string(kPhaseCount - 1);
      if (!phases.insert({x.rank, x.rep, x.phase}).second)
        return "rank " + std::to_string(x.rank) + " rep " + std::to_string(x.rep) + " phase " +
               phase_name(static_cast<Phase>(x.phase)) + " recorded twice";
      return "";
    };
    for (const auto& x : rows) {
      const std::string why = problem_of(x);
      if (why.empty()) seen.insert({x.rank, x.rep});
      if (!why.empty() && bad++ < 3) problem(where + "/samples", why);
    }
    if (bad > 3) problem(where + "/samples", std::to_string(bad) + " bad rows in all");
    const std::size_t expect = static_cast<std::size_t>((warmups + reps) * ranks);
    const std::size_t reps_seen = seen.size();
    if (status == file_status(Outcome::Complete) && reps_seen != expect)
      problem(where + "/samples", "a complete point should hold " + std::to_string(expect) +
                                      " repetitions (rank, rep), holds " + std::to_string(reps_seen));
    if ((status == file_status(Outcome::FailedValidation) || status == file_status(Outcome::BackendFailed)) &&
        !rows.empty())
      problem(where + "/samples", "a point that failed (" + status + ") must not be timed");
  }

 private:
  CheckResult& r_;
  long version_;
};

herr_t names(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

}  // namespace

CheckResult check_file(const std::string& path) {
  h5::init();
  CheckResult r;
  r.path = path;
  Checker c(r);
  if (!std::filesystem::exists(path)) return c.problem("", "no such file"), r;
  if (H5Fis_hdf5(path.c_str()) <= 0)
    return c.problem("", "not an HDF5 file (truncated, or not a d500 results file)"), r;
  h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (f < 0) return c.problem("", "cannot be opened as HDF5 (truncated or damaged)"), r;

  const toml::table& desc = description();
  std::string name;
  try {
    name = h5::read_attr_string(f, "schema", path);
  } catch (const Error&) {}
  if (name != schema::kName)
    return c.problem("/", "not a d500 results file (no schema = \"d500-results\" attribute)"), r;
  long version = -1;
  try {
    version = static_cast<long>(h5::read_attr_int(f, "schema_version", path));
  } catch (const Error&) {}
  if (version > schema::kVersion)
    return c.problem("/", "schema version " + std::to_string(version) + " is newer than this d500 knows (" +
                              std::to_string(schema::kVersion) + "); use a newer d500"),
           r;
  if (version < schema::kOldestReadable) return c.problem("/", "missing or invalid schema_version"), r;
  c.set_version(version);

  if (!c.attributes(f, "/", desc["root"]["required"].as_table(), true, desc["root"].as_table())) return r;
  c.attributes(f, "/", desc["root"]["optional"].as_table(), false);
  c.values(f, "/", desc["root"]["values"].as_table());
  const long ranks = static_cast<long>(h5::read_attr_int(f, "ranks", path));
  for (auto&& ds : *desc["root"]["dataset"].as_array()) {
    std::string p = (*ds.as_table())["path"].value_or(std::string());
    c.dataset(f, p, "/", *ds.as_table(), ranks);
  }
  if (H5Lexists(f, "env", H5P_DEFAULT) > 0) {
    h5::Handle env(H5Gopen2(f, "env", H5P_DEFAULT), H5Gclose);
    c.attributes(env, "/env", desc["env"]["required"].as_table(), true);
    c.attributes(env, "/env", desc["env"]["optional"].as_table(), false);
  } else {
    c.problem("/", "missing group '/env'");
  }

  std::map<std::string, int> counts;
  std::vector<std::string> ids;
  if (H5Lexists(f, "points", H5P_DEFAULT) > 0) {
    h5::Handle pg(H5Gopen2(f, "points", H5P_DEFAULT), H5Gclose);
    H5Literate(pg, H5_INDEX_NAME, H5_ITER_INC, nullptr, names, &ids);
  } else {
    c.problem("/", "missing group '/points'");
  }
  for (const auto& id : ids) {
    const std::string where = "/points/" + id;
    h5::Handle g(H5Gopen2(f, where.c_str(), H5P_DEFAULT), H5Gclose);
    if (g < 0) {
      c.problem(where, "cannot be opened (damaged?)");
      continue;
    }
    bool ok = c.attributes(g, where, desc["point"]["required"].as_table(), true, desc["point"].as_table());
    c.attributes(g, where, desc["point"]["optional"].as_table(), false);
    c.values(g, where, desc["point"]["values"].as_table());
    if (!ok) continue;
    std::string canonical = h5::read_attr_string(g, "canonical", where);
    if (hex64(fnv1a64(canonical)) != id)
      c.problem(where, "group name is not the id of its canonical form '" + canonical + "' (" +
                           hex64(fnv1a64(canonical)) + ")");
    std::string status = h5::read_attr_string(g, "status", where);
    if (h5::has_attr(g, "checksum")) {
      try {
        const std::string stored = h5::read_attr_string(g, "checksum", where);
        const std::string computed = h5::attributes_checksum(h5::read_all_attributes(g, where));
        if (stored != computed)
          c.problem(where, "damaged: the attributes do not match their checksum (stored " + stored + ", computed " +
                               computed + ")");
      } catch (const Error& e) {
        c.problem(where, std::string("damaged: the attributes cannot be read: ") + e.what());
      }
    } else if (version >= 2 && status != file_status(Outcome::Incomplete)) {
      c.problem(where, "an ended point of a version-2 file has no attribute checksum");
    }
    const auto outcome = outcome_from_file_status(status);
    counts[outcome ? outcome_name(*outcome) : "unknown status '" + status + "'"]++;
    bool samples_ok = true;
    for (auto&& ds : *desc["point"]["dataset"].as_array()) {
      const toml::table& t = *ds.as_table();
      std::string dn = t["name"].value_or(std::string());
      bool ok_ds = c.dataset(g, dn, where, t, ranks);
      if (dn == "samples") samples_ok = ok_ds;
    }
    if (H5Lexists(g, "checkpoint", H5P_DEFAULT) > 0) {
      h5::Handle cg(H5Gopen2(g, "checkpoint", H5P_DEFAULT), H5Gclose);
      const toml::table& ct = *desc["checkpoint"].as_table();
      bool sound = cg >= 0 && c.attributes(cg, where + "/checkpoint", ct["required"].as_table(), true);
      for (auto&& ds : *ct["dataset"].as_array())
        sound = sound && c.dataset(cg, (*ds.as_table())["name"].value_or(std::string()), where + "/checkpoint",
                                   *ds.as_table(), ranks);
      if (sound)
        if (const std::string cp = checkpoint_problem(g, where, ranks); !cp.empty()) c.problem(where, cp);
    }
    if (samples_ok)
      c.samples(g, where, ranks, h5::read_attr_int(g, "warmups", where), h5::read_attr_int(g, "repetitions", where),
                status, h5::read_attr_int(g, "level", where) >= 2);
  }
  std::vector<std::string> parts;
  for (const auto& [k, v] : counts) parts.push_back(std::to_string(v) + " " + k);
  r.summary = std::to_string(ids.size()) + " points" + (parts.empty() ? "" : ": " + join(parts, ", ")) + "; job " +
              h5::read_attr_string(f, "status", path);
  return r;
}

}  // namespace d500
