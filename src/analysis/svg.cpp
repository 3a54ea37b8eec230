#include "analysis/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>

#include "common/text.hpp"

namespace d500::svg {

namespace {
const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f"};
constexpr double W = 600, H = 340, L = 70, R = 170, T = 34, B = 48;
constexpr double kCharWidth = 6.6;  // an 11-px sans-serif character, generously
constexpr std::size_t kLegendRows = 14;

struct Axis {
  double lo, hi;
  bool log;
  double map(double v, double a, double b) const {
    double f = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    return a + f * (b - a);
  }
  std::vector<double> ticks() const {
    std::vector<double> t;
    if (log) {
      // 1-2-5 per decade; a narrow range gets finer mantissas so it still has labels.
      for (const auto& mantissas :
           {std::vector<double>{1, 2, 5}, std::vector<double>{1, 1.2, 1.5, 2, 3, 4, 5, 6, 7, 8, 9}}) {
        t.clear();
        for (double e = std::floor(std::log10(lo)); e <= std::ceil(std::log10(hi)); ++e)
          for (double m : mantissas) {
            double v = m * std::pow(10, e);
            if (v >= lo * 0.999 && v <= hi * 1.001) t.push_back(v);
          }
        if (t.size() >= 3) break;
      }
      if (t.size() > 8) {  // many decades: one tick a decade
        std::vector<double> d;
        for (double v : t)
          if (std::fabs(std::log10(v) - std::round(std::log10(v))) < 1e-9) d.push_back(v);
        if (d.size() >= 2) t = d;
      }
    } else {
      double step = std::pow(10, std::floor(std::log10((hi - lo) / 5)));
      for (double m : {1.0, 2.0, 5.0, 10.0})
        if ((hi - lo) / (step * m) <= 7) {
          step *= m;
          break;
        }
      for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
        t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);  // no "-0" from rounding
    }
    return t;
  }
};

Axis make_axis(std::vector<double> v, bool log) {
  v.erase(std::remove_if(v.begin(), v.end(), [&](double x) { return !std::isfinite(x) || (log && x <= 0); }), v.end());
  if (v.empty()) return {1, 10, log};
  double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  if (log) {
    lo /= 1.3, hi *= 1.3;
  } else {
    double pad = (hi - lo) * 0.08 + (hi == lo ? std::fabs(hi) * 0.1 + 1e-12 : 0);
    lo -= pad, hi += pad;
  }
  return {lo, hi, log};
}

// A tick's label with `digits` significant digits: 16384, 1.05e6 -> "16.4k", "1.05M" (short
// enough for an axis); `binary`: sizes in bytes, 65536 -> "64Ki".
std::string tick_text(double v, int digits = 3, bool binary = false) {
  char b[32];
  const double a = std::fabs(v), step = binary ? 1024 : 1000;
  if (binary ? a >= 1024 : a >= 1e4 && a < 1e15) {
    const char* si[] = {"k", "M", "G", "T"};
    const char* iec[] = {"Ki", "Mi", "Gi", "Ti"};
    int u = -1;
    double x = v;
    while (std::fabs(x) >= step && u < 3) x /= step, ++u;
    std::snprintf(b, sizeof b, "%.*g%s", digits, x, (binary ? iec : si)[u]);
    return b;
  }
  if (a >= 1 && a < 1e9 && std::fabs(v - std::round(v)) < 1e-9 * a)
    std::snprintf(b, sizeof b, "%.0f", v);  // 1000, not 1e+03
  else
    std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

// The labels of `ticks`, with as many digits as it takes for no two to read alike (a narrow
// range, 27.95k to 28.2k, needs more than three).
std::vector<std::string> tick_texts(const std::vector<double>& ticks, bool binary = false) {
  std::vector<std::string> t;
  for (int digits = 3; digits <= 8; ++digits) {
    t.clear();
    for (double v : ticks) t.push_back(tick_text(v, digits, binary));
    bool distinct = true;
    for (std::size_t i = 1; i < t.size(); ++i) distinct = distinct && t[i] != t[i - 1];
    if (distinct) break;
  }
  return t;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// A data value as an attribute: every digit it needs (0.001 and 0.02 stay apart).
std::string data_num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

// `s` cut to `chars` characters with an ellipsis in its middle.
std::string cut_middle(const std::string& s, std::size_t chars) {
  if (s.size() <= chars) return s;
  const std::size_t head = (chars - 1) / 2, tail = chars - 1 - head;
  return s.substr(0, head) + "\u2026" + s.substr(s.size() - tail);
}

// `s`'s ", "-separated parts.
std::vector<std::string> split_parts(const std::string& s) {
  std::vector<std::string> parts;
  for (std::size_t from = 0;;) {
    const std::size_t at = s.find(", ", from);
    parts.push_back(s.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) return parts;
    from = at + 2;
  }
}

// `parts` joined by ", ", each cut in the middle to at most max(its `least`, cap) characters with
// the largest cap that fits `chars`; nullopt where even the least do not fit.
std::optional<std::string> cut_parts(const std::vector<std::string>& parts, const std::vector<std::size_t>& least,
                                     std::size_t chars) {
  auto length = [&](std::size_t cap) {
    std::size_t n = 2 * (parts.size() - 1);
    for (std::size_t k = 0; k < parts.size(); ++k) n += std::min(parts[k].size(), std::max(least[k], cap));
    return n;
  };
  if (length(0) > chars) return std::nullopt;
  std::size_t longest = 0, cap = 0;
  for (const auto& p : parts) longest = std::max(longest, p.size());
  while (cap < longest && length(cap + 1) <= chars) ++cap;
  std::string o;
  for (std::size_t k = 0; k < parts.size(); ++k) o += (k ? ", " : "") + cut_middle(parts[k], std::max(least[k], cap));
  return o;
}

// `s` cut to the characters `width` holds with an ellipsis (the full text goes into the element's
// <title>): at its end, or with `middle` in the middle of each of its ", "-separated parts, the
// longest first, which keeps apart names that differ only at a part's end ("cuda
// (fusion=add_relu), bf16" and "cuda (fusion=add_relu+bn_relu), bf16" read "cuda (…_relu), bf16"
// and "cuda (…n_relu), bf16", not alike).
std::string fit(const std::string& s, double width, bool middle = false) {
  const std::size_t chars = static_cast<std::size_t>(std::max(4.0, width / kCharWidth));
  if (s.size() <= chars) return s;
  if (!middle) return s.substr(0, chars - 1) + "\u2026";
  const std::vector<std::string> parts = split_parts(s);
  if (parts.size() > 1 && 2 * (parts.size() - 1) + 4 * parts.size() <= chars)
    if (auto cut = cut_parts(parts, std::vector<std::size_t>(parts.size(), 4), chars)) return *cut;
  return cut_middle(s, chars);
}

// `s` cut to `chars` characters around `at`, with an ellipsis at each end cut.
std::string window(const std::string& s, std::size_t at, std::size_t chars) {
  if (s.size() <= chars) return s;
  const std::size_t from = std::min(at > chars / 3 ? at - chars / 3 : 0, s.size() - (chars - 1));
  if (from == 0) return s.substr(0, chars - 1) + "\u2026";
  if (from + chars - 1 >= s.size()) return "\u2026" + s.substr(from);
  return "\u2026" + s.substr(from, chars - 2) + "\u2026";
}

// Whether two of `shown` read alike while their `full` names differ.
bool any_alike(const std::vector<std::string>& full, const std::vector<std::string>& shown) {
  for (std::size_t i = 0; i < full.size(); ++i)
    for (std::size_t j = i + 1; j < full.size(); ++j)
      if (shown[i] == shown[j] && full[i] != full[j]) return true;
  return false;
}

// Names made of as many ", "-separated parts each (a value per parameter: "cuda, add_relu+bn_relu,
// tf32"), cut part by part: each part no shorter than keeps its values apart (add_relu and
// add_relu+bn_relu need 13 characters, nchw and channels_last 4), the room left shared evenly. Empty
// where the names are not so made or cannot be cut so.
std::vector<std::string> fit_by_part(const std::vector<std::string>& full, const std::vector<double>& widths) {
  std::vector<std::vector<std::string>> parts;
  for (const auto& f : full) parts.push_back(split_parts(f));
  const std::size_t count = parts.empty() ? 0 : parts[0].size();
  if (count < 2 || std::any_of(parts.begin(), parts.end(), [&](const auto& p) { return p.size() != count; })) return {};
  std::vector<std::size_t> least(count, 4);
  for (std::size_t k = 0; k < count; ++k) {
    std::set<std::string> values;
    std::size_t longest = 0;
    for (const auto& p : parts) values.insert(p[k]), longest = std::max(longest, p[k].size());
    auto apart = [&](std::size_t cap) {
      std::set<std::string> cut;
      for (const auto& v : values) cut.insert(cut_middle(v, cap));
      return cut.size() == values.size();
    };
    while (least[k] < longest && !apart(least[k])) ++least[k];
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < full.size(); ++i) {
    auto cut = cut_parts(parts[i], least, static_cast<std::size_t>(std::max(4.0, widths[i] / kCharWidth)));
    if (!cut) return {};
    out.push_back(*cut);
  }
  return out;
}

// Names of things side by side (a figure's categories, boxes, legend entries), each cut to its
// width (fit, in the middle); where two would read alike, cut part by part (fit_by_part), or
// failing that each shown from about where it first differs from the other ("…relu), tf32…",
// "…relu+bn_rel…"): two points nobody can tell apart are no use. The full name stays in the hover
// text.
std::vector<std::string> fit_apart(const std::vector<std::string>& full, const std::vector<double>& widths) {
  std::vector<std::string> shown(full.size());
  for (std::size_t i = 0; i < full.size(); ++i) shown[i] = fit(full[i], widths[i], true);
  if (!any_alike(full, shown)) return shown;
  if (auto by_part = fit_by_part(full, widths); !by_part.empty() && !any_alike(full, by_part)) return by_part;
  std::vector<std::string> apart = shown;
  for (std::size_t i = 0; i < full.size(); ++i) {
    std::size_t at = 0;
    bool alike = false;
    for (std::size_t j = 0; j < full.size(); ++j)
      if (j != i && shown[j] == shown[i] && full[j] != full[i]) {
        alike = true;
        std::size_t same = 0;
        while (same < full[i].size() && same < full[j].size() && full[i][same] == full[j][same]) ++same;
        at = std::max(at, same);
      }
    if (alike) apart[i] = window(full[i], at, static_cast<std::size_t>(std::max(4.0, widths[i] / kCharWidth)));
  }
  return apart;
}

// A text element showing `shown`, with `full` as its hover text where the two differ.
std::string text_shown(double x, double y, const std::string& cls, const std::string& anchor, const std::string& full,
                       const std::string& shown, const std::string& extra = "") {
  return "<text class=\"" + cls + "\" x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\"" +
         extra + ">" + (shown != full ? "<title>" + html_escape(full) + "</title>" : "") + html_escape(shown) +
         "</text>\n";
}

std::string text_el(double x, double y, const std::string& cls, const std::string& anchor, const std::string& full,
                    double width, const std::string& extra = "") {
  // An axis's label up to a quarter too long for its axis is drawn whole, narrowed to fit, rather
  // than cut ("time per repetition [s] (median, CI), log scale").
  if ((cls == "ylabel" || cls == "xlabel") && static_cast<double>(full.size()) * kCharWidth > width &&
      static_cast<double>(full.size()) * kCharWidth <= width * 1.25)
    return text_shown(x, y, cls, anchor, full, full,
                      extra + " textLength=\"" + num(width - 4) + "\" lengthAdjust=\"spacingAndGlyphs\"");
  // A tick or a legend entry names one of several things side by side, whose names often differ
  // only at their ends ("cuda (fusion=add_relu)", "cuda (fusion=add_relu+bn_relu)"): cut in the middle.
  return text_shown(x, y, cls, anchor, full, fit(full, width, cls == "tick" || cls == "legend"), extra);
}

// A figure `height` tall (H, or more where names below the plotting area need room): its title,
// the plotting area, the y axis's label and the x axis's at the figure's foot.
// `width`: the canvas's (at least W; the plotting area and legend keep their places, the rest
// is room for slanted names on the right).
std::string frame(const std::string& title, const std::string& xlabel, const std::string& ylabel, double height = H,
                  double width = W) {
  std::string o = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"d500-figure\" width=\"" + num(width) +
                  "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
                  "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o += text_el(8, 18, "title", "start", title, W - 16, " font-size=\"12\" font-weight=\"bold\"");
  o += "<rect class=\"plot-area\" x=\"" + num(L) + "\" y=\"" + num(T) + "\" width=\"" + num(W - L - R) +
       "\" height=\"" + num(H - T - B) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  if (!xlabel.empty()) o += text_el((L + W - R) / 2, height - 8, "xlabel", "middle", xlabel, W - L - R);
  o += text_el(0, 0, "ylabel", "middle", ylabel, H - T - B,
               " transform=\"translate(14," + num((T + H - B) / 2) + ") rotate(-90)\"");
  return o;
}

// Below the plotting area, room for category names slanted at 40 degrees (about 40 characters:
// a point named by four parameters, "libtorch-native, 1, bf16, channels_last", reads whole),
// which a name too long for its slot gets: a label of width w reaches w cos 40 to the right and
// w sin 40 down, so that it is cut only where it would leave the figure.
constexpr double kSlantedLabels = 185;
// The room below the plotting area that the longest of `names` takes slanted (at most kSlantedLabels).
double slanted_room(const std::vector<std::string>& names) {
  std::size_t longest = 0;
  for (const auto& n : names) longest = std::max(longest, n.size());
  return std::clamp(static_cast<double>(longest) * kCharWidth * std::sin(40 * M_PI / 180) + 28, 48.0, kSlantedLabels);
}
// The longest a slanted name may be, and how far right of its start a slanted width reaches.
constexpr double kSlantedWidest = kSlantedLabels * 1.45;
const double kSlantCos = std::cos(40 * M_PI / 180);
// The width a name slanted from `x` has before it would leave a canvas `width` wide.
// Slanted down to the right, so that the first names, where most are, have the room of the later ones.
double slanted_width(double x, double width = W) { return std::min(kSlantedWidest, (width - 6 - x) / kSlantCos); }
// The canvas width that shows whole the names slanted from xs (each at most kSlantedWidest),
// from W up to W + kSlantedLabels: the last names of a row reach past the legend's column.
double slanted_canvas(const std::vector<std::string>& names, const std::vector<double>& xs) {
  double right = W;
  for (std::size_t i = 0; i < names.size() && i < xs.size(); ++i)
    right = std::max(
        right, xs[i] + 6 + std::min(kSlantedWidest, static_cast<double>(names[i].size()) * kCharWidth) * kSlantCos);
  return std::min(right, W + kSlantedLabels);
}
std::string slanted_label(double x, const std::string& name, const std::string& shown) {
  return text_shown(x - 3, H - B + 12, "tick", "start", name, shown,
                    " transform=\"rotate(40 " + num(x - 3) + " " + num(H - B + 12) + ")\"");
}
bool needs_slant(const std::vector<std::string>& names, double slot) {
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return static_cast<double>(n.size()) * kCharWidth > slot - 4; });
}

