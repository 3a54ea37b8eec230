// The markdown reporter: report.md, the report's document (document.hpp) in Markdown; its figures
// are the SVG files write_reports puts in figures/ beside it. A block's fold is a <details> box,
// as in report.html: Markdown viewers that render HTML (GitHub's, GitLab's) keep it closed.
#include <sstream>

#include "analysis/document.hpp"
#include "analysis/reporters.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

std::string render_markdown(const Report& rep, const Document& d) {
  std::ostringstream o;
  o << "# " << d.title << "\n\n";
  for (const auto& f : d.facts) o << "- " << f << "\n";
  o << "\n";
  for (const auto& s : d.sections) {
    o << std::string(static_cast<std::size_t>(s.depth), '#') << " " << s.title << "\n\n";
    std::string fold;  // the <details> open in this section, if any (GitHub and GitLab render it)
    for (const auto& b : s.blocks) {
      if (!b.document) continue;
      o << fold_tags(fold, b, "\n\n");
      switch (b.kind) {
        case Block::Kind::Text: o << b.text << "\n\n"; break;
        case Block::Kind::Table:
          if (b.table.table.size() > 1) markdown_table(o, b.table.table);
          break;
        case Block::Kind::List:
          for (const auto& item : b.items) o << "- " << item << "\n";
          o << "\n";
          break;
        case Block::Kind::Figure:
          o << "![" << b.text << "](" << figures_dir(rep.confidence) << "/" << b.name << ".svg)\n\n";
          break;
      }
    }
    if (!fold.empty()) o << "</details>\n\n";
  }
  return o.str();
}

}  // namespace

std::unique_ptr<Reporter> markdown_reporter() { return make_reporter("markdown", "report.md", render_markdown); }

}  // namespace d500
