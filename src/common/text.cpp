#include "common/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <ctime>
#include <fstream>
#include <sstream>

#include "common/error.hpp"

namespace d500 {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::uint64_t fnv1a64(const std::string& s) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::optional<std::vector<double>> parse_number_list(const std::string& s) {
  std::vector<double> out;
  std::string t = s;
  std::replace(t.begin(), t.end(), ',', ' ');
  std::istringstream in(t);
  for (std::string part; in >> part;) {
    char* end = nullptr;
    const double v = std::strtod(part.c_str(), &end);
    if (end == part.c_str() || *end != '\0') return std::nullopt;
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (std::size_t next; (next = s.find(sep, at)) != std::string::npos; at = next + 1) out.push_back(s.substr(at, next - at));
  if (at < s.size()) out.push_back(s.substr(at));
  return out;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_atomic(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path + ": cannot write: " + std::strerror(errno));
    out << content;
    out.close();  // a full disk may show only when the last buffer is written
    if (!out) {
      const int e = errno;
      std::remove(tmp.c_str());  // a failed write leaves no temporary behind
      throw Error(path + ": write failed (disk full?): " + std::strerror(e));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    throw Error(path + ": cannot rename into place: " + std::strerror(e));
  }
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string fmt_sig(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  double a = std::fabs(v);
  if (a != 0 && (a < 1e-3 || a >= 1e9)) std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
  else {
    // The digits before the first significant one count for nothing: 0.0129 to 3 is 0.0129.
    const int magnitude = a == 0 ? 0 : static_cast<int>(std::floor(std::log10(a)));
    const int decimals = std::max(0, digits - 1 - magnitude);
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  }
  return buf;
}

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string fmt_bytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double v = b;
  while (u < 5 && v >= 1024.0) v /= 1024.0, ++u;
  return fmt_sig(v, 3) + " " + units[u];
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

bool has_control_chars(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out;
}

void refuse_control_chars(const std::string& s, const std::string& what) {
  if (!has_control_chars(s)) return;
  throw Error(what + " \"" + printable(s) + "\" contains a control character (shown escaped); a path or value that "
              "reaches a job script or plan file must not, since no quoting protects an #SBATCH line from a newline: "
              "rename it");
}

}  // namespace d500
