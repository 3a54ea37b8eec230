#pragma once
// At a glance: the report's first section, what a reader asks before the tables that answer it
// in full. Built from the report's own figures (no statistics of its own), each line naming the
// section that has them.
#include <optional>

#include "analysis/document.hpp"
#include "analysis/summary.hpp"

namespace d500 {

// Whether every point ran (and how many shared cores); per workload and pair of backends, the comparisons' verdicts
// counted (across seeds or launches where the points have them: those cover the variation between replicates, one
// seed's or launch's comparison does not); per workload, the scaling efficiency at each series' largest rank count; per
// accuracy target compared, the shortest and longest median time to it. Nothing where the report has a single point.
std::optional<Section> glance_section(const Report& rep);

}  // namespace d500
