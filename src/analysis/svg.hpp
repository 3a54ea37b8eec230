#pragma once
// Minimal SVG plots for the HTML report and the figures Markdown links (no plotting library in
// Debian suits a C++ tool without a runtime; this is the smallest thing that does). Every figure
// carries what a reader or the browser test needs: classes on its title, axis labels, plotting
// area and series, each marker's x in data-x and its hover text in a <title>.
#include <string>
#include <vector>

namespace d500::svg {

struct Series {
  std::string name;
  std::vector<double> x, y;
  std::vector<double> lo, hi;  // error bars (same length as y), or empty
  bool dashed = false;         // reference lines (ideal, Amdahl, target)
  bool markers = true;
  bool line = true;               // joins its points in x order (only points that differ in x alone)
  std::vector<std::string> tips;  // hover text per point (same length as x), or empty
  // Its colour's place in the palette, the same for a backend in every figure of a report (-1: its
  // place among the plot's series; kBlack, kGrey: no place, for what is no backend nor parameter
  // value, so that it never reads as one: a summary and its replicates).
  int colour = -1;
};
constexpr int kBlack = -2, kGrey = -3;

// A horizontal interval drawn on the plot: a median with its interval on a target line.
struct Mark {
  double x = 0, lo = 0, hi = 0, y = 0;
  std::string tip;
};

struct Plot {
  std::string title, xlabel, ylabel;
  bool logx = false, logy = false;
  std::vector<std::string> xcats;  // a categorical x axis: x = 0, 1, ... names these
  std::vector<double> xticks;      // a numeric x axis labelled here (the rank counts), not at 1-2-5 steps
  bool binary_x = false;           // x is a size in bytes: its ticks read 64Ki, 1Mi (powers of 1024)
  std::string legend_title;        // what the series' names are values of, above them ("" none)
  // Values the axes cover besides the series' own: the panels of one figure share their axes
  // (xspan is ignored on a categorical axis).
  std::vector<double> xspan, yspan;
  std::vector<Series> series;
  std::vector<Mark> marks;
};

std::string render(const Plot& p);

// One box per sample: quartiles, whiskers to the furthest value within 1.5 IQR, the values beyond
// drawn one by one, and the median's confidence interval as a notch bar.
struct Box {
  std::string name, tip;
  std::vector<double> values;  // any order
  double median = 0, lo = 0, hi = 0;
  bool has_ci = false;
  int colour = -1;  // its place in the palette (a backend's, as Series::colour); -1: the box's own
};

// Drawn on its side: a row per box, its name on the left, the values on the axis below.
struct BoxPlot {
  std::string title;
  std::string names_label;   // what the boxes' names are, above their column
  std::string values_label;  // what the values are, below their axis
  bool log_values = false;
  std::vector<Box> boxes;
};

std::string render(const BoxPlot& p);

// Stacked bars, one per category: each layer's share of the category's whole (e.g. a step's
// compute and its communication at each rank count), in percent.
struct StackedBars {
  std::string title, xlabel, ylabel;
  std::vector<std::string> categories;
  struct Layer {
    std::string name;
    std::vector<double> values;  // per category, percent
    std::vector<std::string> tips;
  };
  std::vector<Layer> layers;
};

std::string render(const StackedBars& p);

// Whether a set of positive values spans a decade or more (log axis).
bool spans_decade(const std::vector<double>& v);

}  // namespace d500::svg
