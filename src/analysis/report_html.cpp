// The html reporter: report.html, the report's document (document.hpp) as one offline page:
// figures inline (SVG, hover text in <title>), tables sortable by a click on a header.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>

#include "analysis/document.hpp"
#include "analysis/reporters.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

// A click on a header sorts its table by that column (numbers by value: "1.5 ms" before "12 us"
// is not attempted; a cell is compared by its leading number where both have one).
constexpr const char* kSortScript = R"JS(
document.querySelectorAll('table.sortable th').forEach(function (th, _) {
  th.addEventListener('click', function () {
    var table = th.closest('table'), col = Array.prototype.indexOf.call(th.parentNode.children, th);
    var rows = Array.prototype.slice.call(table.querySelectorAll('tr')).slice(1);
    var dir = th.dataset.dir === 'asc' ? -1 : 1;
    th.dataset.dir = dir === 1 ? 'asc' : 'desc';
    rows.sort(function (a, b) {
      var x = a.children[col].textContent, y = b.children[col].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      if (!isNaN(nx) && !isNaN(ny) && nx !== ny) return dir * (nx - ny);
      return dir * x.localeCompare(y);
    });
    rows.forEach(function (r) { table.appendChild(r); });
  });
});
)JS";

// A table in a box that scrolls sideways where it is wider than the page: a cell keeps its line
// ("passed (8.4e-04)", "[63.99 ms, 79.81 ms]", "libtorch-native" broken over two lines read as two
// values), but for a long text (over kWrapFrom characters: a reason, an implementation), which wraps.
constexpr std::size_t kWrapFrom = 40;
void table_html(std::ostringstream& o, const TableBlock& tb) {
  o << "<div class=\"scroll\"><table" << (tb.sortable ? " class=\"sortable\"" : "") << ">\n";
  // The columns that name the row (TableBlock::naming) and hold words (channels_last, not n = 512)
  // read on the left, as the first does.
  std::set<std::size_t> words;
  for (std::size_t j = 1; j < tb.naming && j < tb.table[0].size(); ++j)
    for (std::size_t k = 1; k < tb.table.size(); ++k) {
      const std::string& c = tb.table[k][j];
      char* end = nullptr;
      std::strtod(c.c_str(), &end);
      if (c != "-" && (c.empty() || *end != '\0')) words.insert(j);
    }
  // So do the figures' columns of words, most of their cells (a status, a verdict: "complete",
  // "passed (6.1e-06)"; an environment's values: "vm", "g++ 12.2.0", "2"), not those of numbers
  // with their units ("75.66 ms", "[68.60 ms, 85.35 ms]", "own executor" among "100%"); a long text
  // of theirs still wraps.
  std::set<std::size_t> wordy;
  for (std::size_t j = std::max<std::size_t>(tb.naming, 1); tb.table.size() > 1 && j < tb.table[0].size(); ++j) {
    std::size_t cells = 0, alpha = 0;
    for (std::size_t k = 1; k < tb.table.size(); ++k) {
      const std::string& c = j < tb.table[k].size() ? tb.table[k][j] : std::string();
      if (c.empty() || c == "-") continue;
      ++cells;
      alpha += std::isalpha(static_cast<unsigned char>(c[0])) != 0;
    }
    if (cells > 0 && 2 * alpha > cells) wordy.insert(j);
  }
  for (std::size_t k = 0; k < tb.table.size(); ++k) {
    std::string attrs;
    if (k > 0 && k - 1 < tb.row_class.size() && !tb.row_class[k - 1].empty())
      attrs += " class=\"" + tb.row_class[k - 1] + "\"";
    if (k > 0 && k - 1 < tb.row_title.size()) attrs += " title=\"" + html_escape(tb.row_title[k - 1]) + "\"";
    o << "<tr" << attrs << ">";
    for (std::size_t j = 0; j < tb.table[k].size(); ++j) {
      const std::string& c = tb.table[k][j];
      // A long text wraps; in a column of words it reads on the left too.
      std::string cls = words.count(j)                  ? "name"
                        : k > 0 && c.size() > kWrapFrom ? (wordy.count(j) ? "text name" : "text")
                        : wordy.count(j)                ? "name"
                                                        : "";
      if (k > 0 && k - 1 < tb.cell_class.size() && j < tb.cell_class[k - 1].size() && !tb.cell_class[k - 1][j].empty())
        cls += (cls.empty() ? "" : " ") + tb.cell_class[k - 1][j];
      const std::string tag = k == 0 ? "th" : "td";
      // A header may break after an underscore ("ranks_per_node" over its column of 1, 2 and 4) or
      // an equals sign ("memory_format=channels_last" over a column of times).
      std::string shown = html_escape(c);
      if (k == 0)
        for (std::size_t at = shown.find_first_of("_="); at != std::string::npos;
             at = shown.find_first_of("_=", at + 6))
          shown.insert(at + 1, "<wbr>");
      o << "<" << tag << (cls.empty() ? "" : " class=\"" + cls + "\"") << ">" << shown << "</" << tag << ">";
    }
    o << "</tr>\n";
  }
  o << "</table></div>\n";
}

