// The report's sections, built once from the summary: every reporter renders this list.
#include "analysis/document.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "analysis/breakdown.hpp"
#include "analysis/glance.hpp"
#include "analysis/reporters.hpp"
#include "analysis/svg.hpp"
#include "common/text.hpp"

namespace d500 {

Block text(std::string t, std::string brief) {
  Block b;
  b.text = std::move(t);
  b.brief = std::move(brief);
  return b;
}

Block table(Table t, bool terminal) {
  Block b;
  b.kind = Block::Kind::Table;
  b.table.table = std::move(t);
  b.terminal = terminal;
  return b;
}

Block list(std::vector<std::string> items) {
  Block b;
  b.kind = Block::Kind::List;
  b.items = std::move(items);
  return b;
}

Block terminal_words(Block b) {
  b.document = false;
  return b;
}

namespace {

Block figure(std::string svg, std::string name, std::string caption) {
  Block b;
  b.kind = Block::Kind::Figure;
  b.svg = std::move(svg);
  b.name = std::move(name);
  b.text = std::move(caption);
  b.terminal = false;
  return b;
}

bool numeric(const Value& v) { return std::holds_alternative<std::int64_t>(v) || std::holds_alternative<double>(v); }
double number(const Value& v) {
  return std::holds_alternative<std::int64_t>(v) ? static_cast<double>(std::get<std::int64_t>(v)) : std::get<double>(v);
}

// A file name from a label: letters, digits and '-' only.
std::string slug(const std::string& s) {
  std::string o;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ok)
      o += c;
    else if (!o.empty() && o.back() != '-')
      o += '-';
  }
  while (!o.empty() && o.back() == '-') o.pop_back();
  return o.substr(0, 60);
}

std::string hover(const PointRow& r, const PointNames& names) {
  std::string t =
      names.label(r) + "\nmedian " + fmt_time(r.time.median) + " " + ci_text(r) + ", n=" + std::to_string(r.time.n);
  if (r.rate > 0) t += "\nrate " + fmt_sig(r.rate, 4) + " " + r.rate_unit + " " + rate_ci_text(r);
  return t;
}

// The swept axis of a workload's figure: its numeric parameter that varies (the rank count when
// nodes or ranks per node vary), preferring the sizes a user sweeps; else a categorical one.
struct XChoice {
  std::string name;  // a parameter, or "ranks"
  bool categorical = false;
};

// A backend's own settings (PointNames::own) where the rows have several backends: they go with
// the backend (PointNames::who names them), never on an axis or into a panel's title, so that
// cuda and libtorch-cuda share a figure whatever cuda's cudnn_api and fusion.
std::set<std::string> own_keys(const std::vector<const PointRow*>& rows, const PointNames& names) {
  if (rows.empty() ||
      std::all_of(rows.begin(), rows.end(), [&](const PointRow* r) { return r->backend == rows[0]->backend; }))
    return {};
  const std::set<std::string>* own = names.own_of(*rows[0]);
  return own ? *own : std::set<std::string>{};
}

// Each row's name as its backend's series: PointNames::who among `rows`.
std::map<const PointRow*, std::string> backend_names(const std::vector<const PointRow*>& rows,
                                                     const PointNames& names) {
  std::map<const PointRow*, std::string> who;
  for (const auto* r : rows) who[r] = names.who(*r, rows);
  return who;
}

XChoice choose_x(const std::vector<const PointRow*>& rows, const PointNames& names, const std::string& workload,
                 const std::set<std::string>& own) {
  std::vector<std::string> numeric_names, other;
  auto it = names.varying.find(workload);
  if (it != names.varying.end())
    for (const auto& k : it->second) {
      if (k == "seed" || k == "launch" || k == "nodes" || k == "ranks_per_node" || own.count(k)) continue;
      const bool all = std::all_of(rows.begin(), rows.end(), [&](const PointRow* r) {
        auto v = r->params.find(k);
        return v != r->params.end() && numeric(v->second);
      });
      (all ? numeric_names : other).push_back(k);
    }
  if (names.varies(workload, "nodes") || names.varies(workload, "ranks_per_node")) numeric_names.push_back("ranks");
  for (const char* p : {"n", "m", "k", "bytes", "size", "batch", "ranks", "microbatch", "hidden", "channels"})
    if (std::find(numeric_names.begin(), numeric_names.end(), p) != numeric_names.end()) return {p, false};
  auto distinct = [&](const std::string& k) {
    std::set<std::string> v;
    for (const auto* r : rows)
      if (r->params.count(k)) v.insert(canonical(r->params.at(k)));
    return v.size();
  };
  auto most = [&](const std::vector<std::string>& c) {
    return *std::max_element(c.begin(), c.end(),
                             [&](const auto& a, const auto& b) { return distinct(a) < distinct(b); });
  };
  if (!numeric_names.empty()) return {most(numeric_names), false};
  if (!other.empty()) return {most(other), true};
  return {"", true};
}

// The naming columns another one fixes (common/value.hpp's fixed_by_another) among `rows`.
std::vector<std::string> fixed_by_another(const std::vector<const PointRow*>& rows,
                                          const std::vector<std::string>& keys) {
  std::vector<const Params*> params;
  for (const auto* r : rows) params.push_back(&r->params);
  return d500::fixed_by_another(params, keys);
}

// A table named by `backend` and then the columns `vary`: those another one fixes among `rows` are
// the terminal's only with --wide (added to `wide`, by column). Returns them.
std::vector<std::string> fixed_to_wide(const std::vector<const PointRow*>& rows, const std::vector<std::string>& vary,
                                       std::set<std::size_t>& wide) {
  const std::vector<std::string> fixed = fixed_by_another(rows, vary);
  for (const auto& k : fixed)
    wide.insert(1 + static_cast<std::size_t>(std::find(vary.begin(), vary.end(), k) - vary.begin()));
  return fixed;
}

// Per workload: its rate (or time) against the swept axis, a series per backend, the other
// varying parameters as small multiples; then the distribution of every point's repetitions.
// Parameters tied one-to-one to the axis `x` (m = k = n swept together): they belong to it, not
// to a panel.
std::set<std::string> tied_to_axis(const std::vector<const PointRow*>& rows, const PointNames& names,
                                   const std::string& workload, const std::string& x,
                                   const std::set<std::string>& own) {
  std::set<std::string> tied;
  if (x.empty()) return tied;
  auto it = names.varying.find(workload);
  if (it == names.varying.end()) return tied;
  for (const auto& k : it->second) {
    if (k == x || own.count(k)) continue;
    std::map<std::string, std::string> fwd, back;
    bool one_to_one = true;
    for (const auto* r : rows) {
      const std::string a = value_text(*r, x), b = value_text(*r, k);
      one_to_one = one_to_one && fwd.emplace(a, b).first->second == b && back.emplace(b, a).first->second == a;
    }
    if (one_to_one) tied.insert(k);
  }
  return tied;
}

// The parameters that tell a workload's points apart, less `without`, the backend first where
// the points' differ (with its own settings, as PointNames::who names them), those with one value
// in every point together (k = m = n swept as one); a figure names a point by its values of them
// ("cuda (fusion=add_relu), 3"; an unset one "default", as the results table has it) and its axis
// by them ("backend, launch"): short enough that no two names are cut to one.
struct Telling {
  std::vector<std::vector<std::string>> keys;
  std::map<const PointRow*, std::string> who;
  std::string axis() const {
    std::vector<std::string> parts;
    for (const auto& g : keys) parts.push_back(join(g, " = "));
    return parts.empty() ? "backend" : join(parts, ", ");
  }
  std::string name(const PointRow& r) const {
    std::vector<std::string> values;
    for (const auto& g : keys) values.push_back(g[0] == "backend" ? who.at(&r) : value_text(r, g[0]));
    return values.empty() ? r.backend : join(values, ", ");
  }
};
Telling telling(const std::vector<const PointRow*>& rows, const PointNames& names, const std::string& workload,
                const std::set<std::string>& without = {}) {
  Telling t;
  const std::set<std::string> own = own_keys(rows, names);
  if (std::any_of(rows.begin(), rows.end(), [&](const PointRow* r) { return r->backend != rows[0]->backend; })) {
    t.keys.push_back({"backend"});
    t.who = backend_names(rows, names);
  }
  const auto v = names.varying.find(workload);
  if (v == names.varying.end()) return t;
  const std::vector<std::string> fixed = fixed_by_another(rows, v->second);  // their determinant names them
  std::vector<std::string> keys;
  for (const auto& k : v->second)
    if (!without.count(k) && !own.count(k) && std::find(fixed.begin(), fixed.end(), k) == fixed.end())
      keys.push_back(k);
  for (auto& g : same_value_groups(rows, keys)) t.keys.push_back(std::move(g));
  return t;
}

// A table of one workload's points: its body's first column without each name's workload.
void without_workload(TableBlock& t) {
  for (std::size_t k = 1; k < t.table.size(); ++k) t.table[k][0] = label_rest(t.table[k][0]);
}

// Where every row names a point of the same workload ("conv2d pass=forward ..."), the header says
// it once ("conv2d points") and the rows the rest, which keeps the room for the figures; a row of
// the workload alone, whose varying parameters are all unset, reads "defaults".
void workload_in_header(TableBlock& t, const std::string& what) {
  auto& cells = t.table;
  if (cells.size() < 2) return;
  const std::string workload = label_workload(cells[1][0]);
  std::size_t alone = 0;
  for (auto it = cells.begin() + 1; it != cells.end(); ++it) {
    if (label_workload((*it)[0]) != workload) return;
    alone += label_rest((*it)[0]) == (*it)[0];
  }
  if (alone + 1 == cells.size()) return;  // no row says more than its workload
  for (std::size_t k = 1; k < cells.size(); ++k)
    cells[k][0] = label_rest(cells[k][0]) == cells[k][0] ? "defaults" : label_rest(cells[k][0]);
  cells[0][0] = workload + " " + what;
}

// The report's backends in plan order: a backend's place there is its place in the figures'
// palette, so that blas is red in the rate figures and the roofline alike.
std::vector<std::string> report_backends(const Report& rep) {
  std::vector<std::string> backends;
  for (const auto& r : rep.rows)
    if (std::find(backends.begin(), backends.end(), r.backend) == backends.end()) backends.push_back(r.backend);
  return backends;
}
// `name`'s colour among `backends` (report_backends), -1 for a name that is no backend.
int backend_colour(const std::vector<std::string>& backends, const std::string& name) {
  const auto it = std::find(backends.begin(), backends.end(), name);
  return it == backends.end() ? -1 : static_cast<int>(it - backends.begin());
}

// Where the medians a figure shows span a decade or more, their range in words ("<least> to
// <most>"): the figure then draws each point relative to its own median, since on one axis of
// times a fast point's spread would be a line; "" where they do not.
std::string decade_apart(const std::vector<double>& medians) {
  if (!svg::spans_decade(medians)) return "";
  const auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
  return fmt_time(*lo) + " to " + fmt_time(*hi);
}

