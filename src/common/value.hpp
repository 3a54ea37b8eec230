#pragma once
// A parameter value of a point: the typed axes of a campaign (integers, reals, booleans,
// strings) and their one canonical text form, which is what is hashed, logged and stored.
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "common/error.hpp"

namespace d500 {

using Value = std::variant<std::int64_t, double, bool, std::string>;

enum class ValueType { Int, Real, Bool, String };
const char* type_name(ValueType t);
ValueType type_of(const Value& v);

// Canonical text: integers in decimal, reals in shortest round-trip form, booleans as
// true/false, strings bare when they are plain words and double-quoted otherwise.
std::string canonical(const Value& v);

// An empty string parameter means "not set" (no named shape, no custom library): left out of
// canonical point text and of labels, so adding an optional string parameter changes no id.
inline bool is_unset(const Value& v) {
  return std::holds_alternative<std::string>(v) && std::get<std::string>(v).empty();
}

// A value together with where it was written, so late checks can still point at the file.
struct LocatedValue {
  Value value;
  Location where;
};

// A point's parameters, ordered by name.
using Params = std::map<std::string, Value>;

// A point's canonical text, the one place it is built: "workload:backend k=v k=v ..." with the
// other parameters in name order and unset ones left out. Its FNV-1a hash is the point's id.
std::string canonical_point(const Params& p);
// The workload and backend a canonical text starts with (the inverse of its head).
struct CanonicalHead {
  std::string workload, backend;
};
CanonicalHead canonical_head(const std::string& canonical_text);
// The parameters of a canonical text (the inverse of canonical_point, up to types that its text
// does not keep apart: a string spelled as a number or boolean reads back as one). For a point
// known only by its text (planned, never run): what its label and the report's columns show.
Params parse_canonical_point(const std::string& canonical_text);

// What tells points of one workload apart: the parameters whose values differ between them (one
// absent from some counts as differing), and those they all share with one value; workload and
// backend are in neither. The report's names (analysis/names.hpp) and `d500 run`'s progress.
struct ParamSpread {
  std::vector<std::string> varying;  // in name order
  Params shared;
};
ParamSpread param_spread(const std::vector<const Params*>& points);
// Those of `keys` that another one fixes: a number that a string parameter's value determines on
// every point (conv2d's c, h, k, pad, r, s, stride and w by its named shape), backend aside (a
// campaign may zip a size with it). The report sets them aside (its determinant names the point)
// and so does `d500 plan`'s listing.
std::vector<std::string> fixed_by_another(const std::vector<const Params*>& points,
                                          const std::vector<std::string>& keys);
// "k=v k=v" of the `varying` parameters that `p` sets, less `without`.
std::string varying_text(const Params& p, const std::vector<std::string>& varying,
                         const std::vector<std::string>& without = {});
// "workload:backend k=v ..." with only the `varying` parameters, less `without`.
std::string short_point_text(const Params& p, const std::vector<std::string>& varying,
                             const std::vector<std::string>& without = {});

// The integer parameter `name`, or `dflt` when it is absent or not an integer.
std::int64_t int_param_or(const Params& p, const std::string& name, std::int64_t dflt);
// The string parameter `name`, or `dflt` when it is absent or not a string.
std::string str_param_or(const Params& p, const std::string& name, const std::string& dflt);

}  // namespace d500
