#pragma once
// Networks on d500's executor: where a step's time goes, the points that ran the same steps side by
// side (two backends, two layouts, three launches of one network), so that a reader compares them
// row by row, Conv backward against Conv backward, rather than one point's table against another's.
// Built from the report's own figures (PointRow's by_operator, all_steps, top_steps).
#include <vector>

#include "analysis/document.hpp"
#include "analysis/summary.hpp"

namespace d500 {

// Per group of points with the same steps (the same network and pass; at most six points a
// table), its captions and tables: by operator and pass (each point's time and share), and the
// costliest steps (those among each point's costliest, each point's median and what computed it).
// A point alone keeps its own two tables, with the steps' shares and GFLOP/s. First, the
// terminal's words for these tables (which it does not print): per group, what costs most.
std::vector<Block> network_breakdowns(const Report& rep);

}  // namespace d500