// The repetitions of each point of a workload as box plots, up to 24 boxes a figure, each box
// named by what tells the points apart (Telling); where the figure's medians are a decade apart
// (decade_apart: ResNet-20 at 60 ms beside emulated bfloat16 at 1.6 s), each repetition relative
// to its point's median.
std::vector<Block> repetition_figures(const Report& rep, const std::vector<const PointRow*>& rows,
                                      const std::string& workload) {
  std::vector<Block> out;
  const PointNames& names = rep.names;
  const Telling keys = telling(rows, names, workload);
  const std::vector<std::string> backends = report_backends(rep);
  constexpr std::size_t kBoxes = 24;
  for (std::size_t from = 0; from < rows.size(); from += kBoxes) {
    const std::size_t to = std::min(rows.size(), from + kBoxes);
    std::vector<double> medians;
    for (std::size_t i = from; i < to; ++i)
      if (rows[i]->time.n > 0) medians.push_back(rows[i]->time.median);
    const std::string span = decade_apart(medians);
    const bool relative = !span.empty();
    svg::BoxPlot b;
    b.title = workload + ": repetitions of each point" + (relative ? ", relative to its median" : "") +
              (rows.size() > kBoxes ? " (" + std::to_string(from / kBoxes + 1) + ")" : "");
    b.values_label = relative ? "time per repetition / its point's median" : "time per repetition [s]";
    b.names_label = keys.axis();
    std::vector<double> all;
    for (std::size_t i = from; i < to; ++i) {
      const PointRow& r = *rows[i];
      svg::Box box{keys.name(r), hover(r, names), r.costs,       r.time.median,
                   r.time.lo,    r.time.hi,       r.time.has_ci, backend_colour(backends, r.backend)};
      if (relative && r.time.median > 0) {
        for (double& v : box.values) v /= r.time.median;
        box.median = 1, box.lo /= r.time.median, box.hi /= r.time.median;
      }
      all.insert(all.end(), box.values.begin(), box.values.end());
      b.boxes.push_back(std::move(box));
    }
    b.log_values = svg::spans_decade(all);
    if (b.log_values) b.values_label += ", log scale";
    out.push_back(figure(
        svg::render(b), slug("repetitions-" + workload + "-" + std::to_string(from / kBoxes + 1)),
        "Figure: " + b.title + " (the slowest rank's time per repetition; warm-ups excluded" +
            (relative ? "; each divided by its point's median, which span " + span + ": the Results table has them"
                      : "") +
            "). Box: quartiles; whiskers: 1.5 IQR; the dark bar: the median's exact " + pct(rep.confidence) + " CI."));
  }
  return out;
}

// How a workload's rate figures are laid out: the x axis and the parameters tied to it, what the
// series are (the backend; where every point shares one, the panel parameter with the most values
// the palette tells apart, so that they share one panel), and the parameters that split the rest into
// panels. Seeds and launches are replicates, not settings: their points share a panel and are
// never joined.
struct RateLayout {
  XChoice x;
  std::set<std::string> tied;
  std::string series = "backend";
  std::map<const PointRow*, std::string> who;  // the backend series' names (PointNames::who)
  std::set<std::string> own;                   // the backends' own settings (own_keys)
  std::vector<std::string> panels;
  bool launched = false;
  std::string series_name(const PointRow& r) const { return series == "backend" ? who.at(&r) : value_text(r, series); }
  // A point's place on a numeric x axis (its rank count, or the parameter's value).
  double x_of(const PointRow& r) const { return x.name == "ranks" ? r.ranks : number(r.params.at(x.name)); }
  // The panel a point is drawn in: its values of `panels` ("ps_servers=0"; "" where there is one).
  std::string panel_of(const PointRow& r) const {
    std::vector<std::string> parts;
    for (const auto& k : panels) parts.push_back(k + "=" + value_text(r, k));
    return join(parts, " ");
  }
  // The x axis with the parameters tied to it, in name order as the Results table heads their
  // one column ("k = m = n", not "n = k = m").
  std::string axis_name() const {
    std::vector<std::string> all(tied.begin(), tied.end());
    all.push_back(x.name);
    std::sort(all.begin(), all.end());
    return join(all, " = ");
  }
};
RateLayout rate_layout(const std::vector<const PointRow*>& rows, const PointNames& names, const std::string& workload) {
  RateLayout l;
  l.own = own_keys(rows, names);
  l.who = backend_names(rows, names);
  // A number another parameter fixes (conv2d's c, h, k, ... by its named shape) is neither axis nor
  // panel: its determinant is, and names it.
  std::set<std::string> aside = l.own;
  if (auto it = names.varying.find(workload); it != names.varying.end())
    for (const auto& k : fixed_by_another(rows, it->second)) aside.insert(k);
  l.x = choose_x(rows, names, workload, aside);
  l.tied = tied_to_axis(rows, names, workload, l.x.name, aside);
  l.launched = names.varies(workload, "launch") && l.x.name != "launch";
  if (auto it = names.varying.find(workload); it != names.varying.end())
    for (const auto& k : it->second)
      if (k != l.x.name && k != "seed" && k != "launch" && !l.tied.count(k) && !aside.count(k) &&
          !(l.x.name == "ranks" && (k == "nodes" || k == "ranks_per_node")))
        l.panels.push_back(k);
  const bool one_backend =
      std::all_of(rows.begin(), rows.end(), [&](const PointRow* r) { return r->backend == rows[0]->backend; });
  if (!one_backend || l.panels.empty()) return l;
  auto values = [&](const std::string& k) {
    std::set<std::string> v;
    for (const auto* r : rows) v.insert(value_text(*r, k));
    return v.size();
  };
  // The one with the most values that the palette tells apart: the fewest panels, each comparing
  // as many lines as it can (distributed's six schemes in one panel per ps_servers, not six panels
  // of one or two lines); where every one has more, the one with the fewest.
  constexpr std::size_t kMostSeries = 8;
  auto pick = l.panels.end();
  for (auto it = l.panels.begin(); it != l.panels.end(); ++it)
    if (values(*it) <= kMostSeries && (pick == l.panels.end() || values(*it) > values(*pick))) pick = it;
  if (pick == l.panels.end())
    pick = std::min_element(l.panels.begin(), l.panels.end(),
                            [&](const auto& a, const auto& b) { return values(a) < values(b); });
  l.series = *pick;
  l.panels.erase(pick);
  return l;
}

// Values in order of first appearance (the campaign's order).
std::vector<std::string> in_order(const std::vector<const PointRow*>& pts,
                                  const std::function<std::string(const PointRow&)>& value) {
  std::vector<std::string> out;
  for (const auto* r : pts)
    if (std::find(out.begin(), out.end(), value(*r)) == out.end()) out.push_back(value(*r));
  return out;
}

// A few whole numbers on x (ranks 1, 2, 4; n = 256, 512, 1024) are its ticks: no 1.5 ranks. Empty
// (ticks at 1-2-5 steps) otherwise.
std::vector<double> measured_ticks(const std::vector<double>& xs) {
  const std::set<double> at(xs.begin(), xs.end());
  if (at.size() > 8 ||
      !std::all_of(at.begin(), at.end(), [](double v) { return std::isfinite(v) && v == std::round(v); }))
    return {};
  return {at.begin(), at.end()};
}

// One panel of a workload's rate (or time) figure. On a categorical axis a category's markers
// stand side by side: each series, and within it each launch in launch order. The panels of one
// unit (`all`: their points) share their axes, scales and ranges, so that they compare at a glance.
Block rate_panel(const Report& rep, const RateLayout& l, const std::string& workload, const std::string& what,
                 const std::string& unit, const std::vector<const PointRow*>& pts,
                 const std::vector<const PointRow*>& all) {
  const PointNames& names = rep.names;
  const XChoice& x = l.x;
  const bool rated = unit != "time";
  svg::Plot p;
  p.title = workload + (what.empty() ? "" : ": " + what);
  p.ylabel = rated ? unit + " (median, " + pct(rep.confidence) + " CI)" : "time per repetition [s] (median, CI)";
  const std::vector<std::string> cats = in_order(pts, [&](const PointRow& r) { return value_text(r, x.name); });
  if (x.categorical) p.xcats = cats.empty() || x.name.empty() ? std::vector<std::string>{workload} : cats;
  const std::vector<std::string> series = in_order(pts, [&](const PointRow& r) { return l.series_name(r); });
  const std::vector<std::string> launches =
      l.launched ? in_order(pts, [&](const PointRow& r) { return value_text(r, "launch"); })
                 : std::vector<std::string>{};
  const std::size_t slots = series.size() * std::max<std::size_t>(1, launches.size());
  const double beside = x.categorical && slots > 1 ? std::min(0.12, 0.7 / static_cast<double>(slots)) : 0;
  auto index = [](const std::vector<std::string>& v, const std::string& s) {
    const auto it = std::find(v.begin(), v.end(), s);
    return it == v.end() ? std::size_t{0} : static_cast<std::size_t>(it - v.begin());
  };
  std::vector<svg::Series> by_series(series.size());
  // Where some series are backends, each keeps its report-wide colour, and the others (a backend's
  // points told apart by its own settings: "cuda (fusion=add_relu)") take the colours after them.
  const std::vector<std::string> backends = report_backends(rep);
  if (std::any_of(series.begin(), series.end(),
                  [&](const std::string& n) { return backend_colour(backends, n) >= 0; })) {
    int next = static_cast<int>(backends.size());
    for (std::size_t k = 0; k < series.size(); ++k) {
      const int c = backend_colour(backends, series[k]);
      by_series[k].colour = c >= 0 ? c : next++;
    }
  } else {
    // A parameter's values keep one colour in every panel of the figure (ps-sync is green in both).
    const std::vector<std::string> every = in_order(all, [&](const PointRow& r) { return l.series_name(r); });
    for (std::size_t k = 0; k < series.size(); ++k) by_series[k].colour = static_cast<int>(index(every, series[k]));
  }
  const bool joined = !x.categorical && !names.varies(workload, "seed") && !l.launched;
  auto y_of = [&](const PointRow& r) { return rated ? r.rate : r.time.median; };
  auto lo_of = [&](const PointRow& r) { return !r.time.has_ci ? NAN : rated ? r.rate_lo : r.time.lo; };
  auto hi_of = [&](const PointRow& r) { return !r.time.has_ci ? NAN : rated ? r.rate_hi : r.time.hi; };
  std::vector<double> xs, ys;
  for (const auto* r : pts) {
    const std::size_t k = index(series, l.series_name(*r));
    auto& s = by_series[k];
    s.name = series[k];
    s.line = joined;
    double xv = 0;
    if (x.categorical) {
      const std::size_t slot = k * std::max<std::size_t>(1, launches.size()) +
                               (launches.empty() ? 0 : index(launches, value_text(*r, "launch")));
      xv = (x.name.empty() ? 0.0 : static_cast<double>(index(cats, value_text(*r, x.name)))) +
           beside * (static_cast<double>(slot) - static_cast<double>(slots - 1) / 2);
    } else {
      xv = l.x_of(*r);
    }
    s.x.push_back(xv);
    s.y.push_back(y_of(*r));
    s.lo.push_back(lo_of(*r));
    s.hi.push_back(hi_of(*r));
    s.tips.push_back(hover(*r, names));
  }
  for (const auto* r : all) {
    if (!x.categorical) xs.push_back(l.x_of(*r));
    ys.push_back(y_of(*r));
  }
  p.logx = !x.categorical && svg::spans_decade(xs);
  p.logy = svg::spans_decade(ys);
  p.binary_x = x.name.find("bytes") != std::string::npos;
  if (!x.categorical) p.xticks = measured_ticks(xs);
  if (all.size() > pts.size()) {
    p.xspan = xs;
    for (const auto* r : all) p.yspan.insert(p.yspan.end(), {y_of(*r), lo_of(*r), hi_of(*r)});
  }
  const std::string axis = l.axis_name();
  p.xlabel = x.name.empty() ? "" : axis + (x.categorical ? "" : p.logx ? " (log scale)" : "");
  if (p.logy) p.ylabel += ", log scale";
  p.series = std::move(by_series);
  if (l.series != "backend") p.legend_title = l.series;
  return figure(
      svg::render(p), slug("rate-" + workload + "-" + what + "-" + (rated ? unit : "time")),
      "Figure: " + p.title + ". " + (rated ? unit : "Time") + (x.name.empty() ? "" : " against " + axis) +
          ", one series per " + l.series +
          (x.categorical                    ? " (categories: no line joins them)"
           : names.varies(workload, "seed") ? " (a marker per seed: replicates, never joined)"
           : l.launched                     ? " (a marker per launch: replicates, never joined)"
                                            : "; a line joins points that differ in " + axis + " alone") +
          (x.categorical && slots > 1
               ? std::string("; a category's markers side by side, by series") + (l.launched ? ", then launch" : "")
               : std::string()) +
          (l.own.empty()
               ? std::string()
               : ". The backends' own settings (" + join(std::vector<std::string>(l.own.begin(), l.own.end()), ", ") +
                     ": set on some backends' points only) are no axis or panel: they name a backend's "
                     "series where two of its points differ in them") +
          (all.size() > pts.size() ? ". The panels of " + workload + " share these axes" : std::string()) +
          ". Bars: the " + pct(rep.confidence) + " CI. Hover a point for its parameters, median, interval and n.");
}

