#include "plan/template.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"

using namespace d500;

TEST(Template, EveryValueIsShellQuotedAndRunsAsData) {
  const std::string marker = "/tmp/d500-template-test-" + std::to_string(getpid());
  const std::string hostile = "x'; touch " + marker + "; echo '$(id)` \"\\";
  std::string script = render_template("printf '%s' {{ value }}\n", "t.sh.in", {{"value", hostile}});
  std::FILE* p = popen(("bash -c " + shell_quote(script)).c_str(), "r");
  std::string out;
  char buf[256];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  EXPECT_EQ(out, hostile);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(Template, AControlCharacterInAValueIsRefusedNamingThePlaceholder) {
  // A newline would end the "#SBATCH" line and start a command that no quoting holds back.
  for (const std::string& v : std::vector<std::string>{"/runs/x\n#SBATCH --wrap=touch /tmp/pwned", "a\rb", std::string("a\0b", 3), "\x1b[2J"}) {
    try {
      render_template("#!/bin/bash\n#SBATCH --output={{log}}\n", "t.sh.in", {{"log", v}});
      ADD_FAILURE() << "not refused: " << printable(v);
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("t.sh.in:2:18"), std::string::npos) << m;
      EXPECT_NE(m.find("{{log}}"), std::string::npos) << m;
      EXPECT_NE(m.find("control character"), std::string::npos) << m;
    }
  }
}

TEST(Template, UnknownPlaceholderNamesTheLine) {
  try {
    render_template("#!/bin/bash\n\necho {{job_idd}}\n", "t.sh.in", {{"job_id", "j"}});
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("t.sh.in:3:6"), std::string::npos) << m;
    EXPECT_NE(m.find("did you mean 'job_id'"), std::string::npos) << m;
  }
  EXPECT_THROW(render_template("echo {{job_id\n}}", "t.sh.in", {{"job_id", "j"}}), Error);
}

TEST(Template, OptionalPlaceholdersDropTheirLineWhenEmpty) {
  std::string t = "#SBATCH --partition={{?partition}}\n#SBATCH --account={{?account}}\necho {{x}}\n";
  EXPECT_EQ(render_template(t, "t", {{"partition", "debug"}, {"account", ""}, {"x", "1"}}),
            "#SBATCH --partition='debug'\necho '1'\n");
}

TEST(Template, TextWithoutPlaceholdersIsUnchanged) {
  EXPECT_EQ(render_template("a { b } $x\n", "t", {}), "a { b } $x\n");
}
