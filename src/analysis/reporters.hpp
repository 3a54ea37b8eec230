#pragma once
// The report's outputs, each a Reporter over the summary (summary.hpp), each in its own file
// (report_<name>.cpp), all listed in one table (reporters.cpp). A new output -- plots per swept
// parameter, an MLPerf-style log -- is one file defining a Reporter, a line in that table and one
// in CMakeLists.txt.
#include <memory>
#include <string>
#include <vector>

#include "analysis/summary.hpp"

namespace d500 {

struct Document;

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual std::string name() const = 0;  // "markdown"
  // The file it writes in the run directory ("report.md"); "" for one that only prints.
  virtual std::string file() const = 0;
  // The summary and the report's sections built from it (document.hpp): built once, whatever
  // the number of reporters that render them.
  virtual std::string render_report(const Report& r, const Document& d) const = 0;
};

// A reporter from its name, file and render function: what each report_<name>.cpp returns.
std::unique_ptr<Reporter> make_reporter(std::string name, std::string file,
                                        std::string (*render)(const Report&, const Document&));

// Every reporter, in the order they are written.
const std::vector<std::unique_ptr<Reporter>>& reporters();
const Reporter& find_reporter(const std::string& name);  // throws naming the known ones

// The name a reporter's file gets at a confidence level: its own name at the default 95%
// ("report.md"), else with the level before the extension ("report-99.md"), so that a second
// report at another level never overwrites the first.
std::string output_name(const std::string& file, double confidence);

// Writes every reporter's file into the run directory (atomically, one by one) and the
// campaign index of the results files. Returns the files written, in order.
std::vector<std::string> write_reports(const Report& r, const Document& d);

}  // namespace d500