// Whether a workload has a timed collective on one rank, which its rate figures and scaling
// series leave out (PointRow::lone_collective).
bool lone_collective_left_out(const Report& rep, const std::string& workload) {
  return std::any_of(rep.rows.begin(), rep.rows.end(), [&](const PointRow& r) {
    return r.workload == workload && r.has_timings() && r.lone_collective();
  });
}

std::vector<Block> workload_figures(const Report& rep, const std::string& workload) {
  std::vector<const PointRow*> rows;
  for (const auto& r : rep.rows)
    if (r.workload == workload && r.has_timings() && !r.lone_collective()) rows.push_back(&r);
  std::vector<Block> out;
  if (rows.empty()) return out;
  const RateLayout layout = rate_layout(rows, rep.names, workload);
  std::map<std::string, std::vector<const PointRow*>> panels, units;
  std::vector<std::string> panel_order;
  for (const auto* r : rows) {
    const bool rated = r->rate > 0 && !r->rate_unit.empty();
    const std::string unit = rated ? r->rate_unit : "time";
    std::string key = layout.panel_of(*r) + "\x1f" + unit;
    if (!panels.count(key)) panel_order.push_back(key);
    panels[key].push_back(r);
    units[unit].push_back(r);
  }
  constexpr std::size_t kMostPanels = 12;
  std::size_t drawn = 0;
  for (const auto& key : panel_order) {
    if (drawn == kMostPanels) break;
    const std::string unit = key.substr(key.find('\x1f') + 1);
    out.push_back(rate_panel(rep, layout, workload, key.substr(0, key.find('\x1f')), unit, panels[key], units[unit]));
    ++drawn;
  }
  if (panel_order.size() > drawn)
    out.push_back(text(std::to_string(panel_order.size() - drawn) + " more panels of " + workload +
                       " are not drawn; results.csv has every point."));
  for (auto& b : repetition_figures(rep, rows, workload)) out.push_back(std::move(b));
  return out;
}

// What a Results table's shaded rows mean (report.md and report.html, not the terminal, which
// shades none), or nothing where none is shaded.
std::optional<Block> shaded_rows(const TableBlock& t) {
  const auto shaded = [&](const char* c) { return std::count(t.row_class.begin(), t.row_class.end(), c); };
  const auto warned = shaded("warn"), failed = shaded("bad");
  if (warned + failed == 0) return std::nullopt;
  std::vector<std::string> said;
  if (warned > 0)
    said.push_back(std::to_string(warned) + (warned == 1 ? " row" : " rows") +
                   " shaded yellow: no interval of the median, or one reaching more than 5% from it (Measurement "
                   "quality says about how many repetitions would narrow it)");
  if (failed > 0)
    said.push_back(std::to_string(failed) + (failed == 1 ? " row" : " rows") + " shaded red: not complete");
  Block note = text("In report.html, " + join(said, "; ") + ".");
  note.terminal = false;
  return note;
}

// What every point of a workload shares, said once above its Results table. Where the campaign
// file is known (Report::campaign_keys) and many are shared (the distributed campaign's 40), those
// the file names come first and the ones it left at their defaults after them; the terminal
// counts the latter instead of listing them.
Block shared_said(const Report& rep, const std::string& workload) {
  const std::string all = rep.names.shared_text(workload);
  if (all.empty()) return text("No parameter is shared by every " + workload + " point.");
  const std::string head = "Shared by every " + workload + " point: ";
  const auto it = rep.names.shared.find(workload);
  constexpr std::size_t kFewEnough = 10;
  if (rep.campaign_keys.empty() || it == rep.names.shared.end() || it->second.size() <= kFewEnough)
    return text(head + all + ".");
  std::vector<std::string> set, defaults;
  if (const auto lone = rep.names.lone_backend.find(workload); lone != rep.names.lone_backend.end())
    set.push_back("backend=" + lone->second);
  for (const auto& [k, v] : it->second) (rep.campaign_keys.count(k) ? set : defaults).push_back(k + "=" + canonical(v));
  if (defaults.empty()) return text(head + all + ".");
  const std::string more = std::to_string(defaults.size()) + " more left at their defaults";
  if (set.empty())
    return text(
        head + "all left at their defaults (the campaign file names none of them): " + join(defaults, " ") + ".",
        head + std::to_string(defaults.size()) +
            " parameters, all left at their defaults (report.md names "
            "them).");
  return text(head + join(set, " ") +
                  ". Left at their defaults (the campaign file does not name them): " + join(defaults, " ") + ".",
              head + join(set, " ") + "; " + more + " (report.md names them).");
}

// A backend's own setting with one value on all of its points (cuda's cudnn_api = graph) tells
// no two rows apart (PointNames::by_backend): said once above the Results table, not a column of
// that value and "-"; nothing where there is none.
std::optional<Block> own_settings_said(const PointNames& names, const std::string& workload,
                                       const std::vector<const PointRow*>& rows) {
  std::map<std::string, std::vector<std::string>> own_said;  // backend -> "k=v"
  if (auto fixed = names.by_backend.find(workload); fixed != names.by_backend.end())
    for (const std::string& k : fixed->second) {
      std::map<std::string, std::string> value;  // backend -> its points' one value of k
      for (const auto* r : rows) value[r->backend] = value_text(*r, k);
      for (const auto& [backend, v] : value)
        if (v != "-") own_said[backend].push_back(k + "=" + v);
    }
  if (own_said.empty()) return std::nullopt;
  std::vector<std::string> parts;
  for (const auto& [backend, kv] : own_said) parts.push_back(backend + ": " + join(kv, " "));
  return text("A backend's own settings, the same on all its points: " + join(parts, "; ") + ".");
}

// What the terminal says in a line instead of a column of one value (the documents keep the
// columns, where report.html shades what is not): every point complete, rather than a status
// column of "complete"; every measured point's one repetition count, rather than a reps column
// (a point that measured nothing has its "-" in median); the columns another one fixes.
std::optional<Block> said_in_the_terminal(const std::string& workload, const std::vector<const PointRow*>& rows,
                                          const std::vector<std::string>& fixed, std::size_t reps_column,
                                          std::size_t status_column, TableBlock& t) {
  const bool all_complete = rows.size() > 1 && std::all_of(rows.begin(), rows.end(), [](const PointRow* r) {
                              return r->outcome == Outcome::Complete && r->status == "complete" && !r->shares_cores();
                            });
  std::set<int> counts;
  for (const auto* r : rows)
    if (r->time.n > 0 && rows.size() > 1) counts.insert(r->time.n);
  std::vector<std::string> said_of;
  if (all_complete) t.wide_only.insert(status_column);
  if (counts.size() == 1) t.wide_only.insert(reps_column);
  const std::string reps = counts.size() == 1 ? std::to_string(*counts.begin()) + " repetitions" : "";
  if (all_complete)
    said_of.push_back("Every " + workload + " point is complete" + (reps.empty() ? "." : ", with " + reps + " each."));
  else if (!reps.empty())
    said_of.push_back("Every " + workload + " point that measured has " + reps + ".");
  if (!fixed.empty())
    said_of.push_back("--wide shows " + join(fixed, ", ") + " too: another column's values fix them.");
  if (said_of.empty()) return std::nullopt;
  Block said = text("", join(said_of, " "));
  said.document = false;
  return said;
}

// The results of one workload: a column per varying parameter, the shared ones said once.
Section workload_results(const Report& rep, const std::string& workload) {
  Section s;
  s.title = "Results: " + workload;
  s.depth = 3;
  const PointNames& names = rep.names;
  s.blocks.push_back(shared_said(rep, workload));
  std::vector<std::string> vary;
  if (auto it = names.varying.find(workload); it != names.varying.end()) vary = it->second;
  std::vector<const PointRow*> rows;
  for (const auto& r : rep.rows)
    if (r.workload == workload) rows.push_back(&r);
  if (auto said = own_settings_said(names, workload, rows)) s.blocks.push_back(std::move(*said));
  const std::string ci = pct(rep.confidence) + " CI";
  // One rate unit for the workload: in the header, the cells bare numbers.
  std::set<std::string> units;
  bool aggregate = false;
  for (const auto* r : rows)
    if (r->time.n > 0) {
      units.insert(r->rate_unit);
      aggregate = aggregate || (r->ranks > 1 && std::isfinite(r->rate_aggregate));
    }
  const std::string unit = units.size() == 1 ? *units.begin() : "";
  // The columns another one fixes (a named shape's c, h, k, ...) go last: the figures come first.
  std::map<std::string, std::string> header;
  std::vector<std::string> firsts;  // a column each
  for (const auto& same : same_value_groups(rows, vary)) {
    header[same[0]] = join(same, " = ");
    firsts.push_back(same[0]);
  }
  vary = std::move(firsts);
  const std::vector<std::string> fixed = fixed_by_another(rows, vary);
  std::vector<std::string> lead;
  for (const auto& k : vary)
    if (std::find(fixed.begin(), fixed.end(), k) == fixed.end()) lead.push_back(k);
  // One backend for every point (the Shared line says it) is no column where another names the rows.
  const bool backend_column = !names.lone_backend.count(workload) || lead.empty();
  std::vector<std::string> head;
  if (backend_column) head.push_back("backend");
  for (const auto& k : lead) head.push_back(header[k]);
  const std::size_t first_figure = head.size();
  // Every point on one node with ranks_per_node a column: ranks would repeat it, and is none. One
  // rank count for every point (the shared nodes and ranks_per_node say it): the terminal gives
  // the column to what differs.
  std::set<int> ranks;
  for (const auto* r : rows) ranks.insert(r->ranks);
  const bool one_node = std::all_of(rows.begin(), rows.end(), [](const PointRow* r) { return r->nodes == 1; });
  // One rank count on every point, nodes and ranks_per_node shared: the Shared line says it, and
  // no output has a column of it.
  const bool said = ranks.size() == 1 && std::find(vary.begin(), vary.end(), "nodes") == vary.end() &&
                    std::find(vary.begin(), vary.end(), "ranks_per_node") == vary.end();
  const bool ranks_column = !said && (!one_node || std::find(lead.begin(), lead.end(), "ranks_per_node") == lead.end());
  for (const std::string& h :
       {std::string(ranks_column ? "ranks" : ""), std::string("reps"), std::string("median"), ci,
        unit.empty() ? std::string("rate") : unit, std::string("rate CI"), std::string(aggregate ? "all ranks" : ""),
        std::string("validation"), std::string("status")})
    if (!h.empty()) head.push_back(h);
  for (const auto& k : fixed) head.push_back(header[k]);
  Block b = table({head});
  b.table.sortable = true;
  b.table.naming = first_figure;
  const std::size_t reps = first_figure + (ranks_column ? 1 : 0);
  b.table.wide_only = {reps + 2};  // the time's CI: the rate's says the same
  if (aggregate) b.table.wide_only.insert(reps + 5);
  if (ranks_column && ranks.size() == 1) b.table.wide_only.insert(first_figure);
  for (std::size_t i = 0; i < fixed.size(); ++i) b.table.wide_only.insert(head.size() - fixed.size() + i);
  if (auto said = said_in_the_terminal(workload, rows, fixed, reps, head.size() - fixed.size() - 1, b.table))
    s.blocks.push_back(std::move(*said));
  for (const PointRow* point : rows) {
    const PointRow& r = *point;
    std::vector<std::string> row;
    if (backend_column) row.push_back(r.backend);
    for (const auto& k : lead) row.push_back(value_text(r, k));
    const std::string status = r.status + (r.oversubscribed           ? " (oversubscribed)"
                                           : r.threads_oversubscribed ? " (threads oversubscribed)"
                                                                      : "");
    const bool has = r.time.n > 0;
    const bool rated = has && !r.lone_collective();  // a 1-rank collective's GB/s is no bandwidth
    const std::string rate = !rated ? "-" : unit.empty() ? fmt_sig(r.rate, 4) + " " + r.rate_unit : fmt_sig(r.rate, 4);
    std::vector<std::string> cells{std::to_string(r.time.n), has ? fmt_time(r.time.median) : std::string("-"),
                                   ci_text(r), rate, rated ? rate_ci_text(r) : "-"};
    if (aggregate) cells.push_back(rated && std::isfinite(r.rate_aggregate) ? fmt_sig(r.rate_aggregate, 4) : "-");
    if (ranks_column) cells.insert(cells.begin(), std::to_string(r.ranks));
    cells.push_back(validation_text(r));
    cells.push_back(status);
    for (const auto& k : fixed) cells.push_back(value_text(r, k));
    row.insert(row.end(), cells.begin(), cells.end());
    b.table.table.push_back(row);
    b.table.row_title.push_back(r.canonical + " (" + r.id + ")");
    b.table.row_class.push_back(r.outcome != Outcome::Complete       ? "bad"
                                : !r.time.has_ci || !r.advice.enough ? "warn"
                                                                     : "");
  }
  std::optional<Block> shades = shaded_rows(b.table);
  s.blocks.push_back(std::move(b));
  if (shades) s.blocks.push_back(std::move(*shades));
  if (lone_collective_left_out(rep, workload))
    s.blocks.push_back(text("The 1-rank " + workload +
                            " points move nothing between ranks (a local copy, or nothing in place): their rate, "
                            "size / time, is no bandwidth and reads \"-\" (results.csv keeps it); the figures and "
                            "the Scaling section leave them out."));
  for (auto& f : workload_figures(rep, workload)) s.blocks.push_back(std::move(f));
  return s;
}