std::string anchor(std::size_t i) { return "s" + std::to_string(i + 1); }

std::string render_html(const Report&, const Document& d) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << html_escape(d.title)
    << "</title>\n<style>"
    << "body{font-family:sans-serif;margin:2em;max-width:100em;line-height:1.4}"
    << "div.scroll{overflow-x:auto;margin-bottom:1em}table{border-collapse:collapse;font-size:90%}"
    << "td,th{border:1px solid #ccc;padding:.25em .5em;text-align:right}td{white-space:nowrap}"
    << "td.text{white-space:normal;min-width:20em}.name{text-align:left}"
    << "td:first-child,th:first-child{text-align:left}th{background:#f4f4f4}table.sortable th{cursor:pointer}"
    << "table.sortable th:after{content:' \\2195';color:#aaa}tr[title]:hover{background:#eef}"
    << ".bad{background:#fdd}.warn{background:#ffd}td.faster{background:#dfd}td.slower{background:#fdd}figure{display:inline-block;margin:0 1em 1em 0;vertical-align:top}"
    // Two figures a row where they fit at nearly their size (the panels of one figure side by
    // side, as small multiples read), one below that; a figure scales with its width.
    << "svg.d500-figure{max-width:100%;height:auto}@media (min-width:1200px){figure{width:calc(50% - 1.5em)}"
    << "svg.d500-figure{width:100%}}"
    << "figcaption{max-width:600px;font-size:85%;color:#444}summary{cursor:pointer;margin-bottom:1em;color:#036}nav{columns:3;font-size:90%}p{max-width:70em}</style></head><body>\n"
    << "<h1>" << html_escape(d.title) << "</h1>\n<p>" << html_escape(join(d.facts, "; ")) << "</p>\n<nav>\n";
  for (std::size_t i = 0; i < d.sections.size(); ++i)
    if (d.sections[i].depth == 2 || d.sections[i].title.rfind("Results: ", 0) == 0)
      o << "<div>" << (d.sections[i].depth > 2 ? "&nbsp;&nbsp;" : "") << "<a href=\"#" << anchor(i) << "\">"
        << html_escape(d.sections[i].title) << "</a></div>\n";
  o << "</nav>\n";
  for (std::size_t i = 0; i < d.sections.size(); ++i) {
    const Section& s = d.sections[i];
    o << "<h" << s.depth << " id=\"" << anchor(i) << "\">" << html_escape(s.title) << "</h" << s.depth << ">\n";
    std::string fold;  // the <details> open in this section, if any
    for (const auto& b : s.blocks) {
      if (!b.document) continue;
      o << fold_tags(fold, b, "\n");
      switch (b.kind) {
        case Block::Kind::Text: o << "<p>" << html_escape(b.text) << "</p>\n"; break;
        case Block::Kind::Table:
          if (b.table.table.size() > 1) table_html(o, b.table);
          break;
        case Block::Kind::List:
          o << "<ul>\n";
          for (const auto& item : b.items) o << "<li>" << html_escape(item) << "</li>\n";
          o << "</ul>\n";
          break;
        case Block::Kind::Figure:
          o << "<figure id=\"" << html_escape(b.name) << "\">" << b.svg << "<figcaption>" << html_escape(b.text)
            << "</figcaption></figure>\n";
          break;
      }
    }
    if (!fold.empty()) o << "</details>\n";
  }
  o << "<script>" << kSortScript << "</script>\n</body></html>\n";
  return o.str();
}

}  // namespace

std::unique_ptr<Reporter> html_reporter() { return make_reporter("html", "report.html", render_html); }

}  // namespace d500