std::string y_ticks(const Axis& ay) {
  std::string o;
  const std::vector<double> ticks = ay.ticks();
  const std::vector<std::string> labels = tick_texts(ticks);
  for (std::size_t i = 0; i < ticks.size(); ++i) {
    const double y = ay.map(ticks[i], H - B, T);
    o += "<line x1=\"" + num(L - 4) + "\" y1=\"" + num(y) + "\" x2=\"" + num(W - R) + "\" y2=\"" + num(y) +
         "\" stroke=\"#ddd\"/><text class=\"tick ytick\" x=\"" + num(L - 6) + "\" y=\"" + num(y + 4) +
         "\" text-anchor=\"end\">" + labels[i] + "</text>\n";
  }
  return o;
}

// A legend name too long for its column ("cuda (fusion=add_relu+bn_relu)"): where it breaks
// after a space, '(', '=', '+' or ',' into two lines that each fit, those lines, the first as long
// as it can be ("cuda (fusion=" / "add_relu+bn_relu)"); else none (the name is then cut, fit_apart).
std::vector<std::string> two_lines(const std::string& name, double width) {
  const auto fits = static_cast<std::size_t>(width / kCharWidth);
  if (name.size() <= fits || name.size() > 2 * fits) return {};
  std::size_t at = 0;
  for (std::size_t i = 1; i < name.size() && i <= fits; ++i)
    if (std::string(" (=+,").find(name[i - 1]) != std::string::npos && name.size() - i <= fits) at = i;
  if (at == 0) return {};
  std::string first = name.substr(0, at);
  while (!first.empty() && first.back() == ' ') first.pop_back();
  return {first, name.substr(at)};
}