// The Backend comparisons where there are more than a few: per baseline, one table of its groups
// (rows) against the backends compared with it (columns), each cell the speedup with its interval
// ("n.s." where the interval holds 1; in HTML a significant speedup green, a slowdown red): a line
// per group instead of a sentence per pair.
std::vector<Block> comparison_matrices(const Report& rep) {
  constexpr std::size_t kFewest = 5;
  std::vector<Block> out;
  if (rep.comparisons.size() < kFewest) return out;
  std::vector<std::string> baselines;
  for (const auto& c : rep.comparisons)
    if (std::find(baselines.begin(), baselines.end(), c.baseline) == baselines.end()) baselines.push_back(c.baseline);
  for (const auto& base : baselines) {
    std::vector<std::string> groups, others;
    std::map<std::pair<std::string, std::string>, const Comparison*> cell;
    for (const auto& c : rep.comparisons) {
      if (c.baseline != base) continue;
      if (std::find(groups.begin(), groups.end(), c.group) == groups.end()) groups.push_back(c.group);
      if (std::find(others.begin(), others.end(), c.other) == others.end()) others.push_back(c.other);
      cell[{c.group, c.other}] = &c;
    }
    out.push_back(text("Speedup over " + base + " (ratio of medians, " + pct(rep.confidence) +
                       " CI; n.s.: the interval holds 1, no significant difference):"));
    Table t{{"points"}};
    t[0].insert(t[0].end(), others.begin(), others.end());
    std::vector<std::vector<std::string>> shades;  // HTML: a significant speedup green, a slowdown red
    for (const auto& g : groups) {
      std::vector<std::string> row{g.empty() ? "all" : g}, shade{""};
      for (const auto& o : others) {
        const auto it = cell.find({g, o});
        const stats::RatioInterval* x = it == cell.end() ? nullptr : &it->second->speedup;
        row.push_back(!x ? "-" : ratio_text(*x) + (x->excludes_one() ? "" : " n.s."));
        shade.push_back(!x || !x->excludes_one() ? "" : x->estimate > 1 ? "faster" : "slower");
      }
      t.push_back(std::move(row));
      shades.push_back(std::move(shade));
    }
    Block b = table(std::move(t));
    b.table.cell_class = std::move(shades);
    workload_in_header(b.table, "points");  // the operators campaign's 15 conv2d shapes and passes
    out.push_back(std::move(b));
  }
  return out;
}

// Level 0's roofline: each operator point's attained GFLOP/s (on a GPU, over its device time)
// against its arithmetic intensity (FLOPs over the bytes of its operands: the least traffic it
// needs), a series per backend, and the compute peaks d500 knows (a GPU's, from its table); no
// memory roof, since d500 records no measured bandwidth. Empty without a level-0 FLOP point.
std::vector<Block> roofline(const Report& rep) {
  std::map<std::string, svg::Series> by_backend;
  std::map<double, std::string> peaks;  // GFLOP/s -> basis
  std::vector<double> xs;
  for (const auto& r : rep.rows) {
    if (r.level != 0 || !r.has_timings() || !(r.flops > 0) || !(r.work_bytes > 0) || r.rate_unit != "GFLOP/s") continue;
    const PointRow::PhaseTime* d = device_phase(r);
    const double seconds = d ? d->time.median : r.time.median;
    if (!(seconds > 0)) continue;
    auto& s = by_backend[r.backend];
    s.name = r.backend;
    s.line = false;  // points of different operators and sizes: never joined
    s.x.push_back(r.flops / r.work_bytes);
    s.y.push_back(r.flops / seconds / 1e9);
    s.tips.push_back(rep.names.label(r) + "\n" + fmt_sig(s.x.back(), 3) + " FLOP/byte, " + fmt_sig(s.y.back(), 4) +
                     " GFLOP/s" + (d ? " (device time)" : " (host time)"));
    xs.push_back(s.x.back());
    auto it = r.facts.find("device.peak_flops");
    if (it != r.facts.end())
      if (const auto* v = std::get_if<double>(&it->second); v && *v > 0)
        peaks[*v / 1e9] = str_param_or(r.facts, "device.peak_basis", "the GPU's arithmetic peak");
  }
  if (by_backend.empty()) return {};
  svg::Plot p;
  p.title = "roofline: operators (level 0)";
  p.xlabel = "FLOP per byte of operands (log scale)";
  p.ylabel = "attained GFLOP/s (log scale)";
  p.logx = p.logy = true;
  const std::vector<std::string> backends = report_backends(rep);
  for (auto& [b, s] : by_backend) {
    s.colour = backend_colour(backends, b);
    p.series.push_back(s);
  }
  const double lo = *std::min_element(xs.begin(), xs.end()), hi = *std::max_element(xs.begin(), xs.end());
  for (const auto& [gflops, basis] : peaks)
    p.series.push_back(svg::Series{
        "peak " + fmt_sig(gflops / 1e3, 3) + " TFLOP/s", {lo, hi}, {gflops, gflops}, {}, {}, true, false, true, {}});
  std::string caption =
      "Figure: attained GFLOP/s of each level-0 operator point against its arithmetic intensity (its FLOPs over the bytes "
      "of its operands, the least traffic it needs); on a GPU over its device time. ";
  if (peaks.empty())
    caption +=
        "No ceiling is drawn: d500 records no peak for these processors (a CPU core's sustained clock and FMA units are not known reliably) ";
  else
    caption += "Dashed: the GPU's arithmetic peak for the point's arithmetic, as d500's table gives it (" +
               peaks.begin()->second + "); ";
  caption += "and no memory roof: no bandwidth is measured.";
  return {figure(svg::render(p), "roofline", caption)};
}

// A scaling series' step broken down per rank count: the median over repetitions of each phase's
// share of the slowest rank's step (communication, wait; the rest is computation), stacked.
// Empty where the series' points time no communication (levels 0-2).
std::vector<Block> communication_share(const Report& rep, const ScalingSeries& sc) {
  svg::StackedBars bars;
  bars.title = "step breakdown: " + sc.group;
  bars.xlabel = "ranks";
  bars.ylabel = "share of the step [%]";
  bars.layers = {{"computation", {}, {}}, {"communication", {}, {}}, {"wait", {}, {}}};
  bool any = false;
  for (const auto& pt : sc.points) {
    const PointRow* r = nullptr;
    for (const auto& row : rep.rows)
      if (row.id == pt.id) r = &row;
    if (!r) continue;
    std::vector<double> comm, wait;
    for (std::size_t i = 0; i < r->costs.size(); ++i) {
      double c = 0, w = 0;
      for (const auto& ph : r->phases) {
        auto it = ph.by_rep.find(r->cost_reps[i]);
        if (it == ph.by_rep.end()) continue;
        if (ph.phase == "communication") c = it->second, any = true;
        if (ph.phase == "wait") w = it->second;
      }
      if (r->costs[i] > 0) comm.push_back(100 * c / r->costs[i]), wait.push_back(100 * w / r->costs[i]);
    }
    const double c = comm.empty() ? 0 : stats::median(comm), w = wait.empty() ? 0 : stats::median(wait);
    bars.categories.push_back(std::to_string(pt.ranks));
    const double values[3] = {std::max(0.0, 100 - c - w), c, w};
    for (std::size_t k = 0; k < 3; ++k) {
      bars.layers[k].values.push_back(values[k]);
      bars.layers[k].tips.push_back(std::to_string(pt.ranks) + " ranks: " + bars.layers[k].name + " " +
                                    fmt_sig(values[k], 3) + "% of the step (median over " +
                                    std::to_string(comm.size()) + " steps)");
    }
  }
  if (!any) return {};
  return {figure(
      svg::render(bars), slug("step-breakdown-" + sc.group),
      "Figure: where the step of " + sc.group +
          " goes at each rank count: per step the slowest rank's communication (time in "
          "the scheme's MPI calls) and wait (the barrier before a synchronous exchange) over its whole step, the median over steps; "
          "computation is the rest.")};
}

std::string method_brief(const Report& rep) {
  return "Medians of the slowest rank per repetition with exact " + pct(rep.confidence) +
         " order-statistic CIs; warm-ups recorded and excluded; ratios of medians with " + ratio_method_words() +
         " intervals.\nThe full method statement is in report.md and report.html (section Method).";
}

// A table's "ranks" column where every point ran on one node and ranks_per_node names the rows:
// the same numbers twice, the column goes (as in the Results tables).
void drop_ranks_said_by_ranks_per_node(TableBlock& t, const std::vector<const PointRow*>& rows,
                                       const std::vector<std::string>& vary) {
  auto& head = t.table[0];
  const auto at = std::find(head.begin(), head.end(), "ranks");
  if (at == head.end() || std::find(vary.begin(), vary.end(), "ranks_per_node") == vary.end() ||
      std::any_of(rows.begin(), rows.end(), [](const PointRow* r) { return r->nodes != 1; }))
    return;
  const auto c = static_cast<std::size_t>(at - head.begin());
  for (auto& row : t.table) row.erase(row.begin() + static_cast<std::ptrdiff_t>(c));
  std::set<std::size_t> wide;
  for (std::size_t w : t.wide_only)
    if (w != c) wide.insert(w > c ? w - 1 : w);
  t.wide_only = std::move(wide);
}

