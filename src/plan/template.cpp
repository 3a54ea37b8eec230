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
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    std::string line = text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos + 1);
    pos = eol == std::string::npos ? text.size() : eol + 1;
    ++line_no;
    std::string rendered;
    bool drop = false;
    std::size_t at = 0;
    while (true) {
      std::size_t open = line.find("{{", at);
      if (open == std::string::npos) {
        rendered.append(line, at);
        break;
      }
      rendered.append(line, at, open - at);
      const Location where{path, line_no, static_cast<int>(open) + 1};
      std::size_t close = line.find("}}", open + 2);
      if (close == std::string::npos) throw Error(where, "'{{' without a closing '}}' on the same line");
      std::string name = trim(line.substr(open + 2, close - open - 2));
      // {{?name}}: an optional value; the whole line is left out when it is empty.
      const bool optional = !name.empty() && name[0] == '?';
      if (optional) name = trim(name.substr(1));
      auto it = vars.find(name);
      if (it == vars.end()) {
        std::vector<std::string> names;
        for (const auto& [k, v] : vars) names.push_back(k);
        throw Error(where, "unknown placeholder {{" + name + "}}" + did_you_mean(name, names) +
                               " (available: " + join(names, ", ") + ")");
      }
      // A value is one shell word on one line: a newline would end an "#SBATCH" line (or a
      // comment) and start a command, which no quoting prevents.
      if (has_control_chars(it->second))
        throw Error(where, "the value of {{" + name + "}} (\"" + printable(it->second) +
                               "\") contains a control character; paths and values in job scripts must not");
      if (optional && it->second.empty()) drop = true;
      rendered += shell_quote(it->second);
      at = close + 2;
    }
    if (!drop) out += rendered;
  }
  return out;
}

}  // namespace d500
