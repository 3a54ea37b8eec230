#pragma once
// What planning's stages share (src/plan/stages.hpp): one combination of the axes resolved into a
// point's parameters and checked, the product of the axes walked by combination, and the set of
// point ids planned so far. Inside plan/ only; the rest of d500 sees plan.hpp.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "campaign/campaign.hpp"
#include "workloads/registry.hpp"

namespace d500::planning {

// The value of each key for one combination: the fixed values and the current value of each axis.
using Raw = std::map<std::string, const LocatedValue*>;

// Throws d500::Error at the value's line unless it names a backend this build has and can load.
void check_backend_exists(const LocatedValue& lv);
// The workload the value names; throws d500::Error at its line for an unknown one.
const WorkloadInfo& check_workload_exists(const LocatedValue& lv, const WorkloadRegistry& reg);

// What one combination of the axes resolves to: complete parameters (defaults filled,
// normalised, checked), its canonical text and its workload.
struct Resolved {
  Params params;
  std::string canonical;
  const WorkloadInfo* workload = nullptr;
  const Location* where = nullptr;  // where its workload value was written
};

// Resolves one combination: throws d500::Error naming the key's line for a missing, mistyped or
// out-of-range value, an impossible workload-backend pair, or a point its workload refuses.
Resolved resolve(const Raw& raw, const WorkloadRegistry& reg, const Campaign& c);

// A point as planning's messages name it: its workload and backend and the value of each key the
// campaign sweeps ([axes]) that it sets, not the defaults and fixed values every point shares
// ("distributed:onednn nodes=2", not its 900 characters of canonical text).
std::string point_words(const Params& p, const Campaign& c);
std::string point_words(const std::string& canonical, const Campaign& c);

// The integer size the campaign gave whose doubling grows a point's memory estimate most: the
// key to name when a point is too big ("" when none does).
std::string memory_driver(const Resolved& r, const Raw& raw, std::int64_t bytes);

// The campaign with each named set in [axes] ("resnet50/*") replaced by the values it stands for.
Campaign expand_sets(const Campaign& in, const WorkloadRegistry& reg);

// Threads for planning's work of `items` (combinations, files): the CPUs this process may use,
// at most 8 (past that, the calling thread's own share bounds the gain); one below `worth_from`.
unsigned planning_threads(std::uint64_t items, std::uint64_t worth_from);

// A set of 64-bit point ids: open addressing with linear probing in a power-of-two table kept
// at most half full, one cache line per lookup (std::unordered_set's node per id cost a tenth
// of planning 10^6 points). Ids are FNV-1a hashes, so their low bits are well spread.
class IdSet {
 public:
  explicit IdSet(std::size_t expected) {
    std::size_t n = 16;
    while (n < 2 * expected) n *= 2;
    slots_.assign(n, 0);
  }
  // True when `id` was not in the set (and is now).
  bool insert(std::uint64_t id) {
    if (id == 0) return !std::exchange(has_zero_, true);  // 0 marks an empty slot
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t i = id & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i] == id) return false;
      if (slots_[i] == 0) {
        slots_[i] = id;
        ++size_;
        return true;
      }
    }
  }

 private:
  void grow() {
    std::vector<std::uint64_t> old(2 * slots_.size(), 0);
    old.swap(slots_);
    size_ = 0;
    for (auto id : old)
      if (id) insert(id);
  }
  std::vector<std::uint64_t> slots_;
  std::size_t size_ = 0;
  bool has_zero_ = false;
};

// The product of a plan's dimensions, walked by combination: one Raw map (fixed values and the
// current value of every axis) whose axis entries are re-pointed per combination, so that
// walking 10^6 combinations allocates nothing per combination.
struct Product {
  std::vector<std::vector<const Axis*>> dims;
  std::vector<std::uint64_t> stride;  // combination = sum idx[d] * stride[d]
  std::uint64_t size = 1;
  Raw raw;
  std::vector<std::vector<const LocatedValue**>> slots;  // per dimension, per axis: its entry in raw

  Product(const Campaign& c, const std::vector<std::vector<std::size_t>>& dim_axes) {
    for (const auto& a : c.fixed) raw[a.name] = &a.values.front();
    for (const auto& d : dim_axes) {
      dims.emplace_back();
      slots.emplace_back();
      for (auto i : d) {
        dims.back().push_back(&c.axes[i]);
        slots.back().push_back(&raw[c.axes[i].name]);
      }
    }
    stride.assign(dims.size(), 1);
    for (std::size_t d = dims.size(); d-- > 0;) {
      stride[d] = size;
      size *= dims[d].front()->values.size();
    }
  }
  std::size_t extent(std::size_t d) const { return dims[d].front()->values.size(); }
  void set(const std::vector<std::size_t>& idx) {
    for (std::size_t d = 0; d < dims.size(); ++d)
      for (std::size_t k = 0; k < dims[d].size(); ++k) *slots[d][k] = &dims[d][k]->values[idx[d]];
  }
  void set(std::uint64_t combination) {
    std::vector<std::size_t> idx(dims.size());
    for (std::size_t d = 0; d < dims.size(); ++d)
      idx[d] = static_cast<std::size_t>(combination / stride[d] % extent(d));
    set(idx);
  }
};

}  // namespace d500::planning
