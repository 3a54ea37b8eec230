// NVML through a stand-in library (tests/fixtures/nvml_standin.c) that answers as one GPU at
// bus 0000:17:00.0 would: what d500 records of it, its counters read twice, and every way of
// reading nothing (no library, a library that is not NVML, no driver, another bus), each said.
#include "backends/nvml.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>

namespace d500 {
namespace {

class Nvml : public ::testing::Test {
 protected:
  // The process's NVML is the stand-in: set before its first use, which is here.
  static void SetUpTestSuite() { setenv("D500_NVML_LIBRARY", D500_NVML_STANDIN, 1); }
};

TEST_F(Nvml, TheGpusFactsAreItsDriverClocksPowerLimitAndReasonsOrWhyNot) {
  ASSERT_EQ(nvml::unavailable(), "");
  EXPECT_EQ(nvml::state(), "NVML of driver 580.95.05");
  std::map<std::string, std::string> f;
  for (auto& [k, v] : nvml::facts("0000:17:00.0")) f[k] = v;
  EXPECT_EQ(f.at("nvml_driver"), "580.95.05");
  EXPECT_EQ(f.at("sm_clock_mhz_now"), "1755");
  EXPECT_EQ(f.at("sm_clock_mhz_max"), "1980");
  EXPECT_EQ(f.at("memory_clock_mhz_now"), "2619");
  EXPECT_EQ(f.at("sm_clock_mhz_application"), "unknown (nvmlDeviceGetApplicationsClock: Not Supported)");
  EXPECT_EQ(f.at("power_limit_w"), "700");  // milliwatts, as NVML gives them, in watts
  EXPECT_EQ(f.at("persistence_mode"), "on");
  EXPECT_EQ(f.at("clock_event_reasons"), "idle, power cap (software)");
  // Another bus: one fact, the reason.
  const auto other = nvml::facts("0000:99:00.0");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].first, "nvml");
  EXPECT_EQ(other[0].second, "unavailable: nvmlDeviceGetHandleByPciBusId_v2: Not Found (bus 0000:99:00.0)");
}

TEST_F(Nvml, TwoReadingsOfTheCountersGiveTheEnergyAndTheTimeCappedBetweenThem) {
  const nvml::Reading a = nvml::read("0000:17:00.0"), b = nvml::read("0000:17:00.0");
  ASSERT_EQ(a.why, "");
  EXPECT_NEAR(b.energy_j - a.energy_j, 1.5, 1e-9);  // millijoules in, joules out
  EXPECT_NEAR(b.power_capped_s - a.power_capped_s, 0.02, 1e-12);
  EXPECT_EQ(b.thermal_capped_s, 0);
  EXPECT_EQ(b.sm_clock_mhz, 1755);
  EXPECT_EQ(b.clock_event_reasons, 0x5u);
  EXPECT_NE(b.clock_event_reasons & nvml::kSlowdownReasons, 0u);  // the power cap holds it back; idle would not
  const nvml::Reading none = nvml::read("0000:99:00.0");
  EXPECT_EQ(none.why, "nvmlDeviceGetHandleByPciBusId_v2: Not Found (bus 0000:99:00.0)");
  EXPECT_TRUE(std::isnan(none.energy_j) && std::isnan(none.power_capped_s) && std::isnan(none.sm_clock_mhz));
}

TEST_F(Nvml, WithoutTheLibraryOrTheDriverNothingIsReadAndTheReasonIsSaid) {
  EXPECT_NE(nvml::probe("/nonexistent/libnvidia-ml.so.1").find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  // A shared library that is not NVML (the C library has none of its calls).
  EXPECT_NE(nvml::probe("libc.so.6").find("lacks nvmlInit_v2"), std::string::npos) << nvml::probe("libc.so.6");
  setenv("D500_NVML_STANDIN_NO_DRIVER", "1", 1);
  EXPECT_EQ(nvml::probe(D500_NVML_STANDIN), "nvmlInit_v2: Driver Not Loaded");
  unsetenv("D500_NVML_STANDIN_NO_DRIVER");
  EXPECT_EQ(nvml::probe(D500_NVML_STANDIN), "");
}

TEST(NvmlReasons, EachBitIsNamedAndUnknownOnesAreShownInHex) {
  EXPECT_EQ(nvml::reasons_text(0), "none");
  EXPECT_EQ(nvml::reasons_text(0x40 | 0x80), "thermal slowdown (hardware), power brake (hardware)");
  EXPECT_EQ(nvml::reasons_text(0x2 | 0x1000), "application clocks setting, other 0x1000");
  EXPECT_EQ(nvml::kSlowdownReasons & (0x1 | 0x2 | 0x10), 0u);  // idle, a clock setting and sync boost are not slowdowns
}

}  // namespace
}  // namespace d500
