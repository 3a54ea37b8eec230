#include "plan/template.hpp"

#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"

namespace d500 {

static std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string render_template(const std::string& text, const std::string& path,
                            const std::map<std::string, std::string>& vars) {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    std::size_t open = text.find("{{", pos);
    if (open == std::string::npos) {
      out.append(text, pos);
      return out;
    }
    out.append(text, pos, open - pos);
    int line = 1;
    int column = 1;
    for (std::size_t i = 0; i < open; ++i) {
      if (text[i] == '\n') ++line, column = 1;
      else ++column;
    }
    std::size_t close = text.find("}}", open + 2);
    std::size_t eol = text.find('\n', open);
    if (close == std::string::npos || (eol != std::string::npos && eol < close))
      throw Error(Location{path, line, column}, "'{{' without a closing '}}' on the same line");
    std::string name = trim(text.substr(open + 2, close - open - 2));
    auto it = vars.find(name);
    if (it == vars.end()) {
      std::vector<std::string> names;
      for (const auto& [k, v] : vars) names.push_back(k);
      throw Error(Location{path, line, column}, "unknown placeholder {{" + name + "}}" + did_you_mean(name, names) +
                                                    " (available: " + join(names, ", ") + ")");
    }
    out += shell_quote(it->second);
    pos = close + 2;
  }
}

}  // namespace d500
