#pragma once
// The GPU's state as the driver knows it, through NVIDIA's management library (NVML): the
// driver's version, the clocks a GPU runs at and is allowed, its power limit, and the counters
// that say whether it slowed down over a span of time (energy used, time held back by its power
// or thermal limit). CUDA itself gives only the peak clock. NVML comes with the driver, never
// with the toolkit or a Debian package, so it is loaded at run time (dlopen of
// libnvidia-ml.so.1, or of $D500_NVML_LIBRARY, which the tests point at a stand-in) and never
// linked: a build and a host without it work, and say why they read nothing.
// Nothing here is called inside a timed region: facts once per job, readings at a point's start
// and end.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace d500::nvml {

// "" when NVML is loaded and initialised; else why not ("libnvidia-ml.so.1: cannot open shared
// object file", "nvmlInit_v2: Driver Not Loaded").
const std::string& unavailable();
// Why NVML at `path` would not serve ("" when it loads and initialises), without touching the
// process's own NVML above.
std::string probe(const std::string& path);
// In words, for `d500 backends`: "NVML of driver 580.95.05", or "NVML unavailable (<why>)".
std::string state();

// The job-level facts of the GPU at a PCI bus id ("0000:17:00.0", as cudaDeviceGetPCIBusId
// writes it), keys without the "gpu_" prefix the caller adds: nvml_driver, sm_clock_mhz_now,
// sm_clock_mhz_application, sm_clock_mhz_max, memory_clock_mhz_now, power_limit_w,
// persistence_mode, clock_event_reasons (words). A fact NVML cannot give says why; with NVML
// unavailable, one fact "nvml" says why.
std::vector<std::pair<std::string, std::string>> facts(const std::string& pci_bus_id);

// One reading of the counters of the GPU at a PCI bus id. NaN where the GPU does not count it
// (energy before Volta), all NaN with `why` set when NVML or the GPU is not there (as a Reading
// starts).
struct Reading {
  static constexpr double kUnread = std::numeric_limits<double>::quiet_NaN();
  std::string why;                        // "" when read
  double energy_j = kUnread;              // since the driver loaded (nvmlDeviceGetTotalEnergyConsumption)
  double power_capped_s = kUnread;        // time held below its clocks by the power limit (violation counter)
  double thermal_capped_s = kUnread;      // ... by its temperature
  double sm_clock_mhz = kUnread;          // now
  std::uint64_t clock_event_reasons = 0;  // now: NVML's bits (nvmlClocksEventReason*)
};
Reading read(const std::string& pci_bus_id);

// NVML's clock-event reason bits in words ("idle, power cap (software)"; "none").
std::string reasons_text(std::uint64_t bits);
// The bits that mean the GPU is being held below the clocks it could run at: power and thermal
// caps, hardware slowdowns, power brake (not idle, not an application-clock setting, not sync boost).
constexpr std::uint64_t kSlowdownReasons = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

}  // namespace d500::nvml
