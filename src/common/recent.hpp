#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace d500 {

// Keeps the last few values made for a key: loading a network or running the yardstick once
// serves the points of a job (and the plan-time checks) that share it. Thread-safe (the planner
// checks points on several threads): one value is made at a time, so none is made twice.
template <class V>
class Recent {
 public:
  explicit Recent(std::size_t keep) : keep_(keep) {}
  template <class Make>
  std::shared_ptr<const V> get(const std::string& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->first == key) {
        auto v = it->second;
        items_.erase(it);
        items_.push_back({key, v});
        return v;
      }
    auto v = std::make_shared<const V>(make());
    items_.push_back({key, v});
    if (items_.size() > keep_) items_.erase(items_.begin());
    return v;
  }

 private:
  std::mutex mutex_;
  std::size_t keep_;
  std::vector<std::pair<std::string, std::shared_ptr<const V>>> items_;
};

}  // namespace d500
