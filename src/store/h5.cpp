#include "store/h5.hpp"

#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"
#include "metrics/metrics.hpp"

namespace d500::h5 {

namespace {
std::string g_prefix;

herr_t collect(unsigned n, const H5E_error2_t* e, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (n < 4 && e->desc && *e->desc) {
    *out += (out->empty() ? "" : "; ");
    *out += std::string(e->func_name ? e->func_name : "?") + ": " + e->desc;
  }
  return 0;
}
}  // namespace

void init(const std::string& where_prefix) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  g_prefix = where_prefix;
}

hid_t check(hid_t r, const char* call, const std::string& what) {
  if (r >= 0) return r;
  std::string stack;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &stack);
  H5Eclear2(H5E_DEFAULT);
  throw Error((g_prefix.empty() ? "" : g_prefix + ": ") + what + ": " + call + " failed" +
              (stack.empty() ? "" : " (HDF5: " + stack + ")"));
}

Handle checked(hid_t r, herr_t (*close)(hid_t), const char* call, const std::string& what) {
  return Handle(check(r, call, what), close);
}

Handle vlen_string_type() {
  Handle t(check(H5Tcopy(H5T_C_S1), "H5Tcopy", "string type"), H5Tclose);
  check(H5Tset_size(t, H5T_VARIABLE), "H5Tset_size", "string type");
  check(H5Tset_cset(t, H5T_CSET_UTF8), "H5Tset_cset", "string type");
  return t;
}

static void write_raw_attr(hid_t obj, const std::string& name, hid_t type, const void* data) {
  if (H5Aexists(obj, name.c_str()) > 0) check(H5Adelete(obj, name.c_str()), "H5Adelete", "attribute " + name);
  Handle space(check(H5Screate(H5S_SCALAR), "H5Screate", name), H5Sclose);
  Handle a(
      check(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2", "attribute " + name),
      H5Aclose);
  check(H5Awrite(a, type, data), "H5Awrite", "attribute " + name);
}

void write_attr(hid_t obj, const std::string& name, const std::string& v) {
  Handle t = vlen_string_type();
  const char* p = v.c_str();
  write_raw_attr(obj, name, t, &p);
}
void write_attr(hid_t obj, const std::string& name, std::int64_t v) { write_raw_attr(obj, name, H5T_NATIVE_INT64, &v); }
void write_attr(hid_t obj, const std::string& name, double v) { write_raw_attr(obj, name, H5T_NATIVE_DOUBLE, &v); }
void write_attr(hid_t obj, const std::string& name, const Value& v) {
  switch (type_of(v)) {
    case ValueType::Int: write_attr(obj, name, std::get<std::int64_t>(v)); break;
    case ValueType::Real: write_attr(obj, name, std::get<double>(v)); break;
    case ValueType::Bool: {
      std::int64_t b = std::get<bool>(v) ? 1 : 0;  // HDF5 has no boolean; documented as 0/1
      write_attr(obj, name, b);
      break;
    }
    case ValueType::String: write_attr(obj, name, std::get<std::string>(v)); break;
  }
}

bool has_attr(hid_t obj, const std::string& name) { return H5Aexists(obj, name.c_str()) > 0; }

static Handle open_attr(hid_t obj, const std::string& name, const std::string& what) {
  if (!has_attr(obj, name)) throw Error(what + ": missing attribute '" + name + "'");
  return Handle(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "H5Aopen", what + " attribute " + name), H5Aclose);
}

std::string read_attr_string(hid_t obj, const std::string& name, const std::string& what) {
  Handle a = open_attr(obj, name, what);
  Handle ft(check(H5Aget_type(a), "H5Aget_type", what), H5Tclose);
  if (H5Tget_class(ft) != H5T_STRING) throw Error(what + ": attribute '" + name + "' is not a string");
  if (H5Tis_variable_str(ft) > 0) {
    Handle t = vlen_string_type();
    char* p = nullptr;
    check(H5Aread(a, t, &p), "H5Aread", what + " attribute " + name);
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  std::size_t n = H5Tget_size(ft);
  std::vector<char> buf(n + 1, 0);
  Handle t(check(H5Tcopy(H5T_C_S1), "H5Tcopy", what), H5Tclose);
  check(H5Tset_size(t, n + 1), "H5Tset_size", what);
  check(H5Aread(a, t, buf.data()), "H5Aread", what + " attribute " + name);
  return std::string(buf.data());
}

std::int64_t read_attr_int(hid_t obj, const std::string& name, const std::string& what) {
  Handle a = open_attr(obj, name, what);
  Handle ft(check(H5Aget_type(a), "H5Aget_type", what), H5Tclose);
  if (H5Tget_class(ft) != H5T_INTEGER) throw Error(what + ": attribute '" + name + "' is not an integer");
  std::int64_t v = 0;
  check(H5Aread(a, H5T_NATIVE_INT64, &v), "H5Aread", what + " attribute " + name);
  return v;
}

double read_attr_double(hid_t obj, const std::string& name, const std::string& what) {
  Handle a = open_attr(obj, name, what);
  double v = 0;
  check(H5Aread(a, H5T_NATIVE_DOUBLE, &v), "H5Aread", what + " attribute " + name);
  return v;
}

Value read_attr_value(hid_t obj, const std::string& name, const std::string& what) {
  Handle a = open_attr(obj, name, what);
  Handle ft(check(H5Aget_type(a), "H5Aget_type", what), H5Tclose);
  switch (H5Tget_class(ft)) {
    case H5T_INTEGER: return read_attr_int(obj, name, what);
    case H5T_FLOAT: return read_attr_double(obj, name, what);
    case H5T_STRING: return read_attr_string(obj, name, what);
    default: throw Error(what + ": attribute '" + name + "' has an unsupported type");
  }
}

std::string attributes_checksum(const std::map<std::string, Value>& attrs) {
  std::string text;
  for (const auto& [name, v] : attrs)
    if (name != "checksum") text += name + "=" + canonical(v) + "\n";
  return hex64(fnv1a64(text));
}

namespace {
herr_t attr_name(hid_t, const char* name, const H5A_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}
}  // namespace

std::map<std::string, Value> read_all_attributes(hid_t obj, const std::string& what) {
  std::vector<std::string> names;
  check(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, nullptr, attr_name, &names), "H5Aiterate2", what);
  std::map<std::string, Value> out;
  for (const auto& n : names) out[n] = read_attr_value(obj, n, what);
  return out;
}

