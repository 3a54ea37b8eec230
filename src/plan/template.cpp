#include "plan/template.hpp"

#include <cctype>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"

namespace d500 {

static std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

void check_placeholder_contexts(const std::string& text, const std::string& path) {
  enum class In { Code, Single, Double, Backtick, Comment, Heredoc };
  In in = In::Code;
  int line = 1, col = 1;
  std::string heredoc, pending;  // the open here-document's delimiter; one announced on this line
  bool heredoc_expands = false, pending_expands = false;
  std::size_t line_start = 0;
  auto refuse = [&](const char* context, std::size_t at) {
    const std::size_t close = text.find("}}", at);
    const std::string ph = text.substr(at, close == std::string::npos ? 2 : close + 2 - at);
    throw Error(Location{path, line, col},
                "placeholder " + printable(ph.substr(0, 80)) + " " + context +
                    ": d500 writes every value as one single-quoted shell word, which protects it only outside "
                    "double quotes, backquotes and here-documents (a value holding $(...) would run there); write it "
                    "as a word of its own, e.g. --flag={{name}} or \"$prefix\"{{name}}");
  };
  for (std::size_t i = 0; i < text.size(); ++i, ++col) {
    const char c = text[i];
    if (c == '\n') {
      if (in == In::Comment) in = In::Code;
      if (in == In::Heredoc) {
        std::string l = text.substr(line_start, i - line_start);
        l.erase(0, l.find_first_not_of('\t'));
        if (l == heredoc) in = In::Code;
      } else if (in == In::Code && !pending.empty()) {
        in = In::Heredoc;
        heredoc = pending;
        heredoc_expands = pending_expands;
        pending.clear();
      }
      ++line;
      col = 0;
      line_start = i + 1;
      continue;
    }
    if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {
      if (in == In::Double) refuse("inside double quotes", i);
      if (in == In::Backtick) refuse("inside backquotes", i);
      if (in == In::Heredoc && heredoc_expands) refuse("inside a here-document that expands $(...)", i);
    }
    switch (in) {
      case In::Code:
        if (c == '\\')
          ++i, ++col;
        else if (c == '\'')
          in = In::Single;
        else if (c == '"')
          in = In::Double;
        else if (c == '`')
          in = In::Backtick;
        else if (c == '#' &&
                 (i == line_start || std::isspace(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == ';'))
          in = In::Comment;
        else if (c == '<' && text.compare(i, 3, "<<<") == 0)  // a here-string: a word, as anywhere
          i += 2, col += 2;
        else if (c == '<' && text.compare(i, 2, "<<") == 0) {
          std::size_t j = i + 2;
          if (j < text.size() && text[j] == '-') ++j;
          while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
          std::string word;
          pending_expands = true;
          while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j])) && text[j] != ';' &&
                 text[j] != '|' && text[j] != '&' && text[j] != '>' && text[j] != '<' && text[j] != ')') {
            if (text[j] == '\'' || text[j] == '"' || text[j] == '\\')
              pending_expands = false;  // a quoted delimiter
            else
              word += text[j];
            ++j;
          }
          pending = word;
          col += static_cast<int>(j - 1 - i);
          i = j - 1;
        }
        break;
      case In::Single:
        if (c == '\'') in = In::Code;
        break;
      case In::Double:
        if (c == '\\')
          ++i, ++col;
        else if (c == '"')
          in = In::Code;
        break;
      case In::Backtick:
        if (c == '\\')
          ++i, ++col;
        else if (c == '`')
          in = In::Code;
        break;
      case In::Comment:
      case In::Heredoc: break;
    }
  }
}

std::string render_template(const std::string& text, const std::string& path,
                            const std::map<std::string, std::string>& vars) {
  check_placeholder_contexts(text, path);
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
