#include "plan/sbatch.hpp"

#include <csignal>
#include <map>
#include <sstream>

#include "campaign/campaign.hpp"
#include "common/error.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

// Long name -> whether it takes a value (a flag may still be given one: --exclusive=user).
const std::map<std::string, bool>& carried() {
  static const std::map<std::string, bool> m = {
      {"job-name", true},      {"nodes", true},         {"ntasks", true},        {"ntasks-per-node", true},
      {"cpus-per-task", true}, {"time", true},          {"partition", true},     {"account", true},
      {"qos", true},           {"constraint", true},    {"gres", true},          {"output", true},
      {"error", true},         {"open-mode", true},     {"hint", true},          {"mem", true},
      {"mem-per-cpu", true},   {"exclude", true},       {"nodelist", true},      {"reservation", true},
      {"gpus", true},          {"gpus-per-node", true}, {"gpus-per-task", true}, {"exclusive", false},
      {"requeue", false},      {"no-requeue", false},   {"signal", true}};
  return m;
}

// Options d500 sets itself for every submission: a template must leave them out.
const std::map<std::string, std::string>& owned() {
  static const std::map<std::string, std::string> m = {
      {"array", "d500 makes arrays of a campaign's jobs itself ([slurm] array, throttle)"},
      {"dependency", "d500 chains its submissions itself ([slurm] throttle, analysis_job)"},
      {"comment", "d500 tags every job with its run in the comment, to find it again"},
      {"chdir", "d500 runs every job in the run directory"},
      {"export", "d500 passes the submitting environment, as sbatch does by default"}};
  return m;
}

const std::map<char, std::string>& short_names() {
  static const std::map<char, std::string> m = {
      {'J', "job-name"},   {'N', "nodes"},   {'n', "ntasks"},   {'c', "cpus-per-task"}, {'t', "time"},
      {'p', "partition"},  {'A', "account"}, {'q', "qos"},      {'C', "constraint"},    {'o', "output"},
      {'e', "error"},      {'x', "exclude"}, {'w', "nodelist"}, {'G', "gpus"},          {'a', "array"},
      {'d', "dependency"}, {'D', "chdir"}};
  return m;
}

// The words of an #SBATCH line as sbatch splits them: at blanks outside quotes, quotes removed,
// so that d500's shell-quoted values ('debug', 'a'\''b') read as they do in sbatch; a word
// starting with '#' ends the options.
std::vector<std::string> sbatch_words(const std::string& text, const Location& at) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t') {
      if (in_word) out.push_back(word), word.clear(), in_word = false;
      continue;
    }
    if (!in_word && c == '#') break;
    in_word = true;
    if (c == '\'' || c == '"') {
      const auto close = text.find(c, i + 1);
      if (close == std::string::npos) throw Error(at, std::string("#SBATCH: unclosed ") + c + " quote");
      word += text.substr(i + 1, close - i - 1);
      i = close;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
    } else {
      word += c;
    }
  }
  if (in_word) out.push_back(word);
  return out;
}

}  // namespace

const std::vector<std::string>& sbatch_options_carried() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [k, _] : carried()) v.push_back(k);
    return v;
  }();
  return names;
}

const SbatchOption* SbatchOptions::find(const std::string& name) const {
  const SbatchOption* hit = nullptr;
  for (const auto& o : options)
    if (o.name == name) hit = &o;
  return hit;
}

std::optional<SbatchSignal> parse_sbatch_signal(const std::string& value) {
  SbatchSignal s;
  std::string v = value;
  if (v.rfind("B:", 0) == 0) s.batch_only = true, v = v.substr(2);
  std::size_t at = v.find('@');
  std::string name = v.substr(0, at);
  if (at != std::string::npos) {
    std::size_t pos = at + 1;
    const long long secs = digits_at(v, pos, 5);
    if (secs < 0 || pos != v.size() || secs > 65535) return std::nullopt;
    s.seconds = static_cast<int>(secs);
  }
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  static const std::map<std::string, int> names = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
      {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"ALRM", SIGALRM}, {"URG", SIGURG}};
  if (auto it = names.find(name); it != names.end())
    s.number = it->second;
  else {
    std::size_t pos = 0;
    const long long n = digits_at(name, pos, 2);
    if (n <= 0 || n >= 65 || pos != name.size()) return std::nullopt;
    s.number = static_cast<int>(n);
  }
  return s;
}