// Tables whose first column names a point (point_label): each row's hover text is the point's full
// canonical form. Where every row is a point of one workload, that column becomes the workload's
// results table's: the backend and each parameter that varies among the table's points ("default"
// where unset), so that a row reads as in Results and the terminal cuts no long label
// ("network:libtorch-native launch=1 memory_fo…").
Block with_title(Block b, const Report& rep, bool point_column) {
  if (!point_column) return b;
  // Each label once, looked up by row (not every label per row: quality_table lists every point).
  std::map<std::string, const PointRow*> by_label;
  for (const auto& r : rep.rows) by_label.emplace(point_label(rep, r), &r);
  std::vector<const PointRow*> rows;
  for (std::size_t k = 1; k < b.table.table.size(); ++k)
    if (auto it = by_label.find(b.table.table[k][0]); it != by_label.end()) rows.push_back(it->second);
  if (rows.size() + 1 != b.table.table.size()) return b;
  for (const auto* r : rows) b.table.row_title.push_back(r->canonical + " (" + r->id + ")");
  if (rows.empty() ||
      std::any_of(rows.begin(), rows.end(), [&](const PointRow* r) { return r->workload != rows[0]->workload; }))
    return b;
  std::vector<const Params*> params;
  for (const auto* r : rows) params.push_back(&r->params);
  std::vector<std::string> vary = param_spread(params).varying;
  if (auto fixed = rep.names.by_backend.find(rows[0]->workload); fixed != rep.names.by_backend.end())
    vary.erase(
        std::remove_if(vary.begin(), vary.end(), [&](const std::string& k) { return fixed->second.count(k) > 0; }),
        vary.end());
  drop_ranks_said_by_ranks_per_node(b.table, rows, vary);
  // Parameters equal on every row (gemm's k, m and n) are one column, "k = m = n", as in Results.
  std::map<std::string, std::string> said;
  std::vector<std::string> firsts;
  for (const auto& same : same_value_groups(rows, vary)) said[same[0]] = join(same, " = "), firsts.push_back(same[0]);
  vary = std::move(firsts);
  auto named = [&](std::vector<std::string> row, const std::vector<std::string>& names) {
    row.erase(row.begin());
    row.insert(row.begin(), names.begin(), names.end());
    return row;
  };
  // One backend for every point of the workload (the Results' Shared line says it) names no row.
  const bool backend = vary.empty() || !rep.names.lone_backend.count(rows[0]->workload);
  std::vector<std::string> head;
  if (backend) head.push_back("backend");
  for (const auto& k : vary) head.push_back(said[k]);
  b.table.table[0] = named(b.table.table[0], head);
  for (std::size_t k = 1; k < b.table.table.size(); ++k) {
    std::vector<std::string> names;
    if (backend) names.push_back(rows[k - 1]->backend);
    for (const auto& key : vary) names.push_back(value_text(*rows[k - 1], key));
    b.table.table[k] = named(b.table.table[k], names);
  }
  std::set<std::size_t> wide;
  for (std::size_t c : b.table.wide_only) wide.insert(c == 0 ? 0 : c + head.size() - 1);
  fixed_to_wide(rows, vary, wide);
  b.table.wide_only = wide;
  b.table.naming = head.size();
  return b;
}

}  // namespace

std::string figures_dir(double confidence) { return output_name("figures", confidence); }

// Code a campaign named (a custom operator's library): which file, which bytes, for how many
// points; none where no point loaded any.
std::optional<Section> code_loaded_section(const Report& rep) {
  std::map<std::pair<std::string, std::string>, int> loaded;
  for (const auto& r : rep.rows) {
    auto path = r.facts.find("library.path"), sum = r.facts.find("library.sha256");
    if (path != r.facts.end() && sum != r.facts.end()) ++loaded[{canonical(path->second), canonical(sum->second)}];
  }
  std::vector<std::string> items;
  for (const auto& [lib, n] : loaded)
    items.push_back(lib.first + ": SHA-256 " + lib.second + " (" + std::to_string(n) + " point" + (n == 1 ? "" : "s") +
                    ")");
  if (items.empty()) return std::nullopt;
  Block b = list(items);
  b.wrap = false;
  return Section{"Code loaded from the campaign",
                 2,
                 false,
                 {text("Each library a point loaded (its `library`), resolved, with the SHA-256 of its bytes "
                       "when the point ran: code, not data (docs/trust.md)."),
                  b}};
}

// Per workload with several scaling series, their efficiencies in one figure: a line per series
// against ranks, the ideal at 1, so that the series compare at a glance (each has its own figure
// of times below only where it has three rank counts or more: two are its table's two rows); and
// one table of every series' points, which the terminal prints instead of each series' own.
struct ScalingOverview {
  std::string workload;
  std::vector<Block> blocks;
};
std::vector<ScalingOverview> scaling_overviews(const Report& rep) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const ScalingSeries*>> by_workload;
  for (const auto& sc : rep.scaling) {
    const std::string& workload = sc.workload;
    if (!by_workload.count(workload)) order.push_back(workload);
    by_workload[workload].push_back(&sc);
  }
  const std::map<std::string, const PointRow*> by_id = rows_by_id(rep);
  const std::vector<std::string> backends = report_backends(rep);
  std::vector<ScalingOverview> out;
  for (const auto& workload : order) {
    const auto& list = by_workload[workload];
    if (list.size() < 2) continue;
    // Each series by what tells its base point from the other series' ("blas, 128"), less what
    // all of them share (their base rank count).
    std::vector<const PointRow*> base;
    for (const ScalingSeries* sc : list)
      if (auto it = sc->points.empty() ? by_id.end() : by_id.find(sc->points[0].id); it != by_id.end())
        base.push_back(it->second);
    if (base.size() != list.size()) continue;
    // The rank count is the series' axis: its base's nodes and ranks_per_node name no series (a
    // series of ps_servers=1 starts at 2 ranks where the others start at 1).
    Telling keys = telling(base, rep.names, workload, {"nodes", "ranks_per_node"});
    std::erase_if(keys.keys, [&](const std::vector<std::string>& g) {
      return g[0] != "backend" && std::all_of(base.begin(), base.end(), [&](const PointRow* r) {
               return value_text(*r, g[0]) == value_text(*base[0], g[0]);
             });
    });
    svg::Plot p;
    p.title = workload + ": scaling efficiency of each series";
    p.xlabel = "ranks (log scale)";
    p.ylabel = "efficiency (" + pct(rep.confidence) + " CI)";
    p.logx = true;
    p.legend_title = keys.axis();
    Table t{{keys.axis(), "ranks", "median time", "efficiency (" + pct(rep.confidence) + " CI)", "model"}};
    std::set<std::string> kinds;
    std::set<double> counts;  // every series' rank counts: the ticks and the ideal's extent
    for (std::size_t i = 0; i < list.size(); ++i) {
      const ScalingSeries* sc = list[i];
      kinds.insert(sc->kind);
      svg::Series line;
      line.name = keys.name(*base[i]);
      line.colour = backend_colour(backends, line.name);
      const auto& m = sc->model;
      const std::string model = m.law.empty()
                                    ? (m.failed.empty() ? "-" : "none: s = " + fmt_sig(m.s, 3) + ", outside [0, 1]")
                                    : law_words(sc->kind, m.law) + " s = " + serial_share_text(m.s, m.s_lo, m.s_hi);
      for (const auto& pt : sc->points) {
        counts.insert(pt.ranks);
        const std::string eff =
            fmt_sig(pt.efficiency, 3) + " [" + fmt_sig(pt.efficiency_lo, 3) + ", " + fmt_sig(pt.efficiency_hi, 3) + "]";
        t.push_back({line.name, std::to_string(pt.ranks), fmt_time(pt.time.median), eff,
                     &pt == &sc->points.front() ? model : ""});
        line.x.push_back(pt.ranks);
        line.y.push_back(pt.efficiency);
        line.lo.push_back(pt.efficiency_lo);
        line.hi.push_back(pt.efficiency_hi);
        line.tips.push_back(sc->group + "\n" + std::to_string(pt.ranks) + (pt.ranks == 1 ? " rank" : " ranks") +
                            ": efficiency " + eff + " (" + sc->kind + " scaling), median " + fmt_time(pt.time.median));
      }
      p.series.push_back(std::move(line));
    }
    p.xticks.assign(counts.begin(), counts.end());
    p.series.push_back(
        svg::Series{"ideal", {*counts.begin(), *counts.rbegin()}, {1, 1}, {}, {}, true, false, true, {}});
    ScalingOverview o{workload, {}};
    const std::string kind = kinds.size() == 1 ? *kinds.begin() + " scaling" : "scaling (weak and strong)";
    std::vector<std::string> efficiency;  // what it is, per kind present
    for (const auto* sc : list) {
      const std::string e = sc->kind != "weak" ? "the speedup T(base) / T(p) x base / p (ideal 1)"
                            : !sc->bus.empty() ? "busbw(p) / busbw(base), as nccl-tests' bus bandwidth (ideal 1: it "
                                                 "stays; the time may grow as the data each link carries)"
                                               : "T(base) / T(p) (ideal 1: the time stays)";
      if (std::find(efficiency.begin(), efficiency.end(), e) == efficiency.end()) efficiency.push_back(e);
    }
    std::vector<std::string> s_meanings;  // what s is, per kind present
    if (kinds.count("strong"))
      s_meanings.push_back("strong: the serial share of Amdahl's law, or of the USL with its coherency cost k");
    if (kinds.count("weak"))
      s_meanings.push_back(
          "weak: contention, the time growing as T(base) (1 + s (n-1)), n the multiple of the base ranks: the USL "
          "with k = 0, to which a USL model adds k n (n-1)");
    const std::string what =
        "Every " + kind + " series of " + workload + ", each against its own base run (its fewest ranks" +
        (lone_collective_left_out(rep, workload) ? "; a collective's 1-rank run moves nothing "
                                                   "between ranks and is none"
                                                 : "") +
        "): efficiency is " + join(efficiency, "; or ") + "; model: the fitted law's s with its bootstrap interval (" +
        join(s_meanings, "; ") + ").";
    o.blocks.push_back(text(what + " Each series' base, table and model in words follow.",
                            what + " report.md has each series' base, table and model in words."));
    Block tb = table(t);
    tb.table.naming = 1;
    o.blocks.push_back(std::move(tb));
    o.blocks.push_back(figure(svg::render(p), slug("scaling-" + workload),
                              "Figure: every scaling series of " + workload +
                                  ": its efficiency at each rank count (as the table above) with its " +
                                  pct(rep.confidence) +
                                  " bootstrap interval, a line per series (its points differ in ranks alone); dashed: "
                                  "the ideal, 1. Each series' times, model and table follow."));
    out.push_back(std::move(o));
  }
  return out;
}

// Scaling: an overview per workload, then each series' caption, figure, communication share and
// table (in the files only where the overview's table has its points).
void add_scaling_section(const Report& rep, Document& d) {
  if (rep.scaling.empty()) return;
  Section s{"Scaling", 2, true, {}};
  std::set<std::string> overviewed;
  for (auto& o : scaling_overviews(rep)) {
    overviewed.insert(o.workload);
    for (auto& b : o.blocks) s.blocks.push_back(std::move(b));
  }
  std::map<std::string, std::size_t> series;  // workload -> its series
  std::set<std::string> drawn;                // workloads with a series of 3 rank counts or more: figures
  for (const auto& sc : rep.scaling) {
    ++series[sc.workload];
    if (sc.points.size() >= 3) drawn.insert(sc.workload);
  }
  for (const auto& sc : rep.scaling) {
    const bool in_overview = overviewed.count(sc.workload) > 0;
    // Where the overview's table has the series' points, the rest of each is detail: report.html
    // folds a workload's series into one closed box.
    const std::size_t first = s.blocks.size();
    Block caption =
        text(scaling_caption(sc), sc.kind + " scaling of " + sc.group + " (base " + std::to_string(sc.base_ranks) +
                                      (sc.base_ranks == 1 ? " rank, " : " ranks, ") + fmt_time(sc.base_time) + ")." +
                                      scaling_model_text(sc).substr(0, scaling_model_text(sc).find("; predicted")));
    caption.terminal = !in_overview;
    s.blocks.push_back(std::move(caption));
    if (sc.points.size() >= 3 || !in_overview)
      s.blocks.push_back(figure(scaling_svg(sc), slug("scaling-" + sc.group),
                                "Figure: " + sc.kind + " scaling of " + sc.group +
                                    ": time per repetition against ranks (log-log), with the ideal" +
                                    (sc.model.law.empty() ? " (no model: see above)." : " and the fitted model.")));
    for (auto& b : communication_share(rep, sc)) s.blocks.push_back(std::move(b));
    s.blocks.push_back(table(scaling_table(sc), !in_overview));
    if (in_overview)
      for (std::size_t i = first; i < s.blocks.size(); ++i)
        s.blocks[i].fold = "Each of " + sc.workload + "'s " + std::to_string(series[sc.workload]) +
                           " series in full: base, model in words, " +
                           (drawn.count(sc.workload) ? "figure and table" : "table") + " (click to open)";
  }
  d.sections.push_back(std::move(s));
}

