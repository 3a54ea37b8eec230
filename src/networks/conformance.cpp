#include "networks/conformance.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/text.hpp"
#include "networks/executor.hpp"
#include "networks/onnx_proto.hpp"

namespace fs = std::filesystem;

namespace d500 {
namespace {

bool is_case(const fs::path& dir) { return fs::is_regular_file(dir / "model.onnx"); }

onnx::TensorProto read_tensor(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  onnx::TensorProto t;
  if (!in || !t.ParseFromIstream(&in)) throw Error(file.string() + ": not a TensorProto");
  return t;
}

double value_at(DType t, const std::vector<std::byte>& b, std::size_t i) {
  switch (t) {
    case DType::F32: return reinterpret_cast<const float*>(b.data())[i];
    case DType::I64: return static_cast<double>(reinterpret_cast<const std::int64_t*>(b.data())[i]);
    case DType::I32: return reinterpret_cast<const std::int32_t*>(b.data())[i];
    case DType::Bool: return static_cast<double>(static_cast<unsigned char>(b[i]));
    default: return 0;
  }
}

std::vector<fs::path> case_files(const fs::path& set, const char* prefix) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(set))
    if (e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path());
  auto idx = [](const fs::path& p) { return std::stoi(p.stem().string().substr(p.stem().string().find('_') + 1)); };
  std::sort(files.begin(), files.end(), [&](const fs::path& a, const fs::path& b) { return idx(a) < idx(b); });
  return files;
}

// d500 runs static graphs: a shape, axis or bound that a test passes as an input must be known
// when the model loads. The values the first test_data_set gives for the model's integer and
// boolean inputs, and for its float inputs of one element, are fixed as constants.
std::map<std::string, std::vector<std::byte>> load_time_inputs(const fs::path& model, const fs::path& set) {
  onnx::ModelProto m;
  std::ifstream in(model, std::ios::binary);
  if (!in || !m.ParseFromIstream(&in)) throw Error(model.string() + ": not an ONNX model");
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> names;
  for (const auto& i : m.graph().input())
    if (!inits.count(i.name())) names.push_back(i.name());
  const auto files = case_files(set, "input_");
  std::map<std::string, std::vector<std::byte>> fixed;
  for (std::size_t k = 0; k < files.size() && k < names.size(); ++k) {
    const onnx::TensorProto t = read_tensor(files[k]);
    std::int64_t n = 1;
    for (auto d : t.dims()) n *= d;
    const DType dt = from_onnx_type(t.data_type());
    if (dt == DType::I64 || dt == DType::I32 || dt == DType::Bool || (dt == DType::F32 && n <= 1))
      fixed[names[k]] = tensor_bytes(t, files[k].string(), set.string());
  }
  return fixed;
}

// One test_data_set: feeds its inputs, runs, compares every output. Returns "" when it passes.
std::string run_set(const Graph& g, const fs::path& set, const BackendInfo& backend, int threads, double& worst,
                    const std::map<std::string, std::vector<std::byte>>& fixed) {
  std::vector<fs::path> ins, outs = case_files(set, "output_");
  for (const auto& f : case_files(set, "input_")) {
    const onnx::TensorProto t = read_tensor(f);
    auto it = fixed.find(t.name());
    if (it == fixed.end()) {
      ins.push_back(f);
      continue;
    }
    // A value fixed at load time must be the same in every data set.
    if (tensor_bytes(t, f.string(), set.string()) != it->second)
      throw Error("input '" + t.name() + "' differs between data sets, but d500 fixed it at load time");
  }
  if (ins.size() != g.inputs.size())
    return "the case gives " + std::to_string(ins.size()) + " inputs, the model has " + std::to_string(g.inputs.size());
  if (outs.size() != g.outputs.size())
    return "the case expects " + std::to_string(outs.size()) + " outputs, the model has " +
           std::to_string(g.outputs.size());
  std::vector<std::vector<std::byte>> data(ins.size());
  std::vector<const void*> ptrs;
  for (std::size_t k = 0; k < ins.size(); ++k) {
    const onnx::TensorProto t = read_tensor(ins[k]);
    const TensorInfo& want = g.info(g.inputs[k]);
    if (from_onnx_type(t.data_type()) != want.dtype || Shape(t.dims().begin(), t.dims().end()) != want.shape)
      return "input " + std::to_string(k) + " is " + onnx_type_name(t.data_type()) + " " +
             shape_str(Shape(t.dims().begin(), t.dims().end())) + ", the model wants " + dtype_name(want.dtype) + " " +
             shape_str(want.shape);
    data[k] = tensor_bytes(t, ins[k].string(), set.string());
    ptrs.push_back(data[k].data());
  }
  RunnerSpec spec;
  spec.graph = &g;
  spec.inputs = ptrs;
  spec.threads = threads;
  auto runner = make_runner(backend, spec);
  runner->forward(0);
  std::string bad;
  for (std::size_t k = 0; k < outs.size(); ++k) {
    const onnx::TensorProto t = read_tensor(outs[k]);
    const TensorInfo& have = g.info(g.outputs[k]);
    const DType dt = from_onnx_type(t.data_type());
    const Shape dims(t.dims().begin(), t.dims().end());
    if (dt != have.dtype || dims != have.shape)
      return "output " + std::to_string(k) + " is " + dtype_name(have.dtype) + " " + shape_str(have.shape) +
             ", expected " + onnx_type_name(t.data_type()) + " " + shape_str(dims);
    const std::vector<std::byte> want = tensor_bytes(t, outs[k].string(), set.string());
    const std::vector<double> got = runner->output(k);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double w = value_at(dt, want, i), v = got[i];
      const bool exact = dt != DType::F32;
      const bool ok = exact ? w == v
                            : (std::isnan(w) && std::isnan(v)) || (std::isinf(w) && w == v) ||
                                  std::abs(v - w) <= 1e-7 + 1e-3 * std::abs(w);
      const double rel =
          std::isfinite(w) && std::isfinite(v) ? std::abs(v - w) / std::max(std::abs(w), 1e-30) : (ok ? 0 : INFINITY);
      if (std::abs(v - w) > 0 || !ok) worst = std::max(worst, std::abs(v - w) <= 1e-30 ? 0.0 : rel);
      if (!ok && bad.empty())
        bad = "output " + std::to_string(k) + " element " + std::to_string(i) + ": got " + fmt_sig(v, 7) +
              ", expected " + fmt_sig(w, 7);
    }
  }
  return bad;
}