long long sbatch_size_mib(const std::string& text) {
  // The campaign's reading of a Slurm size (mem_per_node), less the "B" it also allows ("4GB"),
  // which sbatch refuses; kibibytes round up to a whole MiB, as sbatch's do.
  if (!text.empty() && (text.back() == 'B' || text.back() == 'b')) return -1;
  const std::int64_t bytes = parse_memory_size(text);
  return bytes < 0 ? -1 : (bytes + (1 << 20) - 1) >> 20;
}

SbatchOptions parse_sbatch_lines(const std::string& script, const std::string& path) {
  SbatchOptions out;
  std::istringstream in(script);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const auto first = line.find_first_not_of(" \t"), last = line.find_last_not_of(" \t\r");
    const std::string t = first == std::string::npos ? "" : line.substr(first, last - first + 1);
    if (t.empty() || (t[0] == '#' && t.rfind("#SBATCH", 0) != 0)) continue;
    if (t[0] != '#') break;  // sbatch reads options only before the first command
    const Location at{path, line_no, 1};
    const std::vector<std::string> args = sbatch_words(t.substr(7), at);
    for (std::size_t i = 0; i < args.size(); ++i) {
      std::string a = args[i], name, value;
      bool has_value = false;
      if (a.rfind("--", 0) == 0) {
        const auto eq = a.find('=');
        name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
        if (eq != std::string::npos) value = a.substr(eq + 1), has_value = true;
      } else if (a.size() >= 2 && a[0] == '-' && short_names().count(a[1])) {
        name = short_names().at(a[1]);
        if (a.size() > 2) value = a.substr(a[2] == '=' ? 3 : 2), has_value = true;
      } else {
        throw Error(at,
                    "#SBATCH: cannot read \"" + a + "\" as an sbatch option (--name=value, --name value or -X value)");
      }
      if (owned().count(name))
        throw Error(at, "#SBATCH --" + name + ": " + owned().at(name) + "; leave it out of the template");
      auto it = carried().find(name);
      if (it == carried().end())
        throw Error(at, "#SBATCH --" + name +
                            ": d500 submits through libslurm and does not carry this option into the job"
                            " description" +
                            did_you_mean(name, sbatch_options_carried()) +
                            " (it carries: " + join(sbatch_options_carried(), ", ") + ")");
      if (it->second && !has_value) {
        if (i + 1 >= args.size()) throw Error(at, "#SBATCH --" + name + " needs a value");
        value = args[++i];
      }
      if (value.find("{{") != std::string::npos) {
        // A template's placeholder: its value is checked in the rendered script.
      } else if (name == "mem" || name == "mem-per-cpu") {
        if (sbatch_size_mib(value) < 0)
          throw Error(
              at, "#SBATCH --" + name + "=" + value + ": not a size (a whole number with K, M, G or T; no suffix: M)");
      } else if (name == "hint" && value != "nomultithread" && value != "multithread") {
        throw Error(at, "#SBATCH --hint=" + value + ": d500 carries nomultithread or multithread");
      } else if (name == "open-mode" && value != "append" && value != "truncate") {
        throw Error(at, "#SBATCH --open-mode=" + value + ": append or truncate");
      } else if (name == "signal" && !parse_sbatch_signal(value)) {
        throw Error(at, "#SBATCH --signal=" + value +
                            ": d500 carries [B:]SIGNAL[@SECONDS] (e.g. TERM@120, B:USR1@300; "
                            "SECONDS up to 65535)");
      } else if ((name == "exclusive") && has_value) {
        throw Error(at, "#SBATCH --exclusive=" + value + ": d500 carries --exclusive alone (whole nodes)");
      }
      out.options.push_back({name, value, line_no});
    }
  }
  return out;
}

}  // namespace d500
