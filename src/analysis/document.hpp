#pragma once
// The report as data: one list of sections (title, notes, tables, figures, lists), built once
// from the summary. The console, Markdown, HTML and JSON reporters only render this list, so a
// new section is written in one place (document.cpp) and the formats cannot drift apart.
#include <set>
#include <string>
#include <vector>

#include "analysis/format.hpp"
#include "analysis/summary.hpp"

namespace d500 {

struct TableBlock {
  Table table;                         // the header row first
  std::vector<std::string> row_class;  // per body row: "bad", "warn" or "" (HTML)
  // per body row and column: "faster", "slower" or "" (HTML shades the cell; empty: none)
  std::vector<std::vector<std::string>> cell_class;
  std::vector<std::string> row_title;  // per body row: the hover text (HTML: the point's full canonical form)
  std::set<std::size_t> wide_only;     // columns the terminal prints only with --wide
  std::size_t naming = 1;              // the leading columns that name a row: the terminal cuts them last
  bool sortable = false;               // HTML: a click on a header sorts by that column
};

struct Block {
  enum class Kind { Text, Table, Figure, List };
  Kind kind = Kind::Text;
  std::string text;      // Text: a paragraph; Figure: its caption
  std::string brief;     // Text: what the terminal prints instead ("" prints `text`)
  bool terminal = true;  // printed in the terminal (figures never are)
  bool document = true;  // in report.md and report.html (false: the terminal's words for a table they show)
  TableBlock table;
  std::string svg, name;                 // Figure: the SVG and its file name (figures/<name>.svg)
  std::vector<std::string> items;        // List
  std::vector<std::string> brief_items;  // List: what the terminal prints instead (empty: items)
  bool wrap = true;                      // List: the terminal may wrap its items (not where they hold paths)
  // report.html and report.md: consecutive blocks with the same fold sit in one closed <details>,
  // this its summary (detail a table above already summarises); the terminal ignores it.
  std::string fold;
};

struct Section {
  std::string title;
  int depth = 2;         // 2: a section; 3: a subsection
  bool terminal = true;  // printed in the terminal
  std::vector<Block> blocks;
};

struct Document {
  std::string title;
  std::vector<std::string> facts;  // campaign hash, d500, files read, seed
  std::vector<Section> sections;
};

Document report_document(const Report& rep);

// The blocks every section is made of (document.cpp, glance.cpp, breakdown.cpp): a paragraph, with
// what the terminal prints instead ("-": nothing); a table, in the terminal or the documents only;
// a list; and any of them as the terminal's words for what the documents show instead.
Block text(std::string t, std::string brief = "");
Block table(Table t, bool terminal = true);
Block list(std::vector<std::string> items);
Block terminal_words(Block b);

// The <details> tags before block `b` of a section, given the box open before it (`open`, "" for
// none; updated): the close of that box and the open of b's (an HTML-escaped summary), each
// followed by `gap` ("\n": HTML; "\n\n": Markdown, whose content inside stays Markdown).
std::string fold_tags(std::string& open, const Block& b, const std::string& gap);

// The folder the figures are written to beside report.md ("figures", or "figures-99").
std::string figures_dir(double confidence);

// The document for a terminal `width` columns wide (0: no limit, `--wide`).
std::string render_console(const Document& d, std::size_t width);

}  // namespace d500
