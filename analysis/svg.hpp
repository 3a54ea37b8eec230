#pragma once
// Minimal SVG line/point plots with error bars, for the HTML report (no plotting library in
// Debian suits a C++ tool without a runtime; this is the smallest thing that does).
#include <string>
#include <vector>

namespace d500::svg {

struct Series {
  std::string name;
  std::vector<double> x, y;
  std::vector<double> lo, hi;  // error bars (same length as y), or empty
  bool dashed = false;         // reference lines (ideal, Amdahl, target)
  bool markers = true;
};

struct Plot {
  std::string title, xlabel, ylabel;
  bool logx = false, logy = false;
  std::vector<Series> series;
};

std::string render(const Plot& p);

}  // namespace d500::svg