Handle sample_mem_type(bool with_phase) {
  Handle t(check(H5Tcreate(H5T_COMPOUND, sizeof(Sample)), "H5Tcreate", "sample type"), H5Tclose);
  auto add = [&](const char* n, std::size_t off, hid_t ty) { check(H5Tinsert(t, n, off, ty), "H5Tinsert", n); };
  add("rank", offsetof(Sample, rank), H5T_NATIVE_INT32);
  add("rep", offsetof(Sample, rep), H5T_NATIVE_INT32);
  add("warmup", offsetof(Sample, warmup), H5T_NATIVE_UINT8);
  if (with_phase) add("phase", offsetof(Sample, phase), H5T_NATIVE_UINT8);
  add("start_ns", offsetof(Sample, start_ns), H5T_NATIVE_INT64);
  add("end_ns", offsetof(Sample, end_ns), H5T_NATIVE_INT64);
  add("bytes", offsetof(Sample, bytes), H5T_NATIVE_INT64);
  add("flops", offsetof(Sample, flops), H5T_NATIVE_INT64);
  return t;
}

Handle event_mem_type() {
  Handle t(check(H5Tcreate(H5T_COMPOUND, sizeof(Event)), "H5Tcreate", "event type"), H5Tclose);
  auto add = [&](const char* n, std::size_t off, hid_t ty) { check(H5Tinsert(t, n, off, ty), "H5Tinsert", n); };
  add("rank", offsetof(Event, rank), H5T_NATIVE_INT32);
  add("step", offsetof(Event, step), H5T_NATIVE_INT64);
  add("time_ns", offsetof(Event, time_ns), H5T_NATIVE_INT64);
  add("loss", offsetof(Event, loss), H5T_NATIVE_DOUBLE);
  add("accuracy", offsetof(Event, accuracy), H5T_NATIVE_DOUBLE);
  return t;
}

namespace {
Handle fixed_string(std::size_t n) {
  Handle t(check(H5Tcopy(H5T_C_S1), "H5Tcopy", "string type"), H5Tclose);
  check(H5Tset_size(t, n), "H5Tset_size", "string type");
  check(H5Tset_strpad(t, H5T_STR_NULLPAD), "H5Tset_strpad", "string type");
  return t;
}
}  // namespace

Handle step_mem_type() {
  Handle t(check(H5Tcreate(H5T_COMPOUND, sizeof(StepRow)), "H5Tcreate", "step type"), H5Tclose);
  auto add = [&](const char* n, std::size_t off, hid_t ty) { check(H5Tinsert(t, n, off, ty), "H5Tinsert", n); };
  add("index", offsetof(StepRow, index), H5T_NATIVE_INT32);
  const Handle name = fixed_string(sizeof(StepRow::name)), op = fixed_string(sizeof(StepRow::op)),
               dir = fixed_string(sizeof(StepRow::direction)), impl = fixed_string(sizeof(StepRow::impl));
  add("name", offsetof(StepRow, name), name);
  add("op", offsetof(StepRow, op), op);
  add("direction", offsetof(StepRow, direction), dir);
  add("impl", offsetof(StepRow, impl), impl);
  add("flops", offsetof(StepRow, flops), H5T_NATIVE_DOUBLE);
  return t;
}

Handle step_time_mem_type() {
  Handle t(check(H5Tcreate(H5T_COMPOUND, sizeof(StepTimeRow)), "H5Tcreate", "step time type"), H5Tclose);
  auto add = [&](const char* n, std::size_t off, hid_t ty) { check(H5Tinsert(t, n, off, ty), "H5Tinsert", n); };
  add("rank", offsetof(StepTimeRow, rank), H5T_NATIVE_INT32);
  add("rep", offsetof(StepTimeRow, rep), H5T_NATIVE_INT32);
  add("step", offsetof(StepTimeRow, step), H5T_NATIVE_INT32);
  add("ns", offsetof(StepTimeRow, ns), H5T_NATIVE_INT64);
  return t;
}

}  // namespace d500::h5
