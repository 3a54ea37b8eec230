#pragma once
// Small text helpers shared by every stage: shell quoting (the only way a campaign value may
// reach a shell), stable hashing for point ids, and joining.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace d500 {

// POSIX single-quote quoting: the result is one shell word whose value is exactly `s`.
std::string shell_quote(const std::string& s);

// 64-bit FNV-1a: stable across platforms and releases, which std::hash is not.
std::uint64_t fnv1a64(const std::string& s);
std::string hex64(std::uint64_t v);

std::string join(const std::vector<std::string>& parts, const std::string& sep);
// Numbers separated by spaces and/or commas ("0.85, 0.89"); nullopt when a part is not a number.
std::optional<std::vector<double>> parse_number_list(const std::string& s);
// The parts of `s` between `sep`s; an empty part at the end (after a last `sep`) is dropped.
std::vector<std::string> split(const std::string& s, char sep);

// Reads a whole file; throws d500::Error naming the file when it cannot.
std::string read_file(const std::string& path);
// Writes through a fresh temporary beside `path` (created O_CREAT|O_EXCL|O_NOFOLLOW, so never
// through a symbolic link planted there), fsync'd (unless `sync` is false: the planner syncs its
// whole directory once) and renamed into place: a reader never sees half a file, a crash never
// leaves a torn one, and a link at `path` is replaced, never written through.
void write_file_atomic(const std::string& path, const std::string& content, bool sync = true);
// Writes all of `bytes` to `fd`, again after a partial write or EINTR; false (errno set) on
// an error such as a full disk or a closed pipe.
bool write_all(int fd, std::string_view bytes);
// Opens `path` for appending (created when missing), refusing a symbolic link with an error
// naming it; the caller closes the descriptor.
int open_for_append(const std::string& path);
void append_file(const std::string& path, const std::string& text);
// syncfs(2) of the file system holding `dir`: one call for everything written there unsynced;
// throws naming `dir` when the kernel reports a failed write-back.
void sync_file_system(const std::string& dir);

std::string html_escape(const std::string& s);
// Quotes a CSV field when it holds a comma, quote or newline (RFC 4180).
std::string csv_field(const std::string& s);

// The SHA-256 of a file's bytes in hex (OpenSSL's libcrypto); throws naming the file when it
// cannot be read.
std::string sha256_file(const std::string& path);

// Formats a number with `digits` significant digits, without exponent for ordinary ranges.
std::string fmt_sig(double v, int digits = 4);
// A size in binary units with 3 significant digits: "512 KiB", "1.25 GiB".
std::string fmt_bytes(std::int64_t bytes);

std::string utc_now_iso8601();

// A signal's name: "SIGTERM"; "signal 77" for one without a name.
std::string signal_name(int sig);

// Control characters (bytes 0x00-0x1f and 0x7f: newline, carriage return, escape, ...). A path or
// value holding one must never reach a job script or a plan file: no quoting protects an
// "#SBATCH" line from a newline.
bool has_control_chars(const std::string& s);
// `s` with control characters written as \n, \r, \t or \xNN: for error messages.
std::string printable(const std::string& s);
// A value from a file, quoted for an error message: at most 80 characters of it, control
// characters escaped as printable() does, and its length said when it was cut:
// "\"aaaa...\" (1048576 characters)", in `quote` (a double quote unless told).
std::string quote_value(const std::string& s, char quote = '"');
// A size: digits (at most 15) and an optional binary unit K, M, G, T, then an optional B or b
// ("64M", "8GB"; not "8GiB"); a number without a unit is in `bare_unit_shift` (0: bytes,
// 20: MiB). -1 for anything else or for a size of 2^62 bytes or more: never an overflow.
std::int64_t parse_size(const std::string& text, int bare_unit_shift);

// A run of 1 to `most` digits at `at` (advanced past it) as a number; -1 when there is none or
// it is longer: nothing read with it can overflow.
long long digits_at(const std::string& text, std::size_t& at, std::size_t most);
// Saturating 64-bit arithmetic for estimates (memory, node-hours): a result beyond int64 is
// INT64_MAX, which every check then refuses, never a wrapped negative number.
std::int64_t add_sat(std::int64_t a, std::int64_t b);
std::int64_t mul_sat(std::int64_t a, std::int64_t b);

// Columns a UTF-8 string takes in a terminal (one a code point: d500's text has no wide characters).
std::size_t text_columns(const std::string& s);
// `text` wrapped at spaces to `width` columns (0: not wrapped): each paragraph (split at '\n')
// starts with `indent`, its continuation lines with `indent` and two spaces; every line ends in
// '\n'. A word wider than the width stands alone on its line, whole.
std::string wrap_words(const std::string& text, std::size_t width, const std::string& indent = "");

// Throws d500::Error "<what> \"...\" contains a control character (...)" when `s` holds one.
void refuse_control_chars(const std::string& s, const std::string& what);

}  // namespace d500
