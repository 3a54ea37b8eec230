#include "svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "common/text.hpp"

namespace d500::svg {

namespace {
const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f"};
constexpr double W = 560, H = 340, L = 70, R = 150, T = 30, B = 45;

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
      for (const auto& mantissas : {std::vector<double>{1, 2, 5}, std::vector<double>{1, 1.2, 1.5, 2, 3, 4, 5, 6, 7, 8, 9}}) {
        t.clear();
        for (double e = std::floor(std::log10(lo)); e <= std::ceil(std::log10(hi)); ++e)
          for (double m : mantissas) {
            double v = m * std::pow(10, e);
            if (v >= lo * 0.999 && v <= hi * 1.001) t.push_back(v);
          }
        if (t.size() >= 3) break;
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

std::string tick_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}
}  // namespace

std::string render(const Plot& p) {
  std::vector<double> xs, ys;
  for (const auto& s : p.series) {
    xs.insert(xs.end(), s.x.begin(), s.x.end());
    ys.insert(ys.end(), s.y.begin(), s.y.end());
    ys.insert(ys.end(), s.lo.begin(), s.lo.end());
    ys.insert(ys.end(), s.hi.begin(), s.hi.end());
  }
  Axis ax = make_axis(xs, p.logx), ay = make_axis(ys, p.logy);
  auto X = [&](double v) { return ax.map(v, L, W - R); };
  auto Y = [&](double v) { return ay.map(v, H - B, T); };
  std::string o = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) + "\" height=\"" + num(H) +
                  "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o += "<text x=\"8\" y=\"18\" font-size=\"12\">" + html_escape(p.title) + "</text>\n";
  o += "<rect x=\"" + num(L) + "\" y=\"" + num(T) + "\" width=\"" + num(W - L - R) + "\" height=\"" + num(H - T - B) +
       "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (double t : ax.ticks())
    o += "<line x1=\"" + num(X(t)) + "\" y1=\"" + num(H - B) + "\" x2=\"" + num(X(t)) + "\" y2=\"" + num(H - B + 4) +
         "\" stroke=\"#444\"/><text x=\"" + num(X(t)) + "\" y=\"" + num(H - B + 16) + "\" text-anchor=\"middle\">" +
         tick_text(t) + "</text>\n";
  for (double t : ay.ticks())
    o += "<line x1=\"" + num(L - 4) + "\" y1=\"" + num(Y(t)) + "\" x2=\"" + num(W - R) + "\" y2=\"" + num(Y(t)) +
         "\" stroke=\"#ddd\"/><text x=\"" + num(L - 6) + "\" y=\"" + num(Y(t) + 4) + "\" text-anchor=\"end\">" +
         tick_text(t) + "</text>\n";
  o += "<text x=\"" + num((L + W - R) / 2) + "\" y=\"" + num(H - 8) + "\" text-anchor=\"middle\">" + html_escape(p.xlabel) + "</text>\n";
  o += "<text transform=\"translate(14," + num((T + H - B) / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
       html_escape(p.ylabel) + "</text>\n";
  for (std::size_t k = 0; k < p.series.size(); ++k) {
    const auto& s = p.series[k];
    const std::string c = kColours[k % (sizeof kColours / sizeof *kColours)];
    std::string pts;
    for (std::size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.y[i]) && (!p.logy || s.y[i] > 0)) pts += num(X(s.x[i])) + "," + num(Y(s.y[i])) + " ";
    o += "<polyline fill=\"none\" stroke=\"" + c + "\" stroke-width=\"1.5\"" +
         (s.dashed ? " stroke-dasharray=\"5,4\"" : "") + " points=\"" + pts + "\"/>\n";
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      if (i < s.lo.size() && std::isfinite(s.lo[i]) && std::isfinite(s.hi[i]))
        o += "<line x1=\"" + num(X(s.x[i])) + "\" y1=\"" + num(Y(s.lo[i])) + "\" x2=\"" + num(X(s.x[i])) + "\" y2=\"" +
             num(Y(s.hi[i])) + "\" stroke=\"" + c + "\"/>\n";
      if (s.markers) o += "<circle cx=\"" + num(X(s.x[i])) + "\" cy=\"" + num(Y(s.y[i])) + "\" r=\"3\" fill=\"" + c + "\"/>\n";
    }
    const double ly = T + 14 + 16 * static_cast<double>(k);
    o += "<line x1=\"" + num(W - R + 10) + "\" y1=\"" + num(ly - 4) + "\" x2=\"" + num(W - R + 28) + "\" y2=\"" + num(ly - 4) +
         "\" stroke=\"" + c + "\" stroke-width=\"2\"" + (s.dashed ? " stroke-dasharray=\"5,4\"" : "") + "/><text x=\"" +
         num(W - R + 32) + "\" y=\"" + num(ly) + "\">" + html_escape(s.name) + "</text>\n";
  }
  return o + "</svg>\n";
}

}  // namespace d500::svg
