// Reading ONNX models: protobuf parse, ONNX's checker and shape inference, the batch override,
// the conversion into d500's graph, and d500's own inference and constant folding.
#include "networks/onnx.hpp"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <unordered_map>

#include "backends/graph_ops.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "networks/onnx_proto.hpp"

namespace fs = std::filesystem;

namespace d500 {

DType from_onnx_type(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::F32;
    case onnx::TensorProto::UINT8: return DType::U8;
    case onnx::TensorProto::INT8: return DType::I8;
    case onnx::TensorProto::INT32: return DType::I32;
    case onnx::TensorProto::INT64: return DType::I64;
    case onnx::TensorProto::BOOL: return DType::Bool;
    case onnx::TensorProto::DOUBLE: return DType::F64;
    default: return DType::Undefined;
  }
}

std::string onnx_type_name(int t) {
  const auto* d = onnx::TensorProto::DataType_descriptor();
  const auto* v = d ? d->FindValueByNumber(t) : nullptr;
  return v ? v->name() : "type " + std::to_string(t);
}

std::vector<std::byte> tensor_bytes(const onnx::TensorProto& t, const std::string& what, const std::string& base_dir) {
  const DType dt = from_onnx_type(t.data_type());
  if (!dtype_supported(dt))
    throw Error(what + ": tensor '" + t.name() + "' is " + onnx_type_name(t.data_type()) +
                "; d500 runs float32 networks with int64, int32 and bool index tensors");
  std::int64_t n = 1;
  for (auto d : t.dims()) n *= d;
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(dt);
  std::vector<std::byte> out(bytes);
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    std::int64_t offset = 0, length = -1;
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset" || kv.key() == "length") {
        const std::int64_t v = parse_size(kv.value(), 0);  // digits only, bounded: never an exception
        if (v < 0 || kv.value().find_first_not_of("0123456789") != std::string::npos)
          throw Error(what + ": tensor '" + t.name() + "': external data " + kv.key() + " " + quote_value(kv.value()) +
                      " is not a whole number of bytes");
        (kv.key() == "offset" ? offset : length) = v;
      }
    }
    const fs::path rel(location);
    if (location.empty() || rel.is_absolute() || rel.lexically_normal().string().rfind("..", 0) == 0)
      throw Error(what + ": tensor '" + t.name() + "' names external data \"" + location +
                  "\" outside the model's directory; only files beside the model are read");
    const fs::path file = fs::path(base_dir) / rel;
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error(what + ": tensor '" + t.name() + "': cannot open its external data " + file.string());
    in.seekg(offset);
    if (length >= 0 && static_cast<std::size_t>(length) != bytes)
      throw Error(what + ": tensor '" + t.name() + "': external data length " + std::to_string(length) +
                  " != " + std::to_string(bytes));
    in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(bytes));
    if (static_cast<std::size_t>(in.gcount()) != bytes)
      throw Error(what + ": tensor '" + t.name() + "': its external data " + file.string() + " is too short");
    return out;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes)
      throw Error(what + ": tensor '" + t.name() + "' holds " + std::to_string(t.raw_data().size()) +
                  " bytes, its shape needs " + std::to_string(bytes));
    if (bytes) std::memcpy(out.data(), t.raw_data().data(), bytes);
    return out;
  }
  auto fill = [&](const auto& field, auto cast) {
    if (static_cast<std::int64_t>(field.size()) != n)
      throw Error(what + ": tensor '" + t.name() + "' holds " + std::to_string(field.size()) +
                  " values, its shape needs " + std::to_string(n));
    for (std::int64_t i = 0; i < n; ++i) cast(i, field.Get(static_cast<int>(i)));
  };
  switch (dt) {
    case DType::F32:
      fill(t.float_data(), [&](std::int64_t i, float v) { std::memcpy(out.data() + i * 4, &v, 4); });
      break;
    case DType::I64:
      fill(t.int64_data(), [&](std::int64_t i, std::int64_t v) { std::memcpy(out.data() + i * 8, &v, 8); });
      break;
    case DType::I32:
      fill(t.int32_data(), [&](std::int64_t i, std::int32_t v) { std::memcpy(out.data() + i * 4, &v, 4); });
      break;
    case DType::Bool:
      fill(t.int32_data(), [&](std::int64_t i, std::int32_t v) {
        out[static_cast<std::size_t>(i)] = std::byte{static_cast<unsigned char>(v != 0)};
      });
      break;
    default: break;
  }
  return out;
}

