// The onednn backend's settings (BackendSetting): which of the graph's nodes d500's executor joins
// before it runs them on oneDNN's primitives. Compiled into every build, with oneDNN or without,
// so that a campaign that sets one is told the backend is missing, not the key unknown.
#include "backends/registry.hpp"
#include "backends/settings.hpp"

namespace d500 {

std::vector<BackendSetting> settings_of_backend_onednn() {
  return {fusion_setting(
      "forward oneDNN's binary add with a ReLU post-op, one pass; backward one OpenMP loop, dy where y > 0 into both "
      "gradients",
      "off")};
}

}  // namespace d500
