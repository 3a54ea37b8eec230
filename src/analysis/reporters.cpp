#include "analysis/reporters.hpp"

#include <cmath>

#include <filesystem>

#include "analysis/document.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "store/index.hpp"

namespace d500 {

// Each defined in its own report_<name>.cpp.
std::unique_ptr<Reporter> console_reporter();
std::unique_ptr<Reporter> markdown_reporter();
std::unique_ptr<Reporter> html_reporter();
std::unique_ptr<Reporter> csv_reporter();
std::unique_ptr<Reporter> json_reporter();

namespace {

class FunctionReporter final : public Reporter {
 public:
  FunctionReporter(std::string name, std::string file, std::string (*render)(const Report&, const Document&))
      : name_(std::move(name)), file_(std::move(file)), render_(render) {}
  std::string name() const override { return name_; }
  std::string file() const override { return file_; }
  std::string render_report(const Report& r, const Document& d) const override { return render_(r, d); }

 private:
  std::string name_, file_;
  std::string (*render_)(const Report&, const Document&);
};

}  // namespace

std::unique_ptr<Reporter> make_reporter(std::string name, std::string file,
                                        std::string (*render)(const Report&, const Document&)) {
  return std::make_unique<FunctionReporter>(std::move(name), std::move(file), render);
}

const std::vector<std::unique_ptr<Reporter>>& reporters() {
  static const std::vector<std::unique_ptr<Reporter>> list = [] {
    std::vector<std::unique_ptr<Reporter>> l;
    l.push_back(console_reporter());
    l.push_back(markdown_reporter());
    l.push_back(html_reporter());
    l.push_back(csv_reporter());
    l.push_back(json_reporter());
    return l;
  }();
  return list;
}

const Reporter& find_reporter(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& r : reporters()) {
    if (r->name() == name) return *r;
    names.push_back(r->name());
  }
  throw Error("no reporter '" + name + "'; known: " + join(names, ", "));
}

std::string output_name(const std::string& file, double confidence) {
  const int pct = static_cast<int>(std::lround(confidence * 1000));  // 950, 990, 995
  if (pct == 950) return file;
  const std::string level =
      pct % 10 == 0 ? std::to_string(pct / 10) : std::to_string(pct / 10) + "." + std::to_string(pct % 10);
  const auto dot = file.find('.');
  return file.substr(0, dot) + "-" + level + (dot == std::string::npos ? "" : file.substr(dot));
}

std::vector<std::string> write_reports(const Report& rep, const Document& doc) {
  const std::filesystem::path d(rep.dir);
  std::vector<std::string> written;
  for (const auto& r : reporters())
    if (!r->file().empty()) {
      const std::string path = (d / output_name(r->file(), rep.confidence)).string();
      write_file_atomic(path, r->render_report(rep, doc));
      written.push_back(path);
    }
  // The figures, one SVG file each, which report.md links (report.html carries them inline).
  const std::filesystem::path figs = d / figures_dir(rep.confidence);
  // The folder is the report's own: figures of an earlier report that this one no longer draws go.
  if (std::filesystem::is_directory(figs))
    for (const auto& e : std::filesystem::directory_iterator(figs))
      if (e.path().extension() == ".svg") std::filesystem::remove(e.path());
  for (const auto& s : doc.sections)
    for (const auto& b : s.blocks)
      if (b.kind == Block::Kind::Figure) {
        std::filesystem::create_directories(figs);
        write_file_atomic((figs / (b.name + ".svg")).string(), "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + b.svg);
      }
  std::vector<IndexEntry> pts;
  for (const auto& r : rep.rows)
    if (!r.file.empty()) pts.push_back({r.id, r.file});
  write_campaign_index(rep.dir, rep.campaign, rep.campaign_hash, rep.files, pts);
  written.push_back((d / "campaign.h5").string());
  return written;
}

}  // namespace d500
