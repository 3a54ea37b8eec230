// The worker's device.* attributes from two NVML readings of a rank's GPU: the energy between
// them, or none with the reason when the counter did not advance (a span shorter than its update
// interval, as the repetitions of small kernels on an H100 were), never 0 J.
#include "worker/worker.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/text.hpp"

namespace d500 {
namespace {

std::map<std::string, Value> state(double energy_before, double energy_after, double seconds) {
  nvml::Reading a, b;
  a.why = b.why = "";
  a.energy_j = energy_before, b.energy_j = energy_after;
  a.power_capped_s = b.power_capped_s = a.thermal_capped_s = b.thermal_capped_s = 0;
  a.sm_clock_mhz = b.sm_clock_mhz = 1980;
  a.clock_event_reasons = b.clock_event_reasons = 0;
  std::map<std::string, Value> out;
  for (auto& [k, v] : device_state(a, b, seconds, MPI_COMM_SELF)) out[k] = v;
  return out;
}

TEST(DeviceState, TheEnergyIsTheCountersAdvanceOrNoneWithTheReasonWhenItStoodStill) {
  auto moved = state(1000.0, 1012.5, 0.25);
  EXPECT_DOUBLE_EQ(std::get<double>(moved.at("device.energy_j")), 12.5);
  EXPECT_EQ(moved.count("device.energy_note"), 0u);
  EXPECT_DOUBLE_EQ(std::get<double>(moved.at("device.span_s")), 0.25);

  auto still = state(1000.0, 1000.0, 0.0021);
  EXPECT_TRUE(std::isnan(std::get<double>(still.at("device.energy_j"))));
  ASSERT_EQ(still.count("device.energy_note"), 1u);
  EXPECT_EQ(
      std::get<std::string>(still.at("device.energy_note")),
      "NVML's energy counter did not advance over the 2.10 ms span on 1 of 1 rank(s): the span is shorter than the counter's "
      "update interval, so no energy is stated");

  // A GPU that counts no energy (before Volta): NaN, and no claim about the counter's interval.
  auto uncounted = state(std::nan(""), std::nan(""), 1.0);
  EXPECT_TRUE(std::isnan(std::get<double>(uncounted.at("device.energy_j"))));
  EXPECT_EQ(uncounted.count("device.energy_note"), 0u);
}

}  // namespace

// A bad_alloc outside a point's set-up ends the job: the rank says what it was doing, what it
// maps and what limits it, not a bare "std::bad_alloc".
TEST(OutOfMemoryText, NamesWhatTheRankWasDoingWhatItMapsAndTheLimit) {
  const std::string limited = out_of_memory_text("in point 1/2 1412637a11e40b7f", 181LL << 20, 244LL << 20);
  EXPECT_EQ(limited.rfind("out of memory (std::bad_alloc) in point 1/2 1412637a11e40b7f: this rank maps ", 0), 0u)
      << limited;
  EXPECT_NE(limited.find(fmt_bytes(181LL << 20)), std::string::npos) << limited;
  EXPECT_NE(limited.find("under an address-space limit (ulimit -v) of " + fmt_bytes(244LL << 20) +
                         ": raise the limit or lift it"),
            std::string::npos)
      << limited;
  const std::string unlimited = out_of_memory_text("", 0, 0);
  EXPECT_EQ(unlimited.rfind("out of memory (std::bad_alloc): this rank maps an unknown amount and has no "
                            "address-space limit",
                            0),
            0u)
      << unlimited;
  EXPECT_NE(unlimited.find("Slurm's --mem"), std::string::npos) << unlimited;
}

}  // namespace d500
