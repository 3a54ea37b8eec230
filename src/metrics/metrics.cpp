#include "metrics/metrics.hpp"

namespace d500 {

namespace {
constexpr const char* kPhaseNames[kPhaseCount] = {
    "op", "data", "forward", "backward", "update", "communication", "wait", "evaluation", "checkpoint", "device"};
}

const char* phase_name(Phase p) {
  const auto i = static_cast<int>(p);
  return i < kPhaseCount ? kPhaseNames[i] : "unknown";
}

std::string phase_names_csv() {
  std::string s;
  for (int i = 0; i < kPhaseCount; ++i) s += (i ? "," : "") + std::string(kPhaseNames[i]);
  return s;
}

bool parse_phase(const std::string& name, Phase& out) {
  for (int i = 0; i < kPhaseCount; ++i)
    if (name == kPhaseNames[i]) {
      out = static_cast<Phase>(i);
      return true;
    }
  return false;
}

}  // namespace d500