// A legend entry at row `k` (16 px each) of the legend's column: its marker or line, and its name
// shown whole on `lines` (two_lines: a <text> of two <tspan>s, the second row below) or as `shown`.
std::string legend_entry(std::size_t k, const std::string& colour, const std::string& name, const std::string& shown,
                         bool dashed, bool line, const std::vector<std::string>& lines = {}) {
  const double ly = T + 14 + 16 * static_cast<double>(k);
  std::string o;
  if (line)
    o += "<line x1=\"" + num(W - R + 10) + "\" y1=\"" + num(ly - 4) + "\" x2=\"" + num(W - R + 28) + "\" y2=\"" +
         num(ly - 4) + "\" stroke=\"" + colour + "\" stroke-width=\"2\"" + (dashed ? " stroke-dasharray=\"5,4\"" : "") +
         "/>";
  else
    o += "<circle cx=\"" + num(W - R + 19) + "\" cy=\"" + num(ly - 4) + "\" r=\"3\" fill=\"" + colour + "\"/>";
  if (lines.size() == 2)
    return o + "<text class=\"legend\" x=\"" + num(W - R + 32) + "\" y=\"" + num(ly) + "\" text-anchor=\"start\">" +
           "<tspan>" + html_escape(lines[0]) + "</tspan><tspan x=\"" + num(W - R + 32) + "\" dy=\"14\">" +
           html_escape(lines[1]) + "</tspan></text>\n";
  return o + text_shown(W - R + 32, ly, "legend", "start", name, shown);
}
}  // namespace