namespace {

Attr convert_attr(const onnx::AttributeProto& a, const std::string& where) {
  Attr r;
  switch (a.type()) {
    case onnx::AttributeProto::INT: r.kind = Attr::Kind::Int, r.i = a.i(); break;
    case onnx::AttributeProto::FLOAT: r.kind = Attr::Kind::Float, r.f = a.f(); break;
    case onnx::AttributeProto::STRING: r.kind = Attr::Kind::String, r.s = a.s(); break;
    case onnx::AttributeProto::INTS:
      r.kind = Attr::Kind::Ints;
      r.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOATS:
      r.kind = Attr::Kind::Floats;
      r.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::TENSOR:
      r.kind = Attr::Kind::Tensor;
      r.tensor_type = from_onnx_type(a.t().data_type());
      r.tensor_shape.assign(a.t().dims().begin(), a.t().dims().end());
      r.tensor_data = tensor_bytes(a.t(), where, ".");
      break;
    default:
      throw Error(where + ": attribute '" + a.name() +
                  "' is of a kind d500 does not read (subgraphs, sparse tensors and string lists are not supported)");
  }
  return r;
}

TensorInfo info_of(const onnx::ValueInfoProto& v) {
  TensorInfo t;
  t.name = v.name();
  t.dtype = from_onnx_type(v.type().tensor_type().elem_type());
  for (const auto& d : v.type().tensor_type().shape().dim()) t.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return t;
}

// The opset that models older than kMinOpset are converted to.
constexpr int kConvertTo = 13;

int default_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return static_cast<int>(o.version());
  return 0;
}

// Gives every data input a static shape: axis 0 the batch, every other axis fixed already.
void set_batch(onnx::ModelProto& m, const std::string& what, const LoadOptions& opt, ModelFacts& facts) {
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  bool first = true;
  for (auto& in : *m.mutable_graph()->mutable_input()) {
    if (inits.count(in.name())) continue;
    if (!in.type().has_tensor_type()) throw Error(what + ": input '" + in.name() + "' is not a tensor");
    auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int i = 0; i < shape->dim_size(); ++i) {
      auto* d = shape->mutable_dim(i);
      const bool known = d->has_dim_value();
      if (i == 0) {
        if (first) facts.declared_batch = known ? d->dim_value() : -1;
        if (!known && opt.batch <= 0)
          throw Error(what + ": input '" + in.name() + "' has a symbolic batch ('" + d->dim_param() +
                      "'): set the point's 'batch'");
        if (known && opt.batch > 0 && d->dim_value() != 1 && d->dim_value() != opt.batch)
          throw Error(what + ": input '" + in.name() + "' has a fixed batch of " + std::to_string(d->dim_value()) +
                      ", so it cannot run at batch " + std::to_string(opt.batch) +
                      " (d500 overrides a batch that is symbolic or 1; export the model with a symbolic batch)");
        if (opt.batch > 0) d->set_dim_value(opt.batch);
      } else if (!known) {
        throw Error(what + ": input '" + in.name() + "' axis " + std::to_string(i) + " is symbolic ('" +
                    d->dim_param() +
                    "'); d500 runs static shapes: export the model with every axis but the batch fixed");
      }
    }
    first = false;
  }
  // Shapes recorded by the exporter may hold the old batch: ONNX's inference recomputes them.
  m.mutable_graph()->clear_value_info();
  for (auto& out : *m.mutable_graph()->mutable_output()) out.mutable_type()->mutable_tensor_type()->clear_shape();
}

// ONNX's checker resolves external data against the model's directory only when it reads the
// file itself: such a model is checked from its file.
void run_checker(const onnx::ModelProto& m, const std::string& file) {
  bool external = false;
  for (const auto& t : m.graph().initializer()) external = external || t.data_location() == onnx::TensorProto::EXTERNAL;
  if (external && !file.empty())
    onnx::checker::check_model(file);
  else
    onnx::checker::check_model(m);
}

