#include "backends/graph.hpp"

#include "common/error.hpp"

namespace d500 {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::U8: return "uint8";
    case DType::I8: return "int8";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::Bool: return "bool";
    case DType::F64: return "float64";
    case DType::Undefined: break;
  }
  return "undefined";
}

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::I64:
    case DType::F64: return 8;
    case DType::U8:
    case DType::I8:
    case DType::Bool: return 1;
    case DType::Undefined: break;
  }
  return 0;
}

bool dtype_supported(DType t) { return t == DType::F32 || t == DType::I64 || t == DType::I32 || t == DType::Bool; }

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::int64_t Node::attr_i(const std::string& a, std::int64_t dflt) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? dflt : it->second.i;
}

double Node::attr_f(const std::string& a, double dflt) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? dflt : it->second.f;
}

std::string Node::attr_s(const std::string& a, const std::string& dflt) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? dflt : it->second.s;
}

std::vector<std::int64_t> Node::attr_ints(const std::string& a, std::vector<std::int64_t> dflt) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? dflt : it->second.ints;
}

std::string Node::label() const { return op + " node '" + name + "'"; }

int Graph::find(const std::string& tensor_name) const {
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == tensor_name) return static_cast<int>(i);
  return -1;
}

int Graph::add_tensor(TensorInfo t) {
  tensors.push_back(std::move(t));
  return static_cast<int>(tensors.size()) - 1;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& what) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(what + ": shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast (axis " +
                  std::to_string(i) + ": " + std::to_string(da) + " vs " + std::to_string(db) + ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<std::int64_t> strides_of(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

std::vector<std::int64_t> broadcast_strides(const Shape& from, const Shape& to) {
  std::vector<std::int64_t> st(to.size(), 0);
  const auto own = strides_of(from);
  const std::size_t off = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i) st[off + i] = from[i] == 1 ? 0 : own[i];
  return st;
}

}  // namespace d500