bool spans_decade(const std::vector<double>& v) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (double x : v)
    if (std::isfinite(x) && x > 0) lo = std::min(lo, x), hi = std::max(hi, x);
  return hi > 0 && hi >= 10 * lo;
}

std::string render(const Plot& p) {
  std::vector<double> xs, ys;
  for (const auto& s : p.series) {
    xs.insert(xs.end(), s.x.begin(), s.x.end());
    ys.insert(ys.end(), s.y.begin(), s.y.end());
    ys.insert(ys.end(), s.lo.begin(), s.lo.end());
    ys.insert(ys.end(), s.hi.begin(), s.hi.end());
  }
  for (const auto& m : p.marks) xs.push_back(m.lo), xs.push_back(m.hi), xs.push_back(m.x), ys.push_back(m.y);
  xs.insert(xs.end(), p.xspan.begin(), p.xspan.end());
  ys.insert(ys.end(), p.yspan.begin(), p.yspan.end());
  const bool cats = !p.xcats.empty();
  Axis ax = cats ? Axis{-0.5, static_cast<double>(p.xcats.size()) - 0.5, false} : make_axis(xs, p.logx);
  Axis ay = make_axis(ys, p.logy);
  auto X = [&](double v) { return ax.map(v, L, W - R); };
  auto Y = [&](double v) { return ay.map(v, H - B, T); };
  const double slot = cats ? (W - L - R) / static_cast<double>(p.xcats.size()) : 0;
  const bool slanted = cats && needs_slant(p.xcats, slot);
  std::vector<double> at;  // the categories' places
  for (std::size_t i = 0; i < p.xcats.size(); ++i) at.push_back(X(static_cast<double>(i)));
  const double canvas = slanted ? slanted_canvas(p.xcats, at) : W;
  std::string o = frame(p.title, p.xlabel, p.ylabel, H + (slanted ? slanted_room(p.xcats) : 0), canvas);
  if (cats) {
    std::vector<double> widths;
    for (std::size_t i = 0; i < p.xcats.size(); ++i)
      widths.push_back(slanted ? slanted_width(at[i], canvas) : slot - 4);
    const std::vector<std::string> shown = fit_apart(p.xcats, widths);
    for (std::size_t i = 0; i < p.xcats.size(); ++i)
      o += slanted ? slanted_label(at[i], p.xcats[i], shown[i])
                   : text_shown(at[i], H - B + 16, "tick", "middle", p.xcats[i], shown[i]);
  } else {
    std::vector<double> ticks = p.xticks.empty() ? ax.ticks() : p.xticks;
    ticks.erase(std::remove_if(ticks.begin(), ticks.end(), [&](double t) { return t < ax.lo || t > ax.hi; }),
                ticks.end());
    const std::vector<std::string> labels = tick_texts(ticks, p.binary_x);
    for (std::size_t i = 0; i < ticks.size(); ++i)
      o += "<line x1=\"" + num(X(ticks[i])) + "\" y1=\"" + num(H - B) + "\" x2=\"" + num(X(ticks[i])) + "\" y2=\"" +
           num(H - B + 4) + "\" stroke=\"#444\"/><text class=\"tick\" x=\"" + num(X(ticks[i])) + "\" y=\"" +
           num(H - B + 16) + "\" text-anchor=\"middle\">" + labels[i] + "</text>\n";
  }
  o += y_ticks(ay);
  const std::size_t head = p.legend_title.empty() ? 0 : 1, rows = kLegendRows - head;
  if (head) o += text_el(W - R + 10, T + 14, "legend", "start", p.legend_title, R - 14, " font-weight=\"bold\"");
  const std::size_t shown = p.series.size() > rows ? rows - 1 : p.series.size();
  std::vector<std::string> legend_names;
  for (std::size_t k = 0; k < shown; ++k) legend_names.push_back(p.series[k].name);
  const std::vector<std::string> legend_shown = fit_apart(legend_names, std::vector<double>(shown, R - 36));
  // Names too long for one line take two where the legend has the rows (every series shown).
  std::vector<std::vector<std::string>> legend_lines(shown);
  std::size_t extra = 0;
  for (std::size_t k = 0; k < shown; ++k)
    if (legend_shown[k] != legend_names[k]) {
      legend_lines[k] = two_lines(legend_names[k], R - 36);
      extra += legend_lines[k].empty() ? 0 : 1;
    }
  if (shown < p.series.size() || shown + extra > rows) legend_lines.assign(shown, {});
  std::size_t row = head;
  for (std::size_t k = 0; k < p.series.size(); ++k) {
    const auto& s = p.series[k];
    const std::string c =
        s.colour == kBlack ? "#000000"
        : s.colour == kGrey
            ? "#999999"
            : kColours[(s.colour >= 0 ? static_cast<std::size_t>(s.colour) : k) % (sizeof kColours / sizeof *kColours)];
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.y[i]) && (!p.logy || s.y[i] > 0) && (!p.logx || cats || s.x[i] > 0)) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.x[a] < s.x[b]; });
    o += "<g class=\"series\" data-name=\"" + html_escape(s.name) + "\" data-line=\"" + (s.line ? "1" : "0") + "\">\n";
    if (s.line && order.size() > 1) {
      std::string pts;
      for (std::size_t i : order) pts += num(X(s.x[i])) + "," + num(Y(s.y[i])) + " ";
      o += "<polyline fill=\"none\" stroke=\"" + c + "\" stroke-width=\"1.5\"" +
           (s.dashed ? " stroke-dasharray=\"5,4\"" : "") + " points=\"" + pts + "\"><title>" + html_escape(s.name) +
           "</title></polyline>\n";
    }
    for (std::size_t i : order) {
      if (i < s.lo.size() && std::isfinite(s.lo[i]) && std::isfinite(s.hi[i]) && (!p.logy || s.lo[i] > 0))
        o += "<line class=\"ci\" x1=\"" + num(X(s.x[i])) + "\" y1=\"" + num(Y(s.lo[i])) + "\" x2=\"" + num(X(s.x[i])) +
             "\" y2=\"" + num(Y(s.hi[i])) + "\" stroke=\"" + c + "\"/>\n";
      if (s.markers)
        o += "<circle class=\"point\" data-x=\"" + data_num(s.x[i]) + "\" cx=\"" + num(X(s.x[i])) + "\" cy=\"" +
             num(Y(s.y[i])) + "\" r=\"3.5\" fill=\"" + c + "\">" +
             (i < s.tips.size() ? "<title>" + html_escape(s.tips[i]) + "</title>" : "") + "</circle>\n";
    }
    o += "</g>\n";
    if (k < shown) {
      o += legend_entry(row, c, s.name, legend_shown[k], s.dashed, s.line || !s.markers, legend_lines[k]);
      row += legend_lines[k].empty() ? 1 : 2;
    }
  }
  if (shown < p.series.size())
    o += text_el(W - R + 10, T + 14 + 16 * static_cast<double>(row), "legend", "start",
                 "+" + std::to_string(p.series.size() - shown) + " more (hover)", R - 14);
  for (const auto& m : p.marks) {
    o += "<g class=\"mark\"><line x1=\"" + num(X(m.lo)) + "\" y1=\"" + num(Y(m.y)) + "\" x2=\"" + num(X(m.hi)) +
         "\" y2=\"" + num(Y(m.y)) + "\" stroke=\"#000\" stroke-width=\"4\" opacity=\"0.45\"><title>" +
         html_escape(m.tip) + "</title></line>";
    o += "<circle class=\"point\" data-x=\"" + data_num(m.x) + "\" cx=\"" + num(X(m.x)) + "\" cy=\"" + num(Y(m.y)) +
         "\" r=\"4.5\" fill=\"#000\"><title>" + html_escape(m.tip) + "</title></circle></g>\n";
  }
  return o + "</svg>\n";
}

