#include "plan/sbatch.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include "common/error.hpp"
#include "common/text.hpp"

using namespace d500;

namespace {
std::string refusal(const std::string& script) {
  try {
    parse_sbatch_lines(script, "t.sh");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Sbatch, ReadsTheLinesAsSbatchDoesUpToTheFirstCommand) {
  const std::string script =
      "#!/bin/bash\n# d500: launcher=slurm\n#SBATCH --job-name=" + shell_quote("it's.job-0") +
      "\n#SBATCH -N 2 --ntasks-per-node=4\n#SBATCH -c8\n\n#SBATCH --hint=nomultithread  # no SMT\n"
      "#SBATCH --mem=4G\n#SBATCH --exclusive\n#SBATCH --partition 'debug'\n"
      "#SBATCH --partition=normal\nset -e\n#SBATCH --qos=never-read\n";
  const SbatchOptions o = parse_sbatch_lines(script, "t.sh");
  ASSERT_NE(o.find("job-name"), nullptr);
  EXPECT_EQ(o.find("job-name")->value, "it's.job-0");
  EXPECT_EQ(o.find("nodes")->value, "2");
  EXPECT_EQ(o.find("ntasks-per-node")->value, "4");
  EXPECT_EQ(o.find("cpus-per-task")->value, "8");
  EXPECT_EQ(o.find("cpus-per-task")->line, 5);
  EXPECT_EQ(o.find("hint")->value, "nomultithread");
  EXPECT_EQ(o.find("exclusive")->value, "");
  EXPECT_EQ(o.find("partition")->value, "normal") << "a later line wins, as in sbatch";
  EXPECT_EQ(o.find("qos"), nullptr) << "options after the first command are not options";
  EXPECT_EQ(sbatch_size_mib(o.find("mem")->value), 4096);
  EXPECT_EQ(sbatch_size_mib("500"), 500);
  EXPECT_EQ(sbatch_size_mib("2K"), 1);
  EXPECT_EQ(sbatch_size_mib("1T"), 1048576);
  EXPECT_EQ(sbatch_size_mib("4GB"), -1);
}

TEST(Sbatch, WhatDoesNotReachTheJobIsRefusedWithItsLine) {
  std::string e = refusal("#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --mail-type=END\n");
  EXPECT_NE(e.find("t.sh:3"), std::string::npos) << e;
  EXPECT_NE(e.find("does not carry this option"), std::string::npos) << e;
  EXPECT_NE(e.find("cpus-per-task"), std::string::npos) << "names what it carries: " << e;
  e = refusal("#SBATCH --cpus-per-tsk=2\n");
  EXPECT_NE(e.find("did you mean 'cpus-per-task'"), std::string::npos) << e;
  e = refusal("#SBATCH --array=0-3\n");
  EXPECT_NE(e.find("d500 makes arrays"), std::string::npos) << e;
  e = refusal("#SBATCH --mem=lots\n");
  EXPECT_NE(e.find("not a size"), std::string::npos) << e;
  e = refusal("#SBATCH --hint=compute_bound\n");
  EXPECT_NE(e.find("nomultithread or multithread"), std::string::npos) << e;
  e = refusal("#SBATCH --time\n");
  EXPECT_NE(e.find("--time needs a value"), std::string::npos) << e;
  e = refusal("#SBATCH --partition='debug\n");
  EXPECT_NE(e.find("unclosed"), std::string::npos) << e;
}

TEST(Sbatch, D500TemplatesCarryEveryLine) {
  for (const char* t : {"slurm", "daint"}) {
    const std::string text = read_file(std::string(D500_SOURCE_DIR) + "/templates/" + t + ".sh.in");
    EXPECT_NO_THROW(parse_sbatch_lines(text, t)) << t;
  }
}

// --signal as sbatch reads it: [B:]SIGNAL[@SECONDS], names with or without SIG, or numbers.
TEST(Sbatch, SignalBeforeTheLimitIsCarriedAsSbatchReadsIt) {
  auto sig = parse_sbatch_signal("TERM@120");
  ASSERT_TRUE(sig);
  EXPECT_EQ(sig->number, SIGTERM);
  EXPECT_EQ(sig->seconds, 120);
  EXPECT_FALSE(sig->batch_only);
  sig = parse_sbatch_signal("B:SIGUSR1");
  ASSERT_TRUE(sig);
  EXPECT_EQ(sig->number, SIGUSR1);
  EXPECT_EQ(sig->seconds, 60) << "sbatch's default";
  EXPECT_TRUE(sig->batch_only);
  sig = parse_sbatch_signal("10@65535");
  ASSERT_TRUE(sig);
  EXPECT_EQ(sig->number, 10);
  for (const char* bad : {"", "R:TERM@60", "TERM@", "TERM@65536", "TERM@-1", "NOPE@60", "0@60", "65@60", "TERM@12x"})
    EXPECT_FALSE(parse_sbatch_signal(bad)) << bad;
  EXPECT_EQ(parse_sbatch_lines("#!/bin/bash\n#SBATCH --signal=TERM@120\n", "t.sh").find("signal")->value, "TERM@120");
  const std::string e = refusal("#!/bin/bash\n#SBATCH --signal=R:TERM@60\n");
  EXPECT_NE(e.find("t.sh:2:1"), std::string::npos) << e;
  EXPECT_NE(e.find("[B:]SIGNAL[@SECONDS]"), std::string::npos) << e;
}
