#include "store/index.hpp"

#include <filesystem>

#include "common/error.hpp"
#include "store/h5.hpp"

namespace fs = std::filesystem;

namespace d500 {

void write_campaign_index(const std::string& run_dir, const std::string& campaign, const std::string& campaign_hash,
                          const std::vector<std::string>& job_files, const std::vector<IndexEntry>& points) {
  h5::init();
  const fs::path final_path = fs::path(run_dir) / "campaign.h5";
  const fs::path tmp = fs::path(run_dir) / "campaign.h5.tmp";
  {
    std::error_code gone;
    fs::remove(tmp, gone);  // a leftover (or a planted link: removed, never followed)
  }
  const std::string w = final_path.string();
  // Targets relative to the index's own directory: both sides absolute, so that a run directory
  // named relatively ("runs/x") and files listed absolutely still relate.
  const fs::path base = fs::absolute(run_dir).lexically_normal();
  auto relative = [&](const std::string& file) {
    return fs::absolute(file).lexically_normal().lexically_relative(base).string();
  };
  try {
    h5::Handle f(h5::check(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), "H5Fcreate", w), H5Fclose);
    h5::write_attr(f, "schema", std::string("d500-campaign-index"));
    h5::write_attr(f, "schema_version", std::int64_t{1});
    h5::write_attr(f, "campaign", campaign);
    h5::write_attr(f, "campaign_hash", campaign_hash);
    h5::Handle jobs(h5::check(H5Gcreate2(f, "jobs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "H5Gcreate2", w), H5Gclose);
    for (const auto& file : job_files) {
      // Link targets are relative to the index's own directory, so the run directory can move.
      std::string rel = relative(file);
      std::string name = fs::path(file).filename().string();
      h5::check(H5Lcreate_external(rel.c_str(), "/", jobs, name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
                "H5Lcreate_external", w + ":/jobs/" + name);
    }
    h5::Handle pts(h5::check(H5Gcreate2(f, "points", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "H5Gcreate2", w),
                   H5Gclose);
    for (const auto& p : points) {
      std::string rel = relative(p.file);
      h5::check(H5Lcreate_external(rel.c_str(), ("/points/" + p.point_id).c_str(), pts, p.point_id.c_str(), H5P_DEFAULT,
                                   H5P_DEFAULT),
                "H5Lcreate_external", w + ":/points/" + p.point_id);
    }
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);  // the index in place, if any, stays as it was
    throw;
  }
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  if (ec) throw Error(w + ": cannot move the index into place: " + ec.message());
}

}  // namespace d500
