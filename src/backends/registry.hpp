#pragma once
// Every backend d500 knows, whether this build has it or not. A backend missing from the build
// is listed with the reason, so that asking for it is a plan-time error that says why.
#include <functional>
#include <string>
#include <vector>

namespace d500 {

struct BackendInfo {
  std::string name;
  std::string description;
  bool built = false;
  std::string not_built_reason;            // when !built
  std::function<std::string()> version;    // library version(s), when built
};

const std::vector<BackendInfo>& all_backends();
const BackendInfo* find_backend(const std::string& name);
std::vector<std::string> built_backend_names();

}  // namespace d500
