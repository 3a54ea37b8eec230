#include "backends/nvml.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace d500::nvml {

namespace {

// NVML's C interface, as its documentation declares it (the header is not on Debian): every call
// returns an nvmlReturn_t (unsigned; 0 is success); a device is an opaque handle.
using Ret = unsigned;
using Device = struct DeviceSt*;
struct ViolationTime {
  unsigned long long reference_time;  // a CPU timestamp, microseconds
  unsigned long long violation_ns;    // time the policy held the clocks down, nanoseconds
};
constexpr unsigned kClockSm = 1, kClockMem = 2;           // nvmlClockType_t
constexpr unsigned kPolicyPower = 0, kPolicyThermal = 1;  // nvmlPerfPolicyType_t

struct Library {
  std::string why;  // "" when loaded and initialised
  Ret (*init)() = nullptr;
  const char* (*error_string)(Ret) = nullptr;
  Ret (*driver_version)(char*, unsigned) = nullptr;
  Ret (*by_bus_id)(const char*, Device*) = nullptr;
  Ret (*clock)(Device, unsigned, unsigned*) = nullptr;
  Ret (*max_clock)(Device, unsigned, unsigned*) = nullptr;
  Ret (*app_clock)(Device, unsigned, unsigned*) = nullptr;
  Ret (*power_limit)(Device, unsigned*) = nullptr;
  Ret (*persistence)(Device, unsigned*) = nullptr;
  Ret (*reasons)(Device, unsigned long long*) = nullptr;
  Ret (*energy)(Device, unsigned long long*) = nullptr;
  Ret (*violation)(Device, unsigned, ViolationTime*) = nullptr;

  std::string error(const char* call, Ret r) const {
    return std::string(call) + ": " + (error_string ? error_string(r) : "error " + std::to_string(r));
  }
};

template <class F>
void bind(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(lib, name));
}

// NVML loaded from `path` and initialised, or why not. The library stays loaded for the
// process's life, as NVML expects.
Library load(const std::string& path) {
  Library l;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    l.why = e ? e : path + ": cannot be loaded";
    return l;
  }
  bind(h, l.init, "nvmlInit_v2");
  bind(h, l.error_string, "nvmlErrorString");
  bind(h, l.driver_version, "nvmlSystemGetDriverVersion");
  bind(h, l.by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  bind(h, l.clock, "nvmlDeviceGetClockInfo");
  bind(h, l.max_clock, "nvmlDeviceGetMaxClockInfo");
  bind(h, l.app_clock, "nvmlDeviceGetApplicationsClock");
  bind(h, l.power_limit, "nvmlDeviceGetPowerManagementLimit");
  bind(h, l.persistence, "nvmlDeviceGetPersistenceMode");
  bind(h, l.reasons, "nvmlDeviceGetCurrentClocksEventReasons");  // the name since driver 535
  if (!l.reasons) bind(h, l.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  bind(h, l.energy, "nvmlDeviceGetTotalEnergyConsumption");
  bind(h, l.violation, "nvmlDeviceGetViolationStatus");
  if (!l.init || !l.by_bus_id) {
    l.why = path + " lacks nvmlInit_v2 or nvmlDeviceGetHandleByPciBusId_v2 (not NVML, or older than driver 260)";
    return l;
  }
  if (const Ret r = l.init(); r != 0) l.why = l.error("nvmlInit_v2", r);
  return l;
}

std::string default_path() {
  const char* env = std::getenv("D500_NVML_LIBRARY");
  return env && *env ? env : "libnvidia-ml.so.1";
}

const Library& library() {
  static const Library lib = load(default_path());
  return lib;
}

// The device at a bus id, or why not.
Device device(const Library& l, const std::string& bus, std::string& why) {
  Device d = nullptr;
  if (const Ret r = l.by_bus_id(bus.c_str(), &d); r != 0) {
    why = l.error("nvmlDeviceGetHandleByPciBusId_v2", r) + " (bus " + bus + ")";
    return nullptr;
  }
  return d;
}

// An unsigned value NVML fills (times `scale`), as text, or why it cannot.
template <class Call>
std::string value_text(const Library& l, const char* name, Call&& call, double scale = 1) {
  unsigned v = 0;
  const Ret r = call(&v);
  if (r != 0) return "unknown (" + l.error(name, r) + ")";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(v) * scale);
  return buf;
}

