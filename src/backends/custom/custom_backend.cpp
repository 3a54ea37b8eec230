// The `custom` backend: an operator from a user's shared library, through the C ABI of
// include/d500/custom_op.h, loaded with dlopen.
#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "backends/conv_geom.hpp"
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
  if (!fn) throw Error("library '" + path + "' does not export d500_custom_op_v1 (see include/d500/custom_op.h)");
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
    for (auto& t : p.out)
      out_.push_back({t.name.c_str(), static_cast<int>(t.dims.size()), t.dims.data(), t.data.data()});
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

// Level 1: the level-0 operator a graph node is, when a custom library's operator can compute it
// (the tensors and parameters of include/d500/custom_op.h), or "".
struct Mapped {
  std::string op;
  std::vector<d500_param> params;
};
const char* const kNodeOps[] = {"relu", "softmax", "conv2d"};

Mapped map_node(const NodeProblem& p) {
  const Node& n = *p.node;
  const Shape& x = *p.in[0].shape;
  Mapped m;
  auto dims4 = [&](const Shape& s) {
    const std::int64_t v[4] = {s.size() > 0 ? s[0] : 1, s.size() > 1 ? s[1] : 1, s.size() > 2 ? s[2] : 1,
                               s.size() > 3 ? s[3] : 1};
    m.params = {{"n", v[0]}, {"c", v[1]}, {"h", v[2]}, {"w", v[3]}};
  };
  if (n.op == "Relu") {
    m.op = "relu";
    dims4(x);
  } else if (n.op == "Softmax" && n.attr_i("_inner", 1) == 1 &&
             n.attr_i("_outer", 1) * n.attr_i("_len", 1) == p.in[0].numel()) {
    m.op = "softmax";  // rows x classes, over the last axis
    m.params = {{"n", n.attr_i("_outer", 1)}, {"c", n.attr_i("_len", 1)}};
  } else if (n.op == "Conv" && x.size() == 4 && !(p.in.size() > 2 && p.in[2].present())) {
    const ConvGeom g = conv_geom(n, x, (*p.in[1].shape)[0]);
    // conv2d's geometry: one stride, pad and dilation for both axes, padding on every side alike.
    if (g.sh != g.sw || g.dh != g.dw || g.pt != g.pb || g.pl != g.pr || g.pt != g.pl) return m;
    m.op = "conv2d";
    m.params = {{"n", g.n},  {"c", g.c},       {"h", g.h},    {"w", g.w},         {"k", g.k},          {"r", g.kh},
                {"s", g.kw}, {"stride", g.sh}, {"pad", g.pt}, {"dilation", g.dh}, {"groups", g.groups}};
  }
  return m;
}

d500_tensor tensor(const char* name, const TensorView& v) {
  return {name, static_cast<int>(v.shape->size()), v.shape->data(), static_cast<float*>(v.data)};
}

// A node computed by the library's operator: one instance per pass (create takes the pass).
class CustomNode final : public NodeKernel {
 public:
  CustomNode(const std::string& path, const NodeProblem& p, Mapped m)
      : lib_(load(path, m.op)), m_(std::move(m)), path_(path) {
    const std::string& op = m_.op;
    if (op == "relu") {
      add("forward", {tensor("x", p.in[0])}, {tensor("y", p.out[0])});
      if (p.training && p.din[0].present())
        add("backward", {tensor("x", p.in[0]), tensor("dy", p.dout[0])}, {tensor("dx", p.din[0])});
    } else if (op == "softmax") {
      add("forward", {tensor("x", p.in[0])}, {tensor("y", p.out[0])});
      if (p.training && p.din[0].present())
        add("backward", {tensor("y", p.out[0]), tensor("dy", p.dout[0])}, {tensor("dx", p.din[0])});
    } else {
      add("forward", {tensor("x", p.in[0]), tensor("w", p.in[1])}, {tensor("y", p.out[0])});
      if (p.training && p.din[0].present())
        add("backward_data", {tensor("dy", p.dout[0]), tensor("w", p.in[1])}, {tensor("dx", p.din[0])});
      if (p.training && p.din[1].present())
        add("backward_filter", {tensor("x", p.in[0]), tensor("dy", p.dout[0])}, {tensor("dw", p.din[1])});
    }
  }
  ~CustomNode() override {
    for (auto& r : runs_)
      if (r.state) lib_.api->destroy(r.state);
  }
  void forward() override { run(runs_[0]); }
  void backward() override {
    for (std::size_t i = 1; i < runs_.size(); ++i) run(runs_[i]);
  }
  std::string impl() const override { return std::string("custom ") + (lib_.api->name ? lib_.api->name : m_.op); }

