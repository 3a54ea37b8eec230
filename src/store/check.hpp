#pragma once
// `d500 check`: validates results files against the schema description
// (hdf5-schema/schema.toml, compiled in) and against the invariants a reader relies on.
#include <string>
#include <vector>

namespace d500 {

struct CheckResult {
  std::string path;
  std::vector<std::string> problems;  // each names the object: "FILE:/points/ID: ..."
  std::string summary;                // e.g. "3 points: 2 complete, 1 incomplete; job complete"
  bool ok() const { return problems.empty(); }
};

CheckResult check_file(const std::string& path);

}  // namespace d500