// The model's facts, checked: an opset d500 runs (an old one upgraded by ONNX's version
// converter), ONNX's checker, the batch set (set_batch) and ONNX's shape inference run on it.
// `facts_out` gets what is known so far also when the model is refused.
ModelFacts prepare_model(onnx::ModelProto& m, const std::string& what, const LoadOptions& opt, ModelFacts* facts_out,
                         const std::string& file) {
  ModelFacts facts;
  facts.opset = default_opset(m);
  facts.producer = m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version());
  facts.nodes = m.graph().node_size();
  for (const auto& n : m.graph().node())
    if (std::find(facts.ops.begin(), facts.ops.end(), n.op_type()) == facts.ops.end()) facts.ops.push_back(n.op_type());
  if (facts_out) *facts_out = facts;  // what is known so far, also when the model is refused below
  if (facts.opset == 0)
    throw Error(what +
                ": the model imports no opset of the default ONNX domain (only other domains); d500 runs opsets " +
                std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + " of the default domain");
  if (facts.opset > 0 && facts.opset < kMinOpset) {
    // Old exports (opset 1-6) are upgraded by ONNX's own version converter.
    try {
      run_checker(m, file);
      m = onnx::version_conversion::ConvertVersion(m, kConvertTo);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      throw Error(what + ": the model imports opset " + std::to_string(facts.opset) +
                  "; ONNX's version converter could not upgrade it to opset " + std::to_string(kConvertTo) + ": " +
                  msg.substr(0, msg.find("\n\n")));
    }
    facts.converted_from = facts.opset;
    facts.opset = default_opset(m);
  }
  if (facts.opset < kMinOpset || facts.opset > kMaxOpset)
    throw Error(
        what + ": the model imports opset " + std::to_string(facts.opset) +
        " of the default ONNX domain; d500 runs opsets " + std::to_string(kMinOpset) + " to " +
        std::to_string(kMaxOpset) +
        (facts.opset > kMaxOpset ? " (its ONNX library is 1.12; convert the model with onnx.version_converter)" : ""));
  try {
    run_checker(m, facts.converted_from ? "" : file);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    throw Error(what + ": the ONNX checker rejects the model: " + msg.substr(0, msg.find("\n\n")));
  }
  set_batch(m, what, opt, facts);
  try {
    onnx::ShapeInferenceOptions so(true, 1, true);
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), so);
  } catch (const std::exception& e) {
    throw Error(what + ": ONNX shape inference fails on the model (with the batch set): " + std::string(e.what()));
  }
  return facts;
}

// d500's graph of a prepared model: its initializers as constants, its inputs (or the values
// fixed for them), its nodes (each an operator d500 runs, in a version it implements) and
// outputs. `onnx_shapes` gets ONNX's inferred shapes, to cross-check d500's.
Graph build_graph(const onnx::ModelProto& m, const std::string& what, const std::string& base_dir,
                  const LoadOptions& opt, const ModelFacts& facts,
                  std::unordered_map<std::string, TensorInfo>& onnx_shapes) {
  const onnx::GraphProto& gp = m.graph();
  Graph g;
  g.name = gp.name().empty() ? fs::path(what).stem().string() : gp.name();
  g.opset = facts.opset;
  std::unordered_map<std::string, int> ids;
  auto tensor = [&](const std::string& name) {
    auto it = ids.find(name);
    if (it != ids.end()) return it->second;
    TensorInfo t;
    t.name = name;
    t.dtype = DType::Undefined;  // until an input, initializer or node gives it one
    const int id = g.add_tensor(t);
    ids[name] = id;
    return id;
  };
  for (const auto& init : gp.initializer()) {
    const int id = tensor(init.name());
    auto& t = g.tensors[static_cast<std::size_t>(id)];
    t.dtype = from_onnx_type(init.data_type());
    t.shape.assign(init.dims().begin(), init.dims().end());
    g.constants[id] = tensor_bytes(init, what, base_dir);
    g.initializers.insert(id);
  }
  for (const auto& in : gp.input()) {
    if (ids.count(in.name()) && g.is_const(ids[in.name()])) continue;  // an initializer listed as input (IR < 4)
    const int id = tensor(in.name());
    g.tensors[static_cast<std::size_t>(id)] = info_of(in);
    if (!dtype_supported(g.tensors[static_cast<std::size_t>(id)].dtype))
      throw Error(what + ": input '" + in.name() + "' is " + onnx_type_name(in.type().tensor_type().elem_type()) +
                  "; d500 feeds float32, int64, int32 and bool inputs");
    if (auto fixed = opt.fixed_inputs.find(in.name()); fixed != opt.fixed_inputs.end()) {
      if (static_cast<std::int64_t>(fixed->second.size()) != g.bytes(id))
        throw Error(what + ": the value fixed for input '" + in.name() + "' has " +
                    std::to_string(fixed->second.size()) + " bytes; its shape needs " + std::to_string(g.bytes(id)));
      g.constants[id] = fixed->second;
      continue;
    }
    g.inputs.push_back(id);
  }
  for (const auto& v : gp.value_info()) onnx_shapes[v.name()] = info_of(v);
  for (const auto& v : gp.output()) onnx_shapes[v.name()] = info_of(v);
  for (const auto& n : gp.node()) {
    Node node;
    node.op = n.op_type();
    node.name = n.name().empty() ? n.op_type() + "_" + std::to_string(g.nodes.size()) : n.name();
    const std::string where = what + ": " + node.label();
    if (!(n.domain().empty() || n.domain() == "ai.onnx"))
      throw Error(where + " is in domain '" + n.domain() + "'; d500 runs the default ONNX domain only");
    const OpSchema* schema = find_op(n.op_type());
    if (!schema || schema->internal)
      throw Error(where + " (opset " + std::to_string(facts.opset) + "): d500 does not run " + n.op_type() +
                  "; this build runs: " + supported_ops_text());
    if (const onnx::OpSchema* os = onnx::OpSchemaRegistry::Schema(n.op_type(), facts.opset, ""))
      if (os->SinceVersion() < schema->since)
        throw Error(where + ": opset " + std::to_string(facts.opset) + " gives " + n.op_type() + " version " +
                    std::to_string(os->SinceVersion()) + "; d500 implements it from version " +
                    std::to_string(schema->since));
    for (const auto& a : n.attribute()) node.attrs[a.name()] = convert_attr(a, where);
    for (const auto& i : n.input()) node.in.push_back(i.empty() ? -1 : tensor(i));
    for (const auto& o : n.output()) node.out.push_back(o.empty() ? -1 : tensor(o));
    g.nodes.push_back(std::move(node));
  }
  for (const auto& o : gp.output()) {
    if (!ids.count(o.name())) throw Error(what + ": output '" + o.name() + "' is produced by no node");
    g.outputs.push_back(ids[o.name()]);
  }
  return g;
}

