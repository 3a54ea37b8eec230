#pragma once
// For the analysis tests: a report of rows made in the test (no files), named as `d500 report`
// names them.
#include <utility>
#include <vector>

#include "analysis/names.hpp"
#include "analysis/summary.hpp"

namespace d500::test {

inline Report report_of(std::vector<PointRow> rows) {
  Report rep;
  rep.campaign = "t";
  rep.rows = std::move(rows);
  rep.names = point_names(rep.rows);
  return rep;
}

}  // namespace d500::test