 private:
  struct Run {
    std::string pass;
    std::vector<d500_tensor> in, out;
    void* state = nullptr;
  };
  void add(const char* pass, std::vector<d500_tensor> in, std::vector<d500_tensor> out) {
    Run r{pass, std::move(in), std::move(out), nullptr};
    char err[512] = "";
    if (lib_.api->create(pass, m_.params.data(), static_cast<int>(m_.params.size()), r.in.data(),
                         static_cast<int>(r.in.size()), r.out.data(), static_cast<int>(r.out.size()), &r.state, err,
                         sizeof err) != 0) {
      err[sizeof err - 1] = '\0';
      throw Error("custom operator from " + path_ + ": create (" + pass + ") failed: " + err);
    }
    runs_.push_back(std::move(r));
  }
  void run(const Run& r) {
    if (lib_.api->run(r.state) != 0)
      throw Error("custom operator from " + path_ + ": run (" + r.pass + ") returned an error");
  }
  Library lib_;
  Mapped m_;
  std::string path_;
  std::vector<Run> runs_;
};

std::unique_ptr<NodeKernel> make_custom_node_kernel(const NodeProblem& p, int) {
  const std::string path = p.params && p.params->count("library") ? std::get<std::string>(p.params->at("library")) : "";
  if (path.empty()) return nullptr;
  for (const auto& t : p.in)
    if (t.present() && t.dtype != DType::F32) return nullptr;
  Mapped m = map_node(p);
  if (m.op.empty()) return nullptr;
  {  // only the nodes of the library's own operator
    Library probe;
    probe.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    auto fn = probe.handle ? reinterpret_cast<d500_custom_op_v1_fn>(dlsym(probe.handle, "d500_custom_op_v1")) : nullptr;
    const d500_custom_op_v1* api = fn ? fn() : nullptr;
    if (!api || !api->op || m.op != api->op) return nullptr;
  }
  return std::make_unique<CustomNode>(path, p, std::move(m));
}

// Plan-time check of a point on the custom backend: its library loads, speaks this ABI and
// implements the point's operator ("" when so); a network point's library must implement one
// of the operators d500 can hand nodes to. The library is closed again.
std::string check_custom_library(const Params& p) {
  const auto& path = std::get<std::string>(p.at("library"));
  if (path.empty()) return "";  // the operator's own check says 'library' is needed
  if (!plan_loads_code()) {     // a dry run: the file alone, nothing of it runs
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    if (!std::filesystem::is_regular_file(path) || !in.read(magic, 4) ||
        std::memcmp(magic,
                    "\x7f"
                    "ELF",
                    4) != 0)
      return "library '" + path + "' is not a shared object (no such file, or not ELF)";
    return "";
  }
  const std::string& workload = std::get<std::string>(p.at("workload"));
  std::string last;
  for (const std::string& op : workload == "network"
                                   ? std::vector<std::string>(std::begin(kNodeOps), std::end(kNodeOps))
                                   : std::vector<std::string>{workload}) {
    try {
      load(path, op);
      return "";
    } catch (const Error& e) {
      last = e.what();
    }
  }
  if (workload == "network")
    return "library '" + path +
           "' implements none of the operators a network's nodes can be handed to (relu, softmax, conv2d): " + last;
  return last;
}

}  // namespace

void register_backend_custom(BackendRegistry& r) {
  r.add(
      {.name = "custom",
       .description = "an operator from a user's shared library (include/d500/custom_op.h), set by 'library'",
       .version = [] { return "C ABI version " + std::to_string(D500_CUSTOM_OP_ABI_VERSION) + " (dlopen)"; },
       .supports = [](const std::string&) { return true; },
       .make_kernel = [](OpProblem& p, int) -> std::unique_ptr<OpKernel> { return std::make_unique<CustomKernel>(p); },
       .check_point = check_custom_library,
       .make_node_kernel = make_custom_node_kernel});
}

}  // namespace d500
