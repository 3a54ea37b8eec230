#pragma once
// One exception type for every error a person must read. It carries where (file:line:column,
// and the key), what went wrong and what would have been valid; the CLI turns it into one line
// and an exit code. Nothing below the CLI prints errors itself.
#include <stdexcept>
#include <string>
#include <vector>

namespace d500 {

struct Location {
  std::string file;
  int line = 0;             // 1-based; 0 when unknown
  int column = 0;           // 1-based; 0 when unknown
  std::string str() const;  // "file:line:column" with the unknown parts left out
};

class Error : public std::runtime_error {
 public:
  explicit Error(std::string what) : std::runtime_error(std::move(what)) {}
  Error(const Location& where, const std::string& what)
      : std::runtime_error(where.str().empty() ? what : where.str() + ": " + what) {}
};

// Edit distance, used to suggest the nearest valid name for a typo.
int edit_distance(const std::string& a, const std::string& b);

// "; did you mean 'x'?" when a candidate is close enough to be a plausible typo, else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace d500
