#pragma once
// Every HDF5 C call d500 makes goes through these checked helpers: a failure throws
// d500::Error carrying the call, the object, the HDF5 error stack, and (in the worker) the
// rank and host.
#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/value.hpp"

namespace d500::h5 {

// Owns one HDF5 identifier and closes it with the matching H5?close.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), close_(o.close_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      close_ = o.close_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = H5I_INVALID_HID;
  }
  hid_t get() const { return id_; }
  // Gives the identifier up without closing it (after a failed collective operation, closing is
  // itself collective and could wait forever for ranks that will never call it).
  void abandon() { id_ = H5I_INVALID_HID; }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

// Turns off HDF5's own printing of errors (d500 reports them through exceptions), and sets
// the prefix (e.g. "rank 1 on nid00012") added to every HDF5 error message.
void init(const std::string& where_prefix = "");

// Throws when `r` is negative; `what` names the object (file and path inside it).
hid_t check(hid_t r, const char* call, const std::string& what);
Handle checked(hid_t r, herr_t (*close)(hid_t), const char* call, const std::string& what);

Handle vlen_string_type();

void write_attr(hid_t obj, const std::string& name, const std::string& v);
void write_attr(hid_t obj, const std::string& name, std::int64_t v);
void write_attr(hid_t obj, const std::string& name, double v);
void write_attr(hid_t obj, const std::string& name, const Value& v);

bool has_attr(hid_t obj, const std::string& name);
std::string read_attr_string(hid_t obj, const std::string& name, const std::string& what);
std::int64_t read_attr_int(hid_t obj, const std::string& name, const std::string& what);
double read_attr_double(hid_t obj, const std::string& name, const std::string& what);
Value read_attr_value(hid_t obj, const std::string& name, const std::string& what);

// The checksum of a group's attributes: FNV-1a (hex) of "name=canonical value\n" for every
// attribute in name order, the attribute `checksum` itself left out. The writer stores it as the
// point's `checksum` when the point ends; the reader and the checker recompute it, so that a
// damaged value is reported as damage, never read as a result.
std::string attributes_checksum(const std::map<std::string, Value>& attrs);
std::map<std::string, Value> read_all_attributes(hid_t obj, const std::string& what);

// Reads the one-dimensional dataset `name` of `parent` whole, as rows of the memory type `type`
// (matched to the file's fields by name). Throws naming `what`.
template <class Row>
std::vector<Row> read_rows(hid_t parent, const char* name, hid_t type, const std::string& what) {
  Handle d(check(H5Dopen2(parent, name, H5P_DEFAULT), "H5Dopen2", what + "/" + name), H5Dclose);
  Handle s(check(H5Dget_space(d), "H5Dget_space", what + "/" + name), H5Sclose);
  std::vector<Row> rows(static_cast<std::size_t>(std::max<hssize_t>(0, H5Sget_simple_extent_npoints(s))));
  if (!rows.empty()) check(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), "H5Dread", what + "/" + name);
  return rows;
}

// The compound types of d500::Sample and d500::Event in memory (field names are the schema's
// column names). Without `with_phase`, the sample type of schema version 1 (no `phase` column),
// for reading older files: the phase of their rows stays 0 (op).
Handle sample_mem_type(bool with_phase = true);
Handle event_mem_type();

// Level 1's per-step records (schema version 3): the step table, one row per step of the
// executor's schedule (fixed-length, NUL-padded strings, longer ones cut), and each rank's
// duration of each step in each repetition.
struct StepRow {
  std::int32_t index;
  char name[128];
  char op[32];
  char direction[16];
  char impl[64];
  double flops;
};
struct StepTimeRow {
  std::int32_t rank, rep, step;
  std::int64_t ns;
};
Handle step_mem_type();
Handle step_time_mem_type();

}  // namespace d500::h5