void collect(const fs::path& root, std::vector<fs::path>& out) {
  if (is_case(root)) {
    out.push_back(root);
    return;
  }
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw Error(root.string() + ": neither a test case (a directory with model.onnx) nor a directory of them");
  std::vector<fs::path> kids;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && is_case(e.path())) kids.push_back(e.path());
  std::sort(kids.begin(), kids.end());
  out.insert(out.end(), kids.begin(), kids.end());
}

}  // namespace

ConformanceSummary run_conformance(const std::vector<std::string>& roots, const BackendInfo& backend, std::ostream& out,
                                   int threads) {
  std::vector<fs::path> dirs;
  for (const auto& r : roots) collect(r, dirs);
  ConformanceSummary sum;
  for (const auto& dir : dirs) {
    ConformanceCase c;
    c.dir = dir.string();
    c.name = dir.filename().string();
    ModelFacts facts;
    try {
      std::vector<fs::path> sets;
      for (const auto& e : fs::directory_iterator(dir))
        if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
      std::sort(sets.begin(), sets.end());
      if (sets.empty()) throw Error("no test_data_set_N directory");
      LoadOptions opt;
      Graph g;
      try {
        g = load_onnx_file((dir / "model.onnx").string(), opt, &facts);
      } catch (const Error& e) {
        const std::string msg = e.what();
        if (msg.find("must be known at load time") == std::string::npos &&
            msg.find("must be a constant") == std::string::npos)
          throw;
        opt.fixed_inputs = load_time_inputs(dir / "model.onnx", sets[0]);
        g = load_onnx_file((dir / "model.onnx").string(), opt, &facts);
        c.detail = "integer inputs fixed at load time";
      }
      c.ops = facts.ops;
      c.result = ConformanceCase::Result::Pass;
      for (const auto& set : sets) {
        std::string why;
        try {
          why = run_set(g, set, backend, threads, c.worst_rel_error, opt.fixed_inputs);
        } catch (const Error& e) {
          why = e.what();
          c.result = ConformanceCase::Result::CannotRun;
        }
        if (!why.empty()) {
          if (c.result != ConformanceCase::Result::CannotRun) c.result = ConformanceCase::Result::Fail;
          c.detail = (c.detail.empty() ? "" : c.detail + "; ") + set.filename().string() + ": " + why;
          break;
        }
      }
    } catch (const std::exception& e) {
      c.ops = facts.ops;
      c.result = ConformanceCase::Result::CannotRun;
      std::string msg = e.what();
      const std::string prefix = (dir / "model.onnx").string() + ": ";
      if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
      c.detail = msg;
    }
    const char* word = c.result == ConformanceCase::Result::Pass   ? "pass"
                       : c.result == ConformanceCase::Result::Fail ? "FAIL"
                                                                   : "cannot run";
    out << word << "  " << c.name;
    if (c.result != ConformanceCase::Result::CannotRun)
      out << "  worst relative error " << fmt_sig(c.worst_rel_error, 3);
    if (!c.detail.empty()) out << "  (" << c.detail << ")";
    out << "\n";
    (c.result == ConformanceCase::Result::Pass   ? sum.passed
     : c.result == ConformanceCase::Result::Fail ? sum.failed
                                                 : sum.cannot_run)++;
    sum.cases.push_back(std::move(c));
  }
  // Per operator: the cases whose models use it.
  std::map<std::string, std::array<int, 3>> per_op;
  for (const auto& c : sum.cases)
    for (const auto& op : c.ops) per_op[op][static_cast<int>(c.result)]++;
  out << "\nper operator (cases whose model uses it): pass / fail / cannot run\n";
  for (const auto& [op, n] : per_op) out << "  " << op << ": " << n[0] << " / " << n[1] << " / " << n[2] << "\n";
  out << "backend " << backend.name << ": " << sum.passed << " passed, " << sum.failed << " failed, " << sum.cannot_run
      << " cannot run, of " << sum.cases.size() << " cases\n";
  return sum;
}

}  // namespace d500