Graph convert(onnx::ModelProto& m, const std::string& what, const std::string& base_dir, const LoadOptions& opt,
              ModelFacts* facts_out, const std::string& file = "") {
  const ModelFacts facts = prepare_model(m, what, opt, facts_out, file);
  std::unordered_map<std::string, TensorInfo> onnx_shapes;
  Graph g = build_graph(m, what, base_dir, opt, facts, onnx_shapes);
  infer_and_fold(g, what);
  for (const auto& t : g.tensors) {
    auto it = onnx_shapes.find(t.name);
    if (it == onnx_shapes.end() || it->second.shape.empty()) continue;
    bool known = true;
    for (auto d : it->second.shape) known = known && d >= 0;
    if (known && it->second.shape != t.shape)
      throw Error(what + ": d500 and ONNX infer different shapes for '" + t.name + "': " + shape_str(t.shape) +
                  " and " + shape_str(it->second.shape) + " (a d500 defect: please report it with the model)");
  }
  if (facts_out) *facts_out = facts;
  return g;
}

}  // namespace

Graph load_onnx_bytes(const std::string& bytes, const std::string& what, const LoadOptions& opt, ModelFacts* facts) {
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) throw Error(what + ": not an ONNX model (the protobuf message does not parse)");
  return convert(m, what, ".", opt, facts);
}

Graph load_onnx_file(const std::string& path, const LoadOptions& opt, ModelFacts* facts) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error(path + ": no such ONNX file (or not a regular file)");
  onnx::ModelProto m;
  std::string hash;
  {
    const std::string bytes = read_file(path);  // read once: parsed, and hashed for the results
    if (!m.ParseFromString(bytes)) throw Error(path + ": not an ONNX model (the protobuf message does not parse)");
    hash = hex64(fnv1a64(bytes));
  }
  Graph g = convert(m, path, fs::path(path).parent_path().string(), opt, facts, path);
  if (facts) facts->file_hash = hash;
  return g;
}

Graph load_onnx_model(onnx::ModelProto& m, const std::string& what, const LoadOptions& opt, ModelFacts* facts) {
  return convert(m, what, ".", opt, facts);
}

// ---- d500's inference and folding -----------------------------------------------------------------

