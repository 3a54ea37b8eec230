#pragma once
// The #SBATCH lines of a job script, read as `sbatch` reads them: every option up to the first
// line that is neither blank nor a comment. `d500 submit` hands Slurm a job description through
// libslurm, not the script to sbatch, so the description must say everything those lines say;
// an option d500 does not carry over is refused when the plan is made, naming the template's
// line, instead of being dropped at submission.
#include <optional>
#include <string>
#include <vector>

namespace d500 {

struct SbatchOption {
  std::string name;   // the long name: "cpus-per-task" (from -c too)
  std::string value;  // "" for a flag (--exclusive)
  int line = 0;       // in the script
};

struct SbatchOptions {
  std::vector<SbatchOption> options;
  // The last occurrence of `name` (sbatch lets a later line win), or nullptr.
  const SbatchOption* find(const std::string& name) const;
};

// Throws an Error at `path`:line for an option d500 does not carry, one without the value it
// needs, or a value it cannot read (a --mem that is not a size, an unknown --hint). A value
// holding a template's placeholder ({{...}}) is left to the rendered script's reading.
SbatchOptions parse_sbatch_lines(const std::string& script, const std::string& path);

// The long options d500 carries into a job description, for messages and docs/slurm.md.
const std::vector<std::string>& sbatch_options_carried();

// sbatch's --signal=[B:]SIG[@SECONDS]: the signal (a number, or a name with or without SIG: TERM,
// USR1, ...), how long before the time limit (sbatch's default: 60 s), and whether only the batch
// shell gets it (B:). nullopt for anything else (R:, a time over 65535 s).
struct SbatchSignal {
  int number = 0, seconds = 60;
  bool batch_only = false;
};
std::optional<SbatchSignal> parse_sbatch_signal(const std::string& value);

// "4G" -> 4096, "500" -> 500, "2T" -> 2097152: sbatch's --mem sizes in MiB (no suffix: MiB).
long long sbatch_size_mib(const std::string& text);

}  // namespace d500
