// The custom backend's settings (BackendSetting): the library that implements the operator.
#include "backends/registry.hpp"

namespace d500 {

std::vector<BackendSetting> settings_of_backend_custom() {
  // A table: one entry a line, as written.
  // clang-format off
  return {{.spec = {"library", ValueType::String, Value{std::string()}, 0, 0, {},
                    "path of the shared library implementing the operator (include/d500/custom_op.h)"},
           .required = true,
           .path = true}};
  // clang-format on
}

}  // namespace d500