namespace {

// The data of a constant: an empty tensor still gets a non-null address, so that it reads as
// present (known at load time) rather than absent.
std::byte* const_data(Graph& g, int t) {
  static std::byte empty{};
  auto& v = g.constants.at(t);
  return v.empty() ? &empty : v.data();
}

// A float computation on the model's weights stays in the graph: folding it would replace a
// trainable weight by a derived constant.
bool touches_weights(const Graph& g, const Node& n) {
  for (int t : n.in)
    if (t >= 0 && g.initializers.count(t) && g.info(t).dtype == DType::F32) return true;
  return false;
}

void fold(Graph& g, const Node& n, const OpSchema& s) {
  // (n is a node of g.nodes; g.tensors and g.constants change below, g.nodes does not.)
  NodeProblem p;
  p.node = &n;
  p.opset = g.opset;
  std::vector<std::vector<std::byte>> outs(n.out.size());
  for (int t : n.in) {
    TensorView v;
    if (t >= 0) {
      v.dtype = g.info(t).dtype;
      v.shape = &g.tensors[static_cast<std::size_t>(t)].shape;
      if (g.is_const(t)) v.data = const_data(g, t);
    }
    p.in.push_back(v);
  }
  for (std::size_t j = 0; j < n.out.size(); ++j) {
    TensorView v;
    if (n.out[j] >= 0) {
      outs[j].resize(static_cast<std::size_t>(g.bytes(n.out[j])));
      v.dtype = g.info(n.out[j]).dtype;
      v.shape = &g.tensors[static_cast<std::size_t>(n.out[j])].shape;
      v.data = outs[j].data();
    }
    p.out.push_back(v);
  }
  std::vector<float> scratch(s.scratch ? static_cast<std::size_t>(s.scratch(p)) : 0);
  reference_forward<float>(s, p, scratch.data());
  for (std::size_t j = 0; j < n.out.size(); ++j)
    if (n.out[j] >= 0) g.constants[n.out[j]] = std::move(outs[j]);
}

}  // namespace

void infer_and_fold(Graph& g, const std::string& what) {
  std::vector<Node> kept;
  for (auto& n : g.nodes) {
    const OpSchema* s = find_op(n.op);
    if (!s)
      throw Error(what + ": " + n.label() + ": d500 does not run " + n.op +
                  "; this build runs: " + supported_ops_text());
    InferCtx c{n, g.opset, {}, {}, {}};
    for (int t : n.in) {
      c.in.push_back(t >= 0 ? &g.tensors[static_cast<std::size_t>(t)] : nullptr);
      c.value.push_back(g.is_const(t) ? const_data(g, t) : nullptr);
    }
    for (int t : n.out) c.out.push_back(t >= 0 ? &g.tensors[static_cast<std::size_t>(t)] : nullptr);
    for (std::size_t i = 0; i < n.in.size(); ++i)
      if (n.in[i] >= 0 && g.info(n.in[i]).dtype == DType::Undefined)
        throw Error(what + ": " + n.label() + ": input '" + g.info(n.in[i]).name +
                    "' is produced by no node, input or initializer");
    try {
      s->infer(c);
    } catch (const Error& e) {
      throw Error(what + ": " + e.what());
    }
    for (int t : n.out)
      if (t >= 0 && !dtype_supported(g.info(t).dtype))
        throw Error(what + ": " + n.label() + ": output '" + g.info(t).name + "' would be " +
                    dtype_name(g.info(t).dtype) + ", which d500 does not run");
    bool all_const = true;
    for (int t : n.in) all_const = all_const && (t < 0 || g.is_const(t));
    const bool float_out = !n.out.empty() && n.out[0] >= 0 && g.info(n.out[0]).dtype == DType::F32;
    if (s->fold_only || (all_const && !(float_out && touches_weights(g, n)))) {
      try {
        fold(g, n, *s);
      } catch (const Error& e) {
        throw Error(what + ": folding " + n.label() + ": " + e.what());
      }
      continue;
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  // Drop what no output depends on: folded shape subgraphs, unused weights.
  std::vector<bool> used(g.tensors.size(), false);
  for (int t : g.outputs) used[static_cast<std::size_t>(t)] = true;
  std::vector<Node> live;
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    bool needed = false;
    for (int t : it->out) needed = needed || (t >= 0 && used[static_cast<std::size_t>(t)]);
    if (!needed) continue;
    for (int t : it->in)
      if (t >= 0) used[static_cast<std::size_t>(t)] = true;
    live.push_back(std::move(*it));
  }
  g.nodes.assign(std::make_move_iterator(live.rbegin()), std::make_move_iterator(live.rend()));
  for (auto it = g.constants.begin(); it != g.constants.end();) {
    if (!used[static_cast<std::size_t>(it->first)]) {
      g.initializers.erase(it->first);
      it = g.constants.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace d500
