#include "common/text.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "common/error.hpp"

namespace d500 {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
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
  for (std::size_t next; (next = s.find(sep, at)) != std::string::npos; at = next + 1)
    out.push_back(s.substr(at, next - at));
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

namespace {

// A name for a temporary beside `path` that no other writer picks: pid, time and a counter.
std::string temporary_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  const auto t = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
  return path + "." +
         hex64(
             fnv1a64(std::to_string(::getpid()) + ":" + std::to_string(t) + ":" + std::to_string(counter.fetch_add(1))))
             .substr(0, 8) +
         ".tmp";
}

}  // namespace

bool write_all(int fd, std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<std::size_t>(w);
  }
  return true;
}

void write_file_atomic(const std::string& path, const std::string& content, bool sync) {
  // O_CREAT | O_EXCL: a fresh file, never one that is there already, and never through a
  // symbolic link planted at the temporary's name (O_EXCL does not follow one; O_NOFOLLOW says
  // so twice). The rename replaces a link at `path` itself, never the file it points to.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = temporary_name(path);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) throw Error(path + ": cannot write: " + std::strerror(errno));
  // A full disk may show only at the last write or at fsync.
  const bool ok = write_all(fd, content) && (!sync || ::fsync(fd) == 0);
  const int e = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());  // a failed write leaves no temporary behind
    throw Error(path + ": write failed (disk full?): " + std::strerror(e));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int re = errno;
    ::unlink(tmp.c_str());
    throw Error(path + ": cannot rename into place: " + std::strerror(re));
  }
}

int open_for_append(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd >= 0) return fd;
  if (errno == ELOOP)
    throw Error(path + ": is a symbolic link; d500 appends to no file through a link (remove the link)");
  throw Error(path + ": cannot open for appending: " + std::strerror(errno));
}

void append_file(const std::string& path, const std::string& text) {
  const int fd = open_for_append(path);
  const bool ok = write_all(fd, text);
  const int e = errno;
  ::close(fd);
  if (!ok) throw Error(path + ": cannot append (disk full?): " + std::strerror(e));
}

void sync_file_system(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(dir + ": cannot open to sync: " + std::strerror(errno));
  const bool ok = ::syncfs(fd) == 0;
  const int e = errno;
  ::close(fd);
  if (!ok) throw Error(dir + ": writing it to disk failed (disk full?): " + std::strerror(e));
}

std::string sha256_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot read to checksum: " + std::strerror(errno));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1;
  char buf[1 << 16];
  for (ssize_t n; ok && (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0 && EVP_DigestUpdate(ctx, buf, static_cast<std::size_t>(n)) == 1;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ok = ok && EVP_DigestFinal_ex(ctx, md, &len) == 1;
  EVP_MD_CTX_free(ctx);
  ::close(fd);
  if (!ok) throw Error(path + ": cannot checksum (SHA-256)");
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", md[i]);
    hex += b;
  }
  return hex;
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
  if (a != 0 && (a < 1e-3 || a >= 1e9))
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
  else {
    // The digits before the first significant one count for nothing: 0.0129 to 3 is 0.0129. The
    // magnitude is the rounded value's: 9.9999 to 3 is 10.0, not 10.00.
    int magnitude = 0;
    if (a != 0) {
      std::snprintf(buf, sizeof buf, "%.*e", digits - 1, a);
      magnitude = std::atoi(std::strchr(buf, 'e') + 1);
    }
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
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else
      out += static_cast<char>(c);
  }
  return out;
}

std::string quote_value(const std::string& s, char quote) {
  constexpr std::size_t kShown = 80;
  if (s.size() <= kShown) return quote + printable(s) + quote;
  return quote + printable(s.substr(0, kShown)) + "..." + quote + " (" + std::to_string(s.size()) + " characters)";
}

// A run of 1 to `most` digits at `at` (advanced past it) as a number; -1 when there is none or
// it is longer: no value read here can overflow, and nothing recurses (std::regex did, and a
// 30,000-digit duration overflowed its stack).
long long digits_at(const std::string& text, std::size_t& at, std::size_t most) {
  const std::size_t from = at;
  long long v = 0;
  while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
    if (at - from == most) return -1;
    v = v * 10 + (text[at++] - '0');
  }
  return at == from ? -1 : v;
}

std::int64_t parse_size(const std::string& text, int bare_unit_shift) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 15) return -1;  // 15 digits: < 2^50, so no overflow below
  std::int64_t v = 0;
  for (std::size_t i = 0; i < digits; ++i) v = v * 10 + (text[i] - '0');
  std::string rest = text.substr(digits);
  if (!rest.empty() && (rest.back() == 'B' || rest.back() == 'b') && rest.size() <= 2) rest.pop_back();
  int shift = bare_unit_shift;
  if (rest.size() == 1) {
    switch (rest[0]) {
      case 'K':
      case 'k': shift = 10; break;
      case 'M':
      case 'm': shift = 20; break;
      case 'G':
      case 'g': shift = 30; break;
      case 'T':
      case 't': shift = 40; break;
      default: return -1;
    }
  } else if (!rest.empty()) {
    return -1;
  }
  if (v >= (std::int64_t{1} << (62 - shift))) return -1;  // 4 EiB and beyond: no machine has it
  return v << shift;
}

std::int64_t add_sat(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

std::int64_t mul_sat(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return (a > 0) == (b > 0) ? INT64_MAX : INT64_MIN;
  return r;
}

void refuse_control_chars(const std::string& s, const std::string& what) {
  if (!has_control_chars(s)) return;
  throw Error(what + " \"" + printable(s) +
              "\" contains a control character (shown escaped); a path or value that "
              "reaches a job script or plan file must not, since no quoting protects an #SBATCH line from a newline: "
              "rename it");
}

std::size_t text_columns(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string wrap_words(const std::string& text, std::size_t width, const std::string& indent) {
  std::string o;
  for (const auto& para : split(text, '\n')) {
    if (width == 0) {
      o += indent + para + "\n";
      continue;
    }
    std::string line = indent;
    std::size_t len = indent.size();
    for (const auto& word : split(para, ' ')) {
      if (word.empty()) continue;
      if (len > indent.size() && len + 1 + text_columns(word) > width) {
        o += line + "\n";
        line = indent + "  ";
        len = line.size();
      }
      if (len > indent.size() && line.back() != ' ') line += ' ', ++len;
      line += word;
      len += text_columns(word);
    }
    o += line + "\n";
  }
  return o;
}

}  // namespace d500
