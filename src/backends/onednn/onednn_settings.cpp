// The onednn backend's settings (BackendSetting): which of the graph's nodes d500's executor joins
// before it runs them on oneDNN's primitives. Compiled into every build, with oneDNN or without,
// so that a campaign that sets one is told the backend is missing, not the key unknown.
#include "backends/registry.hpp"
#include "backends/settings.hpp"

namespace d500 {

std::vector<BackendSetting> settings_of_backend_onednn() {
  return {fusion_setting(
      "AddRelu forward as oneDNN's binary add with a ReLU post-op, one pass, backward one OpenMP loop, dy where y > 0 "
      "into both gradients; BatchNormRelu as oneDNN's batch normalization with the ReLU applied in place by an OpenMP "
      "loop, backward the masked gradient written into x's gradient and taken in place by the primitive, so that the "
      "normalised output is never stored",
      "off")};
}

}  // namespace d500
