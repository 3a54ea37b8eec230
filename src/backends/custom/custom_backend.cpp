// The `custom` backend: an operator from a user's shared library, through the C ABI of
// include/d500/custom_op.h, loaded with dlopen.
#include <dlfcn.h>

#include <utility>

#include "backends/kernel.hpp"
#include "backends/registry.hpp"
#include "common/error.hpp"
#include "d500/custom_op.h"

namespace d500 {

namespace {

// An open library: closed (dlclose) when the last kernel using it goes, or right after a check.
struct Library {
  void* handle = nullptr;
  const d500_custom_op_v1* api = nullptr;
  Library() = default;
  Library(Library&& o) noexcept : handle(std::exchange(o.handle, nullptr)), api(std::exchange(o.api, nullptr)) {}
  Library& operator=(Library&&) = delete;
  Library(const Library&) = delete;
  ~Library() {
    if (handle) dlclose(handle);
  }
};

// Loads `path` and checks that it implements `op`; the message names what is wrong.
Library load(const std::string& path, const std::string& op) {
  Library lib;
  lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) throw Error("library '" + path + "' cannot be loaded: " + dlerror());
  auto fn = reinterpret_cast<d500_custom_op_v1_fn>(dlsym(lib.handle, "d500_custom_op_v1"));
  if (!fn)
    throw Error("library '" + path + "' does not export d500_custom_op_v1 (see include/d500/custom_op.h)");
  lib.api = fn();
  if (!lib.api || lib.api->abi_version != D500_CUSTOM_OP_ABI_VERSION)
    throw Error("library '" + path + "': d500_custom_op_v1() returned " +
                (lib.api ? "ABI version " + std::to_string(lib.api->abi_version) : std::string("NULL")) +
                "; this d500 speaks version " + std::to_string(D500_CUSTOM_OP_ABI_VERSION));
  if (!lib.api->op || op != lib.api->op || !lib.api->create || !lib.api->run || !lib.api->destroy)
    throw Error("library '" + path + "' implements '" + (lib.api->op ? lib.api->op : "?") + "', not '" + op +
                "' (or leaves create/run/destroy NULL)");
  return lib;
}

class CustomKernel final : public OpKernel {
 public:
  CustomKernel(OpProblem& p) : lib_(load(p.s("library"), p.op)) {
    for (const auto& [name, v] : p.params)
      if (std::holds_alternative<std::int64_t>(v)) params_.push_back({name.c_str(), std::get<std::int64_t>(v)});
    for (auto& t : p.in) in_.push_back({t.name.c_str(), static_cast<int>(t.dims.size()), t.dims.data(), t.data.data()});
    for (auto& t : p.out) out_.push_back({t.name.c_str(), static_cast<int>(t.dims.size()), t.dims.data(), t.data.data()});
    char err[512] = "";
    if (lib_.api->create(p.pass.c_str(), params_.data(), static_cast<int>(params_.size()), in_.data(),
                         static_cast<int>(in_.size()), out_.data(), static_cast<int>(out_.size()), &state_, err,
                         sizeof err) != 0) {
      err[sizeof err - 1] = '\0';
      throw Error("custom operator '" + std::string(lib_.api->name ? lib_.api->name : "?") + "' from " +
                  p.s("library") + ": create failed: " + err);
    }
  }
  ~CustomKernel() override {
    if (state_) lib_.api->destroy(state_);
  }
  void run() override {
    if (lib_.api->run(state_) != 0) throw Error("custom operator: run() returned an error");
  }

 private:
  Library lib_;
  void* state_ = nullptr;
  std::vector<d500_param> params_;
  std::vector<d500_tensor> in_, out_;
};

// Plan-time check of a point on the custom backend: its library loads, speaks this ABI and
// implements the point's operator ("" when so). The library is closed again.
std::string check_custom_library(const Params& p) {
  const auto& path = std::get<std::string>(p.at("library"));
  if (path.empty()) return "";  // the operator's own check says 'library' is needed
  try {
    load(path, std::get<std::string>(p.at("workload")));
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

void register_backend_custom(BackendRegistry& r) {
  r.add({.name = "custom",
         .description = "an operator from a user's shared library (include/d500/custom_op.h), set by 'library'",
         .version = [] { return "C ABI version " + std::to_string(D500_CUSTOM_OP_ABI_VERSION) + " (dlopen)"; },
         .supports = [](const std::string&) { return true; },
         .make_kernel = [](OpProblem& p, int) -> std::unique_ptr<OpKernel> { return std::make_unique<CustomKernel>(p); },
         .check_point = check_custom_library});
}

}  // namespace d500