// A box plot lies on its side: a row per box, its name whole (or cut in the middle where longer
// than kBoxNamesWidest) in a column on the left, read without turning the head; the values on the
// x axis below. The caption says what box, whiskers and bar are.
constexpr double kBoxRow = 18, kBoxNamesWidest = 340;
std::string render(const BoxPlot& p) {
  std::vector<double> xs;
  for (const auto& b : p.boxes) xs.insert(xs.end(), b.values.begin(), b.values.end());
  const Axis ax = make_axis(xs, p.log_values);
  std::size_t longest = 0;
  for (const auto& b : p.boxes) longest = std::max(longest, b.name.size());
  const double left = std::clamp(static_cast<double>(longest) * kCharWidth + 14, 80.0, kBoxNamesWidest + 14);
  const double right = W - 16, top = T + 8, bottom = top + kBoxRow * static_cast<double>(p.boxes.size());
  const double height = bottom + 44;
  auto X = [&](double v) { return ax.map(v, left, right); };
  std::string o = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"d500-figure\" width=\"" + num(W) + "\" height=\"" +
                  num(height) + "\" viewBox=\"0 0 " + num(W) + " " + num(height) +
                  "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o += text_el(8, 18, "title", "start", p.title, W - 16, " font-size=\"12\" font-weight=\"bold\"");
  // What the names are, above their column; what the values are, below the axis.
  if (!p.names_label.empty()) o += text_el(8, top - 8, "ylabel", "start", p.names_label, W - 16);
  o += "<rect class=\"plot-area\" x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(right - left) +
       "\" height=\"" + num(bottom - top) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  o += text_el((left + right) / 2, height - 8, "xlabel", "middle", p.values_label, right - left);
  const std::vector<double> ticks = ax.ticks();
  const std::vector<std::string> labels = tick_texts(ticks);
  for (std::size_t i = 0; i < ticks.size(); ++i) {
    const double x = X(ticks[i]);
    o += "<line x1=\"" + num(x) + "\" y1=\"" + num(top) + "\" x2=\"" + num(x) + "\" y2=\"" + num(bottom + 4) +
         "\" stroke=\"#ddd\"/><text class=\"tick\" x=\"" + num(x) + "\" y=\"" + num(bottom + 16) +
         "\" text-anchor=\"middle\">" + labels[i] + "</text>\n";
  }
  std::vector<std::string> names;
  for (const auto& b : p.boxes) names.push_back(b.name);
  const std::vector<std::string> shown = fit_apart(names, std::vector<double>(names.size(), left - 13));
  const double half = std::min(6.0, kBoxRow * 0.33);
  for (std::size_t i = 0; i < p.boxes.size(); ++i) {
    const Box& b = p.boxes[i];
    const std::size_t palette = sizeof kColours / sizeof *kColours;
    const std::string c = kColours[(b.colour >= 0 ? static_cast<std::size_t>(b.colour) : i) % palette];
    const double y = top + kBoxRow * (static_cast<double>(i) + 0.5);
    o += text_shown(left - 6, y + 4, "tick", "end", b.name, shown[i]);
    std::vector<double> v;
    for (double x : b.values)
      if (std::isfinite(x) && (!p.log_values || x > 0)) v.push_back(x);
    std::sort(v.begin(), v.end());
    if (v.empty()) continue;
    auto q = [&](double f) {  // type 7
      const double h = (static_cast<double>(v.size()) - 1) * f;
      const std::size_t lo = static_cast<std::size_t>(std::floor(h));
      return v[lo] + (h - static_cast<double>(lo)) * (v[std::min(lo + 1, v.size() - 1)] - v[lo]);
    };
    const double q1 = q(0.25), q3 = q(0.75), iqr = q3 - q1;
    double wlo = q1, whi = q3;
    for (double x : v) {
      if (x >= q1 - 1.5 * iqr) wlo = std::min(wlo, x);
      if (x <= q3 + 1.5 * iqr) whi = std::max(whi, x);
    }
    o += "<g class=\"box\"><title>" + html_escape(b.tip) + "</title>";
    o += "<line x1=\"" + num(X(wlo)) + "\" y1=\"" + num(y) + "\" x2=\"" + num(X(whi)) + "\" y2=\"" + num(y) +
         "\" stroke=\"" + c + "\"/>";
    o += "<rect x=\"" + num(X(q1)) + "\" y=\"" + num(y - half) + "\" width=\"" + num(std::max(1.0, X(q3) - X(q1))) +
         "\" height=\"" + num(2 * half) + "\" fill=\"" + c + "\" fill-opacity=\"0.15\" stroke=\"" + c + "\"/>";
    if (b.has_ci)
      o += "<rect class=\"ci\" x=\"" + num(X(b.lo)) + "\" y=\"" + num(y - half * 0.45) + "\" width=\"" +
           num(std::max(1.0, X(b.hi) - X(b.lo))) + "\" height=\"" + num(half * 0.9) + "\" fill=\"" + c +
           "\" fill-opacity=\"0.55\"/>";
    o += "<line x1=\"" + num(X(b.median)) + "\" y1=\"" + num(y - half) + "\" x2=\"" + num(X(b.median)) + "\" y2=\"" +
         num(y + half) + "\" stroke=\"#000\" stroke-width=\"2\"/>";
    for (double x : v)
      if (x < wlo || x > whi)
        o += "<circle cx=\"" + num(X(x)) + "\" cy=\"" + num(y) + "\" r=\"2\" fill=\"none\" stroke=\"" + c + "\"/>";
    o += "</g>\n";
  }
  return o + "</svg>\n";
}