// A figure of categories (no line joins them), each a summary with its interval and the values it
// summarises beside it (launch medians, runs): the plot and its two series, to be filled.
struct SummaryBeside {
  svg::Plot plot;
  svg::Series summary, each;
};
SummaryBeside summary_beside(std::string title, std::string ylabel, std::string xlabel, std::string summary,
                             std::string each) {
  SummaryBeside f;
  f.plot.title = std::move(title);
  f.plot.ylabel = std::move(ylabel);
  f.plot.xlabel = std::move(xlabel);
  f.summary.name = std::move(summary);
  f.each.name = std::move(each);
  f.summary.line = f.each.line = false;
  // Black and grey: a summary and its replicates are no backend, whose colours the report keeps
  // (the time-to-accuracy figure's median in blue and runs in red read as reference and blas).
  f.summary.colour = svg::kBlack;
  f.each.colour = svg::kGrey;
  return f;
}

// Per workload measured in launches, each point's typical launch median with the interval that
// covers the variation between launches (the primary one), and each launch's own median beside
// it: a category per point, named by what tells the points apart besides their launch.
std::vector<Block> launch_figures(const Report& rep) {
  const std::map<std::string, const PointRow*> by_id = rows_by_id(rep);
  std::map<std::string, std::vector<std::pair<const LaunchGroup*, const PointRow*>>> by_workload;
  for (const auto& g : rep.launches)
    if (const auto it = g.ids.empty() ? by_id.end() : by_id.find(g.ids.front()); it != by_id.end())
      by_workload[it->second->workload].push_back({&g, it->second});
  std::vector<Block> out;
  for (const auto& [workload, groups] : by_workload) {
    std::vector<const PointRow*> rows;
    for (const auto& [g, r] : groups) rows.push_back(r);
    const Telling keys = telling(rows, rep.names, workload, {"launch"});
    // Points a decade apart (decade_apart): each relative to its typical launch median.
    std::vector<double> typical;
    for (const auto& [g, r] : groups) typical.push_back(g->interval.estimate);
    const std::string span = decade_apart(typical);
    const bool relative = !span.empty();
    auto [p, across, each] =
        summary_beside(workload + ": across launches" + (relative ? ", relative to each point's typical launch" : ""),
                       relative ? "time / the point's typical launch median (CI)"
                                : "time per repetition [s] (median, CI)",  // the caption says which median and interval
                       keys.axis(), "across launches", "each launch");
    std::vector<double> ys;
    for (const auto& [g, r] : groups) {
      const auto x = static_cast<double>(p.xcats.size());
      p.xcats.push_back(keys.name(*r));
      const stats::LaunchInterval& iv = g->interval;
      const double unit = relative && iv.estimate > 0 ? iv.estimate : 1;
      across.x.push_back(x);
      across.y.push_back(iv.estimate / unit);
      across.lo.push_back(iv.has_ci ? iv.lo / unit : NAN);
      across.hi.push_back(iv.has_ci ? iv.hi / unit : NAN);
      across.tips.push_back(g->group + ": " + fmt_time(iv.estimate) +
                            (iv.has_ci ? " [" + fmt_time(iv.lo) + ", " + fmt_time(iv.hi) + "]" : "") + " across " +
                            std::to_string(iv.launches) + " launches");
      ys.push_back(iv.estimate / unit);
      for (std::size_t k = 0; k < iv.medians.size(); ++k) {
        each.x.push_back(x + 0.2);  // beside the interval, not on it
        each.y.push_back(iv.medians[k] / unit);
        each.tips.push_back(g->group + ", launch " +
                            (k < g->launch_numbers.size() ? std::to_string(g->launch_numbers[k]) : "?") + ": " +
                            fmt_time(iv.medians[k]));
        ys.push_back(iv.medians[k] / unit);
      }
    }
    p.logy = svg::spans_decade(ys);
    if (p.logy) p.ylabel += ", log scale";
    p.series = {across, each};
    out.push_back(figure(svg::render(p), slug("launches-" + workload),
                         "Figure: " + p.title + ". Each point's typical launch median with its " + pct(rep.confidence) +
                             " interval across launches (categories: no line joins them), and each launch's own "
                             "median beside it" +
                             (relative ? ", each divided by the point's typical launch median (they span " + span +
                                             ": the table above has them)"
                                       : std::string()) +
                             ". Hover a marker for the point and its figures."));
  }
  return out;
}

// Points measured in separate launches: the interval across them, and the comparisons and
// scaling models across launches.
void add_launch_sections(const Report& rep, Document& d) {
  if (rep.launches.empty()) return;
  Section s{"Across launches", 2, true, {}};
  s.blocks.push_back(
      text("Points measured in separate launches (jobs): the primary interval covers the variation between launches "
           "(two-stage: launch medians, then a t interval on their logarithms); each launch's own interval covers "
           "only the variation within it.",
           "-"));
  s.blocks.push_back(table(launches_table(rep), false));  // the terminal has the sentences below
  for (auto& f : launch_figures(rep)) s.blocks.push_back(std::move(f));
  // The terminal: the documents' table less each launch's own figures, its headers short.
  const std::string ci = pct(rep.confidence) + " CI";
  Table brief{{"point", "launches", "typical launch median (" + ci + ")", "between-launch share of variance"}};
  for (const auto& g : rep.launches)
    brief.push_back({g.group, std::to_string(g.interval.launches),
                     fmt_time(g.interval.estimate) +
                         (g.interval.has_ci ? " [" + fmt_time(g.interval.lo) + ", " + fmt_time(g.interval.hi) + "]"
                                            : " (no interval)"),
                     fmt_sig(g.interval.between_share * 100, 2) + "%"});
  s.blocks.push_back(terminal_words(table(std::move(brief))));
  d.sections.push_back(std::move(s));
  if (!rep.launch_comparisons.empty()) {
    Table pairs{{"points", "other vs baseline", "launches", "speedup (" + ci + ")", "verdict or efficiency"}};
    for (const auto& c : rep.launch_comparisons)
      pairs.push_back({c.group, c.other + " vs " + c.baseline, std::to_string(c.launches.size()), ratio_text(c.speedup),
                       c.varies == "ranks"        ? "efficiency " + fmt_sig(c.speedup.estimate / c.ideal, 3)
                       : c.speedup.excludes_one() ? std::string("significant")
                                                  : std::string("not significant")});
    Block compared = terminal_words(table(std::move(pairs)));
    compared.table.naming = 2;
    d.sections.push_back(
        {"Comparisons across launches",
         3,
         true,
         {text(launch_comparison_note(rep), "-"), table(launch_comparison_table(rep), false), std::move(compared)}});
  }
  if (!rep.launch_scaling.empty()) {
    std::vector<std::string> items;
    for (const auto& m : rep.launch_scaling)
      items.push_back("across " + std::to_string(m.launches.size()) + " launches, scaling model of " + m.group + ": " +
                      launch_model_words(m));
    d.sections.push_back(
        {"Scaling models across launches",
         3,
         true,
         {text(launch_scaling_note(rep), "-"), table(launch_scaling_table(rep), false), terminal_words(list(items))}});
  }
}

// Configurations that differ in a number (the distributed campaign's ranks) as lines against it,
// as a workload's rate figures lay out its points (rate_layout): a series per value of the
// parameter with the most values up to eight (scheme), a panel per value of the rest
// (ps_servers), the panels on shared axes. A configuration that missed the target has no marker
// and is named in the caption. Empty where no number tells them apart (or launches would join).
using TtaPoints = std::vector<std::pair<const TtaConfig*, const PointRow*>>;
std::vector<Block> tta_lines(const Report& rep, const std::string& workload, double target, const TtaPoints& configs) {
  std::vector<const PointRow*> rows;
  for (const auto& [c, r] : configs) rows.push_back(r);
  const RateLayout l = rate_layout(rows, rep.names, workload);
  if (l.x.categorical || l.x.name.empty() || l.launched) return {};
  std::set<double> at;
  std::vector<double> ys;
  for (const auto& [c, r] : configs) {
    at.insert(l.x_of(*r));
    if (c->summary.median_defined)
      ys.insert(ys.end(), {c->summary.median, c->summary.has_ci ? c->summary.lo : c->summary.median,
                           c->summary.has_ci && std::isfinite(c->summary.hi) ? c->summary.hi : c->summary.median});
  }
  if (at.size() < 2 || ys.empty()) return {};
  const std::vector<std::string> every = in_order(rows, [&](const PointRow& r) { return l.series_name(r); });
  const std::vector<std::string> backends = report_backends(rep);
  std::vector<std::string> panel_order;
  std::map<std::string, std::vector<std::size_t>> panels;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const std::string key = l.panel_of(*rows[i]);
    if (!panels.count(key)) panel_order.push_back(key);
    panels[key].push_back(i);
  }
  constexpr std::size_t kMostPanels = 6;
  if (panel_order.size() > kMostPanels) panel_order.resize(kMostPanels);
  // What every panel shares: its axes, scales and ranges.
  svg::Plot shared;
  shared.xspan.assign(at.begin(), at.end());
  shared.yspan = ys;
  shared.logx = svg::spans_decade(shared.xspan);
  shared.logy = svg::spans_decade(ys);
  shared.xlabel = l.axis_name() + (shared.logx ? " (log scale)" : "");
  shared.ylabel = "time to " + fmt_sig(target, 3) + " [s] (median, " + pct(rep.confidence) + " CI)" +
                  (shared.logy ? ", log scale" : "");
  shared.xticks = measured_ticks(shared.xspan);
  if (l.series != "backend") shared.legend_title = l.series;
  std::vector<Block> out;
  for (const auto& key : panel_order) {
    svg::Plot p = shared;
    p.title = workload + ": time to accuracy " + fmt_sig(target, 3) + (key.empty() ? "" : ", " + key);
    std::map<std::string, svg::Series> by_series;
    std::vector<std::string> missed;  // this panel's configurations that did not reach the target
    for (std::size_t i : panels[key]) {
      const auto& [c, r] = configs[i];
      const std::string name = l.series_name(*r);
      svg::Series& s = by_series[name];
      s.name = name;
      const int colour = backend_colour(backends, name);
      s.colour = colour >= 0 ? colour : static_cast<int>(std::find(every.begin(), every.end(), name) - every.begin());
      if (!c->summary.median_defined) {
        missed.push_back(label_rest(c->group));
        continue;
      }
      const TtaSummary& m = c->summary;
      s.x.push_back(l.x_of(*r));
      s.y.push_back(m.median);
      s.lo.push_back(m.has_ci ? m.lo : NAN);
      s.hi.push_back(m.has_ci ? (std::isfinite(m.hi) ? m.hi : m.budget_s) : NAN);
      s.tips.push_back(c->group + ": median " + tta_median_text(m) + " " + tta_ci_text(m) + "; reached " +
                       tta_success_text(m));
    }
    for (const auto& name : every)
      if (by_series.count(name)) p.series.push_back(std::move(by_series[name]));
    out.push_back(figure(
        svg::render(p), slug("tta-compare-" + workload + "-" + fmt_sig(target, 3) + (key.empty() ? "" : "-" + key)),
        "Figure: " + p.title +
            ". Each configuration's median time to accuracy over its runs (seeds; of one run, that "
            "run's) with its " +
            pct(rep.confidence) + " interval against " + l.x.name + ", one line per " + l.series +
            "; a line joins configurations that differ in " + l.x.name + " alone" +
            (panel_order.size() > 1 ? "; the panels share these axes" : "") +
            (missed.empty() ? "" : ". Not reached within the budget, so not drawn: " + join(missed, "; ")) +
            ". Hover a point for its figures."));
  }
  return out;
}

