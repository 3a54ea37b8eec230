// The console reporter: the report's document (document.hpp) for a terminal, every table fitted to
// 120 columns unless `d500 report --wide` (printed by `d500 report`, written nowhere).
#include <algorithm>
#include <set>
#include <sstream>

#include "analysis/document.hpp"
#include "analysis/reporters.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

// Columns a UTF-8 string takes (one a code point: d500's text has no wide characters).
std::size_t columns(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The first `cols` columns of `s`, its last one an ellipsis where it was cut.
std::string cut(const std::string& s, std::size_t cols) {
  if (columns(s) <= cols) return s;
  std::string o;
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80 && ++n == cols) break;
    o += s[i];
  }
  while (!o.empty() && (static_cast<unsigned char>(o.back()) & 0xC0) == 0x80) o.pop_back();  // never half a character
  return o + "\u2026";
}

void wrap(std::ostringstream& o, const std::string& text, std::size_t width, const std::string& indent = "") {
  for (const auto& para : split(text, '\n')) {
    if (width == 0) {
      o << indent << para << "\n";
      continue;
    }
    std::string line = indent;
    std::size_t len = indent.size();
    for (const auto& word : split(para, ' ')) {
      if (word.empty()) continue;
      if (len > indent.size() && len + 1 + columns(word) > width) {
        o << line << "\n";
        line = indent + "  ";
        len = line.size();
      }
      if (len > indent.size() && line.back() != ' ') line += ' ', ++len;
      line += word;
      len += columns(word);
    }
    o << line << "\n";
  }
}

// The columns a table's first column needs so that no two of its names read alike once cut: each
// name up to 8 columns past the longest start it shares with another (or whole), and the ellipsis.
std::size_t first_column_need(const TableBlock& tb, std::size_t col) {
  std::vector<std::string> names;
  for (std::size_t k = 1; k < tb.table.size(); ++k) names.push_back(tb.table[k][col]);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  auto shared = [](const std::string& a, const std::string& b) {
    std::size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return columns(a.substr(0, n));
  };
  std::size_t need = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::size_t common = 0;
    if (i > 0) common = std::max(common, shared(names[i], names[i - 1]));
    if (i + 1 < names.size()) common = std::max(common, shared(names[i], names[i + 1]));
    need = std::max(need, std::min(columns(names[i]), common + 8 + 1));
  }
  return need;
}

// A table in aligned columns, its header underlined; within `width` columns, the widest column
// is cut (with an ellipsis) until the table fits, never so that two rows' names read alike.
void text_table(std::ostringstream& o, const TableBlock& tb, std::size_t width) {
  std::vector<std::size_t> keep;
  for (std::size_t i = 0; i < tb.table.front().size(); ++i)
    if (width == 0 || !tb.wide_only.count(i)) keep.push_back(i);
  std::vector<std::size_t> w(keep.size(), 0);
  for (const auto& row : tb.table)
    for (std::size_t j = 0; j < keep.size(); ++j) w[j] = std::max(w[j], columns(row[keep[j]]));
  auto total = [&] {
    std::size_t t = 0;
    for (auto x : w) t += x + 2;
    return t - 2;
  };
  // The first column names the row: the others give way first, down to their header (at most
  // 16 columns) or 12, whichever is wider; then every column, down to 8.
  std::vector<std::size_t> least(w.size());
  for (std::size_t j = 0; j < w.size(); ++j)
    least[j] = std::max<std::size_t>(12, std::min<std::size_t>(16, columns(tb.table[0][keep[j]])));
  while (width > 0 && total() > width) {
    std::size_t pick = w.size();
    for (std::size_t j = 1; j < w.size(); ++j)
      if (w[j] > least[j] && (pick == w.size() || w[j] > w[pick])) pick = j;
    if (pick == w.size()) pick = static_cast<std::size_t>(std::max_element(w.begin(), w.end()) - w.begin());
    if (w[pick] <= 8) break;
    --w[pick];
  }
  // The rows' names must not read alike: where cutting the first column would hide where two
  // names differ (points that differ only in their last parameters), the other columns give way
  // further, down to 6, until each name shows 8 columns past what it shares with its nearest
  // neighbour, or nothing is left to give.
  if (width > 0) {
    const std::size_t need = first_column_need(tb, keep[0]);
    while (w[0] < need) {
      std::size_t pick = 0;
      for (std::size_t j = 1; j < w.size(); ++j)
        if (w[j] > 6 && (pick == 0 || w[j] > w[pick])) pick = j;
      if (pick == 0) break;
      --w[pick];
      ++w[0];
    }
  }
  for (std::size_t k = 0; k < tb.table.size(); ++k) {
    std::string line;
    for (std::size_t j = 0; j < keep.size(); ++j) {
      const std::string c = cut(tb.table[k][keep[j]], w[j]);
      line += c + (j + 1 < keep.size() ? std::string(w[j] - columns(c) + 2, ' ') : "");
    }
    o << line << "\n";
    if (k == 0) {
      for (std::size_t j = 0; j < w.size(); ++j) o << std::string(w[j], '-') << (j + 1 < w.size() ? "  " : "");
      o << "\n";
    }
  }
}

}  // namespace

std::string render_console(const Document& d, std::size_t width) {
  std::ostringstream o;
  o << d.title << "\n";
  wrap(o, join(d.facts, "; "), width);
  bool figures = false;
  for (const auto& s : d.sections) {
    for (const auto& b : s.blocks) figures = figures || b.kind == Block::Kind::Figure;
    if (!s.terminal) continue;
    const bool shows = std::any_of(s.blocks.begin(), s.blocks.end(), [](const Block& b) {
      return b.terminal && !(b.kind == Block::Kind::Text && b.brief == "-") &&
             !(b.kind == Block::Kind::Table && b.table.table.size() < 2);
    });
    if (!shows) continue;
    o << "\n" << s.title << ":\n";
    for (const auto& b : s.blocks) {
      if (!b.terminal) continue;
      switch (b.kind) {
        case Block::Kind::Text:
          if (b.brief != "-") wrap(o, b.brief.empty() ? b.text : b.brief, width);
          break;
        case Block::Kind::Table:
          if (b.table.table.size() > 1) text_table(o, b.table, width);
          break;
        case Block::Kind::List: {
          // A long list (a comparison per seed and size) is cut in the terminal, never in the files.
          constexpr std::size_t kMostItems = 16;
          const std::size_t shown = width == 0 || b.items.size() <= kMostItems ? b.items.size() : kMostItems - 1;
          for (std::size_t i = 0; i < shown; ++i) wrap(o, "- " + b.items[i], b.wrap ? width : 0);
          if (shown < b.items.size())
            wrap(o, "- ... and " + std::to_string(b.items.size() - shown) + " more in report.md (or --wide)", width);
          break;
        }
        case Block::Kind::Figure: break;
      }
    }
  }
  std::vector<std::string> elsewhere;
  for (const auto& s : d.sections)
    if (!s.terminal) elsewhere.push_back(s.title);
  o << "\n";
  wrap(o,
       std::string(figures ? "Figures and the sections " : "The sections ") + join(elsewhere, ", ") +
           " are in report.html and report.md" + (width ? "; `d500 report --wide` prints every column." : "."),
       width);
  return o.str();
}

namespace {
std::string render_console_report(const Report&, const Document& d) { return render_console(d, 120); }
}  // namespace

std::unique_ptr<Reporter> console_reporter() { return make_reporter("console", "", render_console_report); }

}  // namespace d500
