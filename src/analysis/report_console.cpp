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

// The first `cols` columns of `s`, its last one an ellipsis where it was cut.
std::string cut(const std::string& s, std::size_t cols) {
  if (text_columns(s) <= cols) return s;
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
  o << wrap_words(text, width, indent);
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
    return text_columns(a.substr(0, n));
  };
  std::size_t need = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::size_t common = 0;
    if (i > 0) common = std::max(common, shared(names[i], names[i - 1]));
    if (i + 1 < names.size()) common = std::max(common, shared(names[i], names[i + 1]));
    need = std::max(need, std::min(text_columns(names[i]), common + 8 + 1));
  }
  return need;
}

// A header's pieces where it may break: after each space (the space dropped) and after each
// underscore of a parameter's name ("ranks_per_node" over two lines: "ranks_per_" and "node"),
// each with whether a space joined it to the next.
std::vector<std::pair<std::string, bool>> header_pieces(const std::string& h) {
  std::vector<std::pair<std::string, bool>> out;
  for (const auto& word : split(h, ' ')) {
    if (word.empty()) continue;
    std::size_t from = 0;
    for (std::size_t at = word.find('_'); at != std::string::npos && at + 1 < word.size();
         at = word.find('_', at + 1)) {
      out.push_back({word.substr(from, at + 1 - from), false});
      from = at + 1;
    }
    out.push_back({word.substr(from), true});
  }
  return out;
}

// A header's lines in a column `cols` wide: its pieces, as many a line as fit (a piece wider than
// the column cut).
std::vector<std::string> header_lines(const std::string& h, std::size_t cols) {
  std::vector<std::string> lines;
  bool spaced = false;  // the last piece was followed by a space
  for (const auto& [piece, space] : header_pieces(h)) {
    const std::string glue = spaced ? " " : "";
    if (!lines.empty() && text_columns(lines.back()) + glue.size() + text_columns(piece) <= cols)
      lines.back() += glue + piece;
    else
      lines.push_back(cut(piece, cols));
    spaced = space;
  }
  if (lines.empty()) lines.emplace_back();
  return lines;
}

std::size_t longest_word(const std::string& h) {
  std::size_t n = 0;
  for (const auto& [piece, space] : header_pieces(h)) n = std::max(n, text_columns(piece));
  return n;
}

// A table in aligned columns, its header underlined; within `width` columns, first a header wider
// than its column's values wraps at its spaces ("planned" over "memory"), then the columns that do
// not name the row (TableBlock::naming) are cut (with an ellipsis), those whose cut touches fewest
// cells first, down to their header's longest word (at most 16) or 12, then the widest of all,
// never so that two rows' names read alike.
void text_table(std::ostringstream& o, const TableBlock& tb, std::size_t width) {
  std::vector<std::size_t> keep;
  for (std::size_t i = 0; i < tb.table.front().size(); ++i)
    if (width == 0 || !tb.wide_only.count(i)) keep.push_back(i);
  std::vector<std::size_t> w(keep.size(), 0), values(keep.size(), 0);
  for (std::size_t k = 0; k < tb.table.size(); ++k)
    for (std::size_t j = 0; j < keep.size(); ++j) {
      w[j] = std::max(w[j], text_columns(tb.table[k][keep[j]]));
      if (k > 0) values[j] = std::max(values[j], text_columns(tb.table[k][keep[j]]));
    }
  auto total = [&] {
    std::size_t t = 0;
    for (auto x : w) t += x + 2;
    return t - 2;
  };
  auto header = [&](std::size_t j) -> const std::string& { return tb.table[0][keep[j]]; };
  // Headers wrap first, the one with the most to give first, down to their values or longest word.
  while (width > 0 && total() > width) {
    std::size_t pick = w.size(), most = 0;
    for (std::size_t j = 0; j < w.size(); ++j) {
      const std::size_t floor = std::max(values[j], longest_word(header(j)));
      if (w[j] > floor && w[j] - floor > most) pick = j, most = w[j] - floor;
    }
    if (pick == w.size()) break;
    --w[pick];
  }
  std::size_t naming = 0;  // of the columns shown
  while (naming < keep.size() && (naming == 0 || keep[naming] < tb.naming)) ++naming;
  std::vector<std::size_t> least(w.size());
  for (std::size_t j = 0; j < w.size(); ++j)
    least[j] = std::max<std::size_t>(12, std::min<std::size_t>(16, longest_word(header(j))));
  // Among those, the one whose next column cuts the fewest cells, a cell with a number in it
  // counting four (cut, "8.4e-04" reads "8.4e-0…"), then the widest. A naming column but the first
  // competes too, each cell it cuts counting twice, down to where its values still read apart (8
  // columns past what one shares with another): "resnet50/res3_3x3_strid…" rather than every
  // "passed (2.1e-0…".
  std::vector<std::size_t> apart(w.size(), 0);
  for (std::size_t j = 1; j < naming; ++j) apart[j] = std::max(least[j], first_column_need(tb, keep[j]));
  auto cost = [&](std::size_t j) {
    std::size_t c = 0;
    for (std::size_t k = 1; k < tb.table.size(); ++k) {
      const std::string& cell = tb.table[k][keep[j]];
      if (text_columns(cell) >= w[j]) c += std::any_of(cell.begin(), cell.end(), ::isdigit) ? 4 : 1;
    }
    return j < naming ? 2 * c : c;
  };
  while (width > 0 && total() > width) {
    std::size_t pick = w.size(), pick_cost = 0;
    for (std::size_t j = 1; j < w.size(); ++j) {
      if (w[j] <= (j < naming ? apart[j] : least[j])) continue;
      const std::size_t c = cost(j);
      if (pick == w.size() || c < pick_cost || (c == pick_cost && w[j] > w[pick])) pick = j, pick_cost = c;
    }
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
  auto print = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t j = 0; j < keep.size(); ++j) {
      const std::string c = cut(cells[j], w[j]);
      line += c + (j + 1 < keep.size() ? std::string(w[j] - text_columns(c) + 2, ' ') : "");
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    o << line << "\n";
  };
  // The header, its lines set on the last so that a short header sits above its underline.
  std::vector<std::vector<std::string>> heads(keep.size());
  std::size_t depth = 1;
  for (std::size_t j = 0; j < keep.size(); ++j) {
    heads[j] = text_columns(header(j)) <= w[j] ? std::vector<std::string>{header(j)} : header_lines(header(j), w[j]);
    depth = std::max(depth, heads[j].size());
  }
  for (std::size_t line = 0; line < depth; ++line) {
    std::vector<std::string> cells(keep.size());
    for (std::size_t j = 0; j < keep.size(); ++j)
      if (const std::size_t skip = depth - heads[j].size(); line >= skip) cells[j] = heads[j][line - skip];
    print(cells);
  }
  for (std::size_t j = 0; j < w.size(); ++j) o << std::string(w[j], '-') << (j + 1 < w.size() ? "  " : "");
  o << "\n";
  for (std::size_t k = 1; k < tb.table.size(); ++k) {
    std::vector<std::string> cells(keep.size());
    for (std::size_t j = 0; j < keep.size(); ++j) cells[j] = tb.table[k][keep[j]];
    print(cells);
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
          for (std::size_t i = 0; i < shown; ++i) {
            const bool brief = width > 0 && i < b.brief_items.size() && !b.brief_items[i].empty();
            wrap(o, "- " + (brief ? b.brief_items[i] : b.items[i]), b.wrap ? width : 0);
          }
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