std::string render(const StackedBars& p) {
  const Axis ay{0, 100, false};
  const double n = static_cast<double>(std::max<std::size_t>(p.categories.size(), 1));
  const Axis ax{-0.5, n - 0.5, false};
  auto X = [&](double v) { return ax.map(v, L, W - R); };
  auto Y = [&](double v) { return ay.map(v, H - B, T); };
  std::string o = frame(p.title, p.xlabel, p.ylabel);
  o += y_ticks(ay);
  const double slot = (W - L - R) / n, half = std::min(30.0, slot * 0.35);
  for (std::size_t i = 0; i < p.categories.size(); ++i) {
    const double x = X(static_cast<double>(i));
    o += text_el(x, H - B + 16, "tick", "middle", p.categories[i], slot - 4);
    double base = 0;
    for (std::size_t k = 0; k < p.layers.size(); ++k) {
      const auto& l = p.layers[k];
      const double v =
          i < l.values.size() && std::isfinite(l.values[i]) ? std::clamp(l.values[i], 0.0, 100.0 - base) : 0;
      const std::string c = kColours[k % (sizeof kColours / sizeof *kColours)];
      o += "<rect class=\"bar\" x=\"" + num(x - half) + "\" y=\"" + num(Y(base + v)) + "\" width=\"" + num(2 * half) +
           "\" height=\"" + num(std::max(0.0, Y(base) - Y(base + v))) + "\" fill=\"" + c +
           "\" fill-opacity=\"0.7\"><title>" + html_escape(i < l.tips.size() ? l.tips[i] : l.name) +
           "</title></rect>\n";
      base += v;
    }
  }
  for (std::size_t k = 0; k < p.layers.size(); ++k) {
    const std::string c = kColours[k % (sizeof kColours / sizeof *kColours)];
    const double ly = T + 14 + 16 * static_cast<double>(k);
    o += "<rect x=\"" + num(W - R + 10) + "\" y=\"" + num(ly - 9) + "\" width=\"18\" height=\"10\" fill=\"" + c +
         "\" fill-opacity=\"0.7\"/>" + text_el(W - R + 32, ly, "legend", "start", p.layers[k].name, R - 36);
  }
  return o + "</svg>\n";
}

}  // namespace d500::svg
