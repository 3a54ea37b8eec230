#include "store/liveness.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace d500 {

namespace {

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? "unknown" : id;
}

std::string pid_namespace() {
  char buf[128] = {0};
  const ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
  if (n <= 0) return "unknown";
  std::string s(buf, static_cast<std::size_t>(n));
  for (char& c : s)
    if (c == ' ') c = '_';
  return s;
}

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "unknown";
  std::string s = buf;
  for (char& c : s)
    if (c == ' ') c = '_';
  return s;
}

// key=value fields separated by spaces.
std::map<std::string, std::string> fields(const std::string& identity) {
  std::map<std::string, std::string> out;
  std::istringstream in(identity);
  std::string word;
  while (in >> word)
    if (const auto eq = word.find('='); eq != std::string::npos) out[word.substr(0, eq)] = word.substr(eq + 1);
  return out;
}

}  // namespace

std::string writer_identity(long pid) {
  return "boot=" + boot_id() + " pidns=" + pid_namespace() + " host=" + host_name() + " pid=" + std::to_string(pid);
}

std::string writer_identity() { return writer_identity(static_cast<long>(getpid())); }

bool writer_gone(const std::string& identity) {
  auto f = fields(identity);
  const std::string boot = boot_id(), ns = pid_namespace();
  if (boot == "unknown" || ns == "unknown" || f["boot"] != boot || f["pidns"] != ns || f["host"] != host_name())
    return false;
  char* end = nullptr;
  errno = 0;
  const long pid = std::strtol(f["pid"].c_str(), &end, 10);
  if (errno != 0 || end == f["pid"].c_str() || *end != '\0' || pid <= 0) return false;
  return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace d500
