#include "common/error.hpp"

#include <algorithm>

namespace d500 {

std::string Location::str() const {
  std::string s = file;
  if (line > 0) s.append(":").append(std::to_string(line));
  if (line > 0 && column > 0) s.append(":").append(std::to_string(column));
  return s;
}

int edit_distance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  int best_d = 1 << 30;
  for (const auto& c : candidates) {
    int d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = &c;
  }
  // A suggestion further than a third of the word away is noise, not help.
  if (best && best_d <= std::max<int>(2, static_cast<int>(word.size()) / 3)) return "; did you mean '" + *best + "'?";
  return "";
}

}  // namespace d500