// Configurations side by side at each target at least two of them share: each one's median time
// to accuracy with its interval, a category each (named by what tells them apart, seeds aside),
// and its runs beside it; a run that missed stands at the budget, hollow in its tip's words.
// Configurations that differ in a number are lines against it instead (tta_lines).
std::vector<Block> tta_comparison_figures(const Report& rep) {
  const std::map<std::string, const PointRow*> by_id = rows_by_id(rep);
  auto workload_of = [&](const TtaConfig& c) {
    const auto it = c.ids.empty() ? by_id.end() : by_id.find(c.ids.front());
    return it == by_id.end() ? std::string() : it->second->workload;
  };
  std::vector<std::pair<std::string, double>> targets;  // (workload, target) in report order
  for (const auto& c : rep.tta)
    if (const std::pair<std::string, double> t{workload_of(c), c.summary.target};
        !t.first.empty() && std::find(targets.begin(), targets.end(), t) == targets.end())
      targets.push_back(t);
  std::vector<Block> out;
  std::size_t compared = 0;
  for (const auto& [workload, target] : targets) {
    TtaPoints configs;
    for (const auto& c : rep.tta)
      if (c.summary.target == target && workload_of(c) == workload) configs.push_back({&c, by_id.at(c.ids.front())});
    if (configs.size() < 2) continue;
    if (++compared > 3) break;  // the campaign's targets, not every one of many
    if (std::vector<Block> lines = tta_lines(rep, workload, target, configs); !lines.empty()) {
      for (auto& b : lines) out.push_back(std::move(b));
      continue;
    }
    std::vector<const PointRow*> rows;
    for (const auto& [c, r] : configs) rows.push_back(r);
    const Telling keys = telling(rows, rep.names, workload, {"seed"});
    auto [p, median, runs] =
        summary_beside(workload + ": time to accuracy " + fmt_sig(target, 3),
                       "time to " + fmt_sig(target, 3) + " [s] (median, " + pct(rep.confidence) + " CI)", keys.axis(),
                       "median", "each run");
    std::vector<double> ys;
    for (const auto& [c, r] : configs) {
      const auto x = static_cast<double>(p.xcats.size());
      const TtaSummary& m = c->summary;
      p.xcats.push_back(keys.name(*r));
      if (m.median_defined) {
        median.x.push_back(x);
        median.y.push_back(m.median);
        median.lo.push_back(m.has_ci ? m.lo : NAN);
        median.hi.push_back(m.has_ci ? (std::isfinite(m.hi) ? m.hi : m.budget_s) : NAN);
        median.tips.push_back(c->group + ": median " + tta_median_text(m) + " " + tta_ci_text(m) + "; reached " +
                              tta_success_text(m));
        ys.push_back(m.median);
      }
      for (double t : m.tta) {
        runs.x.push_back(x + 0.2);  // beside the interval, not on it
        runs.y.push_back(std::isfinite(t) ? t : m.budget_s);
        runs.tips.push_back(
            c->group + ": " +
            (std::isfinite(t) ? fmt_time(t) : "missed within the budget (" + fmt_time(m.budget_s) + ")"));
        ys.push_back(runs.y.back());
      }
    }
    p.logy = svg::spans_decade(ys);
    if (p.logy) p.ylabel += ", log scale";
    // Each configuration ran once and reached the target: its run is its median, not a second
    // marker beside it.
    const bool once = std::all_of(configs.begin(), configs.end(), [](const auto& c) {
      return c.first->summary.tta.size() <= 1 && c.first->summary.median_defined;
    });
    p.series = {median};
    if (!once) p.series.push_back(runs);
    out.push_back(figure(svg::render(p), slug("tta-compare-" + workload + "-" + fmt_sig(target, 3)),
                         "Figure: " + p.title + ", every configuration's median over its runs (seeds) with its " +
                             pct(rep.confidence) + " interval (categories: no line joins them)" +
                             (once ? ": each ran once, so its median is its run"
                                   : ", and each run beside it (a run that missed stands at the budget)") +
                             ". Hover a marker for its figures."));
  }
  return out;
}

// Where three or more configurations of a workload ran once each (the distributed campaign's
// schemes at each rank count, seed 1), their curves in one figure: a line per value of the
// parameter with the most values up to eight (scheme), a panel per value of the rest (ps_servers,
// ranks_per_node), each with the configurations' highest target and budget. Returns the groups
// drawn (by group name), whose own figures are then left out.
std::vector<Block> tta_curves_together(const Report& rep, const std::vector<std::vector<const TtaConfig*>>& by_group,
                                       std::set<std::string>& drawn) {
  const std::map<std::string, const PointRow*> by_id = rows_by_id(rep);
  std::map<std::string, std::vector<std::pair<const TtaConfig*, const PointRow*>>> by_workload;
  std::vector<std::string> order;
  for (const auto& g : by_group) {
    const TtaConfig* highest = *std::max_element(g.begin(), g.end(), [](const TtaConfig* a, const TtaConfig* b) {
      return a->summary.target < b->summary.target;
    });
    const auto it = highest->ids.size() == 1 ? by_id.find(highest->ids[0]) : by_id.end();
    if (it == by_id.end() || it->second->curve.empty()) continue;
    if (!by_workload.count(it->second->workload)) order.push_back(it->second->workload);
    by_workload[it->second->workload].push_back({highest, it->second});
  }
  std::vector<Block> out;
  for (const auto& workload : order) {
    const auto& configs = by_workload[workload];
    if (configs.size() < 3) continue;
    std::vector<const PointRow*> rows;
    for (const auto& [c, r] : configs) rows.push_back(r);
    const Telling keys = telling(rows, rep.names, workload, {"seed"});
    auto value = [&](const PointRow& r, std::size_t k) {
      return keys.keys[k][0] == "backend" ? r.backend : value_text(r, keys.keys[k][0]);
    };
    auto values_of = [&](std::size_t k) { return in_order(rows, [&](const PointRow& r) { return value(r, k); }); };
    std::size_t pick = keys.keys.size(), most = 0;
    for (std::size_t k = 0; k < keys.keys.size(); ++k)
      if (const std::size_t n = values_of(k).size(); n <= 8 && n > most) pick = k, most = n;
    if (pick == keys.keys.size()) continue;
    const std::vector<std::string> every = values_of(pick);
    std::vector<std::string> panel_order;
    std::map<std::string, std::vector<std::size_t>> panels;  // "k=v ..." -> configs
    for (std::size_t i = 0; i < configs.size(); ++i) {
      std::vector<std::string> parts;
      for (std::size_t k = 0; k < keys.keys.size(); ++k)
        if (k != pick) parts.push_back(join(keys.keys[k], " = ") + "=" + value(*rows[i], k));
      const std::string key = join(parts, " ");
      if (!panels.count(key)) panel_order.push_back(key);
      panels[key].push_back(i);
    }
    if (panel_order.size() >= configs.size()) continue;   // a panel per configuration: nothing gained
    if (panel_order.size() > 12) panel_order.resize(12);  // the rest: a figure each, up to their own cap
    for (const auto& key : panel_order) {
      svg::Plot p;
      p.title = workload + ": " + (key.empty() ? "accuracy against training time" : key);
      p.xlabel = "training time [s]";
      p.ylabel = "accuracy";
      p.legend_title = join(keys.keys[pick], " = ");
      double target = 0, budget = 0;
      for (std::size_t i : panels[key]) {
        const auto& [c, r] = configs[i];
        target = std::max(target, c->summary.target), budget = std::max(budget, c->summary.budget_s);
        svg::Series line;
        line.name = value(*r, pick);
        line.colour = static_cast<int>(std::find(every.begin(), every.end(), line.name) - every.begin());
        line.markers = false;
        line.dashed = c->summary.reached == 0;
        for (auto [t, a] : r->curve) line.x.push_back(t), line.y.push_back(a);
        line.tips.assign(line.x.size(), c->group + ": " + (c->summary.reached ? "reached " : "missed ") +
                                            fmt_sig(c->summary.target, 3) +
                                            (c->summary.median_defined ? " at " + fmt_time(c->summary.median) : ""));
        p.series.push_back(std::move(line));
        drawn.insert(c->group);
      }
      add_target_lines(p, {{"target", target}}, budget);
      out.push_back(figure(svg::render(p), slug("tta-curves-" + workload + "-" + key),
                           "Figure: " + p.title + ". Accuracy against training time, one run per " + p.legend_title +
                               " (dashed: it did not reach the target); each configuration ran once, so its curve "
                               "is its only run. Hover a line for its time to accuracy."));
    }
  }
  return out;
}

// Time to accuracy: the table, a sentence per configuration, and each one's curves.
void add_tta_section(const Report& rep, Document& d) {
  if (rep.tta.empty()) return;
  Section s{"Time to accuracy", 2, true, {}};
  s.blocks.push_back(
      text("Each run's time is that of its first evaluation reaching the target within the budget; a run that misses "
           "is censored (coded as > budget), never dropped. The share of runs reaching the target has a "
           "Clopper-Pearson interval; the median's interval is exact (order statistics), Kaplan-Meier's where runs "
           "were cut off.",
           "-"));
  Block figures = table(tta_table(rep));
  // The campaign's settings (target, budget, evaluation interval): said once where every
  // configuration has the same, else columns, the budget's and the interval's in the terminal only
  // with --wide.
  auto& settings = figures.table.table;
  std::vector<std::string> shared;
  std::size_t kept = 1;
  for (std::size_t col : {1, 2, 3}) {
    const bool same = settings.size() > 2 && std::all_of(settings.begin() + 2, settings.end(), [&](const auto& row) {
                        return row[kept] == settings[1][kept];
                      });
    if (!same) {
      if (col > 1) figures.table.wide_only.insert(kept);
      ++kept;
      continue;
    }
    shared.push_back(settings[0][kept] + " " + settings[1][kept]);
    for (auto& row : settings) row.erase(row.begin() + static_cast<std::ptrdiff_t>(kept));
  }
  if (!shared.empty()) s.blocks.push_back(text("Shared by every configuration: " + join(shared, ", ") + "."));
  workload_in_header(figures.table, "configuration");  // the distributed campaign's 19
  s.blocks.push_back(std::move(figures));
  // What the table's cells only flag: the cut-off runs and the ranks that disagree, in words.
  std::vector<std::string> items;
  for (const auto& c : rep.tta) {
    const std::string which = c.group + ", target " + fmt_sig(c.summary.target, 3) + ": ";
    if (c.cut_off)
      items.push_back(which + std::to_string(c.cut_off) + " run(s) cut off, censored (" + c.summary.method + ")");
    if (!c.disagreements.empty()) items.push_back(which + "RANKS DISAGREE: " + c.disagreements.front());
  }
  if (!items.empty()) s.blocks.push_back(list(items));
  for (auto& f : tta_comparison_figures(rep)) s.blocks.push_back(std::move(f));
  // A figure per configuration, its targets (report_targets) on the same curves.
  std::vector<std::vector<const TtaConfig*>> by_group;
  for (const auto& c : rep.tta) {
    auto it = std::find_if(by_group.begin(), by_group.end(), [&](const auto& g) { return g[0]->group == c.group; });
    if (it == by_group.end())
      by_group.push_back({&c});
    else
      it->push_back(&c);
  }
  std::set<std::string> together;
  for (auto& f : tta_curves_together(rep, by_group, together)) s.blocks.push_back(std::move(f));
  constexpr std::size_t kMostCurveFigures = 12;  // as a workload's rate panels
  std::size_t drawn = 0, more = 0;
  for (const auto& g : by_group) {
    const TtaConfig& c = *g.front();
    if (together.count(c.group)) continue;
    if (drawn == kMostCurveFigures) {
      ++more;
      continue;
    }
    bool curves = false;  // rank 0 of a parameter-server scheme is a server: it evaluates nothing
    for (const auto& r : rep.rows)
      if (std::find(c.ids.begin(), c.ids.end(), r.id) != c.ids.end()) curves = curves || !r.curve.empty();
    if (!curves) {
      s.blocks.push_back(text("No curve to draw for " + c.group + ": its runs' rank 0 recorded no evaluation."));
      continue;
    }
    s.blocks.push_back(figure(tta_svg(g, rep), slug("tta-" + c.group),
                              "Figure: accuracy against training time, " + c.group +
                                  ", one line per seed (dashed: a run that did not reach the " +
                                  (g.size() > 1 ? "highest target" : "target") + "); the black mark on " +
                                  (g.size() > 1 ? "each target's line" : "the target line") +
                                  " is the median time to accuracy with its " + pct(rep.confidence) + " interval."));
    ++drawn;
  }
  if (more > 0)
    s.blocks.push_back(text(std::to_string(more) + " more configurations' curves are not drawn; each run's evaluations "
                                                   "are in its results file (events, hdf5-schema/README.md)."));
  d.sections.push_back(std::move(s));
}