std::string driver_version(const Library& l) {
  char version[96] = {0};
  return l.driver_version && l.driver_version(version, sizeof version) == 0 ? version : "unknown";
}

}  // namespace

const std::string& unavailable() { return library().why; }

std::string probe(const std::string& path) { return load(path).why; }

std::string state() {
  const Library& l = library();
  if (!l.why.empty()) return "NVML unavailable (" + l.why + ")";
  return "NVML of driver " + driver_version(l);
}

std::vector<std::pair<std::string, std::string>> facts(const std::string& bus) {
  const Library& l = library();
  if (!l.why.empty()) return {{"nvml", "unavailable: " + l.why}};
  std::string why;
  const Device d = device(l, bus, why);
  if (!d) return {{"nvml", "unavailable: " + why}};
  auto missing = [](const char* name) { return std::string("unknown (") + name + " is not in this NVML)"; };
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(16);  // and GCC 12 sees no out-of-bounds write in the first emplace_back's reallocation
  out.emplace_back("nvml_driver", driver_version(l));
  auto clock = [&](auto fn, const char* name, unsigned type) {
    if (!fn) return missing(name);
    return value_text(l, name, [&](unsigned* v) { return fn(d, type, v); });
  };
  out.emplace_back("sm_clock_mhz_now", clock(l.clock, "nvmlDeviceGetClockInfo", kClockSm));
  out.emplace_back("sm_clock_mhz_application", clock(l.app_clock, "nvmlDeviceGetApplicationsClock", kClockSm));
  out.emplace_back("sm_clock_mhz_max", clock(l.max_clock, "nvmlDeviceGetMaxClockInfo", kClockSm));
  out.emplace_back("memory_clock_mhz_now", clock(l.clock, "nvmlDeviceGetClockInfo", kClockMem));
  out.emplace_back("power_limit_w", !l.power_limit ? missing("nvmlDeviceGetPowerManagementLimit")
                                                   : value_text(
                                                         l, "nvmlDeviceGetPowerManagementLimit",
                                                         [&](unsigned* v) { return l.power_limit(d, v); }, 1e-3));
  unsigned persistent = 0;
  out.emplace_back("persistence_mode",
                   l.persistence && l.persistence(d, &persistent) == 0 ? (persistent ? "on" : "off") : "unknown");
  unsigned long long bits = 0;
  out.emplace_back("clock_event_reasons", l.reasons && l.reasons(d, &bits) == 0 ? reasons_text(bits) : "unknown");
  return out;
}

Reading read(const std::string& bus) {
  Reading r;
  const Library& l = library();
  if (!l.why.empty()) {
    r.why = l.why;
    return r;
  }
  const Device d = device(l, bus, r.why);
  if (!d) return r;
  unsigned long long mj = 0;
  if (l.energy && l.energy(d, &mj) == 0) r.energy_j = static_cast<double>(mj) * 1e-3;
  ViolationTime v{};
  if (l.violation && l.violation(d, kPolicyPower, &v) == 0)
    r.power_capped_s = static_cast<double>(v.violation_ns) * 1e-9;
  if (l.violation && l.violation(d, kPolicyThermal, &v) == 0)
    r.thermal_capped_s = static_cast<double>(v.violation_ns) * 1e-9;
  unsigned mhz = 0;
  if (l.clock && l.clock(d, kClockSm, &mhz) == 0) r.sm_clock_mhz = mhz;
  unsigned long long bits = 0;
  if (l.reasons && l.reasons(d, &bits) == 0) r.clock_event_reasons = bits;
  return r;
}

std::string reasons_text(std::uint64_t bits) {
  static const std::pair<std::uint64_t, const char*> names[] = {
      {0x1, "idle"},
      {0x2, "application clocks setting"},
      {0x4, "power cap (software)"},
      {0x8, "hardware slowdown"},
      {0x10, "sync boost"},
      {0x20, "thermal slowdown (software)"},
      {0x40, "thermal slowdown (hardware)"},
      {0x80, "power brake (hardware)"},
      {0x100, "display clock setting"},
  };
  std::string s;
  std::uint64_t known = 0;
  for (const auto& [bit, name] : names) {
    known |= bit;
    if (bits & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  }
  if (bits & ~known) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(bits & ~known));
    s += (s.empty() ? "other " : ", other ") + std::string(buf);
  }
  return s.empty() ? "none" : s;
}

}  // namespace d500::nvml
