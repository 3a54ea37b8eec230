#pragma once
// The campaign index: one small HDF5 file, DIR/campaign.h5, that gives h5py users the whole
// campaign through external links: /jobs/<job file> -> the job file's root, and
// /points/<point_id> -> the best record of that point (the one the report uses).
#include <string>
#include <utility>
#include <vector>

namespace d500 {

struct IndexEntry {
  std::string point_id;
  std::string file;  // relative to the run directory, e.g. results/job-0000.h5
};

void write_campaign_index(const std::string& run_dir, const std::string& campaign, const std::string& campaign_hash,
                          const std::vector<std::string>& job_files, const std::vector<IndexEntry>& points);

}  // namespace d500