// Level 3: each scheme's step and communication, and the overlapped allreduce against the plain one.
void add_distributed_sections(const Report& rep, Document& d) {
  if (distributed_table(rep).size() <= 1) return;
  Block t = table(distributed_table(rep));
  // The terminal keeps the step, its communication and their share; the files have every column.
  t.table.wide_only = {4, 8, 9, 10};
  without_workload(t.table);
  // The terminal's words: what its columns are, and what "(inconsistent)" beside a scheme means.
  const bool inconsistent = std::any_of(t.table.table.begin() + 1, t.table.table.end(), [](const auto& row) {
    return row[1].find(" (inconsistent)") != std::string::npos;
  });
  const std::string brief =
      "Per step, medians of the slowest rank's phases; communication share = (communication + wait) / step." +
      std::string(inconsistent ? " (inconsistent): a scheme whose workers are not expected to hold the same parameters "
                                 "(ps-async, model averaging, D-PSGD); the others' are checked by a hash."
                               : "");
  d.sections.push_back({"Distributed training", 2, true, {text(distributed_note(), brief), t}});
  if (!rep.overlap.empty()) {
    Block o = table(overlap_table(rep));
    o.table.wide_only = {1};  // the workers: the rank count in the point's name says it where no server is
    without_workload(o.table);
    Section ov{"Overlap", 3, true, {text(overlap_note(rep), "-"), std::move(o)}};
    // A gain beyond the plain scheme's whole communication is not overlap's doing: say so.
    std::vector<std::string> beyond;
    for (const auto& c : rep.overlap)
      if (c.hidden_withheld.empty() ? c.hidden_lo > 1 : c.hidden > 1) beyond.push_back(c.group);
    if (!beyond.empty())
      ov.blocks.push_back(text(
          "Hidden beyond 100% (" + join(beyond, "; ") +
          "): the overlapped step is faster than the plain one by more than the plain scheme's whole communication "
          "and wait, so something besides overlap made the difference (the machine's state while each point ran, "
          "their placement, a warm-up): see both points in Measurement quality."));
    d.sections.push_back(std::move(ov));
  }
}

// Points identical but for the backend: the speedup of each over its baseline.
void add_comparison_section(const Report& rep, Document& d) {
  if (rep.comparisons.empty()) return;
  Section s{"Backend comparisons", 2, true, {}};
  s.blocks.push_back(text(
      "Speedup = median(baseline) / median(other) on points identical but for the backend and its "
      "own settings (those set on one backend's points and on none of another's, such as cuda's "
      "cudnn_api and fusion: named beside the backend where they tell two of its points apart), "
      "with " +
          ratio_method_words() + " " + pct(rep.confidence) + " intervals; significant when the interval excludes 1.",
      "-"));
  // Five or more: a table per baseline to scan, then (in the documents) every pair's figures;
  // fewer: every pair's figures, then a sentence each.
  std::vector<Block> matrices = comparison_matrices(rep);
  for (auto& m : matrices) s.blocks.push_back(std::move(m));
  // The table of every pair repeats the matrices but for the ratio of means: only where one has it.
  const bool means =
      std::any_of(rep.comparisons.begin(), rep.comparisons.end(), [](const Comparison& c) { return c.has_mean_ratio; });
  if (matrices.empty() || means) s.blocks.push_back(table(comparison_table(rep), false));
  if (matrices.empty()) {
    std::vector<std::string> items;
    for (const auto& c : rep.comparisons)
      items.push_back((c.group.empty() ? "" : c.group + ": ") + comparison_sentence(c));
    s.blocks.push_back(list(items));
  }
  // A training's seeds are replicates of one configuration: the comparison each seed's runs make
  // covers the variation within that seed's run only, this one the variation between seeds.
  if (!rep.seed_comparisons.empty()) {
    s.blocks.push_back(text(
        "Across seeds: the runs of one configuration that differ only in their seed are replicates (their data "
        "order and initial weights, and the machine's state while each ran, differ). Per seed the ratio of the two "
        "medians, then Student's t interval (seeds - 1 degrees of freedom) on their logarithms, exponentiated: the "
        "typical seed's speedup, with an interval that covers the variation between seeds, which each seed's own "
        "comparison above does not."));
    std::vector<std::string> items;
    for (const auto& c : rep.seed_comparisons) {
      const std::string needed = replicates_needed(c);
      items.push_back(
          (c.group.empty() ? "" : c.group + ": ") + c.other + " against " + c.baseline + " across " +
          std::to_string(c.launches.size()) + " seeds: " + ratio_text(c.speedup) + " (" + pct(c.confidence) + " CI), " +
          (c.speedup.excludes_one() ? c.speedup.estimate > 1 ? "faster" : "slower" : "no significant difference") +
          "; per seed " + join(paired_ratios(c, 3), ", ") +
          (needed.empty()
               ? ""
               : "; " + needed + " would tell " + fmt_sig(c.speedup.estimate, 3) + " from 1 at the spread these " +
                     std::to_string(c.launches.size()) + " show (itself an estimate)"));
    }
    s.blocks.push_back(list(items));
  }
  d.sections.push_back(std::move(s));
}

namespace {

// When and where the files were measured: "jobs started 2026-12-07 20:32:37 to 20:33:05 UTC on vm"
// (the files' creation, as each job's rank 0 stamped it; up to three hosts by name, else how many).
std::string measured_when(const Report& rep) {
  if (rep.first_started.empty()) return "";
  auto readable = [](std::string t) {
    if (t.size() == 20 && t[10] == 'T' && t.back() == 'Z') t = t.substr(0, 10) + " " + t.substr(11, 8);
    return t;
  };
  const std::string first = readable(rep.first_started), last = readable(rep.last_started);
  std::string text = "jobs started " + first;
  if (last != first) text += " to " + (last.substr(0, 11) == first.substr(0, 11) ? last.substr(11) : last);
  text += rep.first_started.back() == 'Z' ? " UTC" : "";
  std::set<std::string> hosts;
  for (const auto& e : rep.environments) hosts.insert(e.hosts.begin(), e.hosts.end());
  if (!hosts.empty())
    text += " on " + (hosts.size() <= 3 ? join(std::vector<std::string>(hosts.begin(), hosts.end()), ", ")
                                        : std::to_string(hosts.size()) + " hosts");
  return text;
}

}  // namespace

std::string fold_tags(std::string& open, const Block& b, const std::string& gap) {
  if (b.fold == open) return "";
  std::string tags = open.empty() ? "" : "</details>" + gap;
  if (!b.fold.empty()) tags += "<details><summary>" + html_escape(b.fold) + "</summary>" + gap;
  open = b.fold;
  return tags;
}

namespace {
// Measurement quality: its note, then a table per workload, as Results has, whose first columns
// are the workload's Results' (with_title), under a subsection per workload where there are several.
void add_quality_sections(const Report& rep, Document& d) {
  d.sections.push_back({"Measurement quality", 2, false, {text(quality_note(rep))}});
  const std::vector<std::string> workloads = report_workloads(rep);
  for (const auto& w : workloads) {
    Table t = quality_table(rep, w);
    if (t.size() < 2) continue;
    Block b = with_title(table(std::move(t)), rep, true);
    if (workloads.size() == 1)
      d.sections.back().blocks.push_back(std::move(b));
    else
      d.sections.push_back({"Measurement quality: " + w, 3, false, {std::move(b)}});
  }
}
}  // namespace

Document report_document(const Report& rep) {
  Document d;
  d.title = "d500 report: " + rep.campaign;
  d.facts = {"campaign hash: " + rep.campaign_hash, "d500: " + rep.d500_version};
  if (const std::string when = measured_when(rep); !when.empty()) d.facts.push_back(when);
  d.facts.push_back("files read: " + std::to_string(rep.files.size()));
  d.facts.push_back("bootstrap seed: " + std::to_string(rep.seed));
  if (auto glance = glance_section(rep)) d.sections.push_back(std::move(*glance));
  {
    Section s{"Results", 2, true, {}};
    s.blocks.push_back(text(
        "One table per workload, its rows in plan order: the parameters that differ between its points are "
        "columns, those they share are said once. Times are the median over the timed repetitions (reps) of the "
        "slowest rank; "
        "rates are per rank (all ranks: their sum, where every rank does the same work); validation gives the "
        "largest relative error against the reference. Hover a row (HTML) for the point's full parameters; results.csv has every figure.",
        "-"));
    d.sections.push_back(std::move(s));
    for (const auto& w : report_workloads(rep)) d.sections.push_back(workload_results(rep, w));
  }
  if (auto r = roofline(rep); !r.empty()) d.sections.push_back({"Roofline", 2, true, std::move(r)});
  if (network_table(rep).size() > 1) {
    Block t = table(network_table(rep));
    t.table.wide_only = {2};  // the rate's interval: Results has it in the terminal
    Section s{"Networks", 2, true, {text(network_note(), "-"), with_title(std::move(t), rep, true)}};
    for (auto& b : network_breakdowns(rep)) s.blocks.push_back(std::move(b));
    d.sections.push_back(std::move(s));
  }
  if (training_table(rep).size() > 1) {
    Block t = table(training_table(rep));
    t.table.wide_only = {5};  // the terminal leaves out the update phase; the files have it
    d.sections.push_back(
        {"Training steps", 2, true, {text(training_note(), "-"), with_title(std::move(t), rep, true)}});
  }
  if (device_table(rep).size() > 1)
    d.sections.push_back(
        {"On the device", 2, false, {text(device_note()), with_title(table(device_table(rep)), rep, true)}});
  if (collectives_table(rep).size() > 1)
    d.sections.push_back(
        {"Collectives", 2, false, {text(collectives_note()), with_title(table(collectives_table(rep)), rep, true)}});
  add_distributed_sections(rep, d);
  add_comparison_section(rep, d);
  add_scaling_section(rep, d);
  add_launch_sections(rep, d);
  add_tta_section(rep, d);
  // The method after the figures it explains: a reader meets the results first.
  {
    Block items = list(method_items(rep));
    items.terminal = false;  // the terminal says it in brief
    d.sections.push_back({"Method", 2, true, {terminal_words(text(method_brief(rep))), std::move(items)}});
  }
  if (environment_table(rep).size() > 1)
    d.sections.push_back({"Environment",
                          2,
                          false,
                          {text("As rank 0 of each job recorded it (/env of the results files; per-rank "
                                "differences are not recorded). A governor other than performance, or one "
                                "that is unreadable, may let clocks vary between repetitions."),
                           table(environment_table(rep))}});
  if (auto code = code_loaded_section(rep)) d.sections.push_back(std::move(*code));
  add_quality_sections(rep, d);
  if (Table v = validation_table(rep); v.size() > 1)
    d.sections.push_back(
        {"Validation", 2, false, {text(validation_note()), with_title(table(std::move(v)), rep, true)}});
  if (auto att = attention_items(rep); !att.whole.empty()) {
    Block items = list(std::move(att.whole));
    items.brief_items = std::move(att.brief);
    d.sections.push_back({"Points needing attention", 2, true, {std::move(items)}});
  }
  if (!rep.unreadable.empty()) {
    std::vector<std::string> items;
    for (const auto& u : rep.unreadable) items.push_back("unreadable: " + u);
    Block b = list(items);
    b.wrap = false;  // paths and library messages, whole on their lines
    d.sections.push_back({"Unreadable files", 2, true, {b}});
  }
  // Each figure's file name once: a second of the same name gets -2, a third -3.
  std::map<std::string, int> seen;
  for (auto& s : d.sections)
    for (auto& b : s.blocks)
      if (b.kind == Block::Kind::Figure && ++seen[b.name] > 1) b.name += "-" + std::to_string(seen[b.name]);
  return d;
}

}  // namespace d500
