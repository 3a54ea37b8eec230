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
  for (const std::string& v : std::vector<std::string>{"/runs/x\n#SBATCH --wrap=touch /tmp/pwned", "a\rb",
                                                       std::string("a\0b", 3), "\x1b[2J"}) {
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

// Issue 52: single-quoting protects a value only where the shell reads a word. Inside double
// quotes a value "r$(touch x)" became "'r$(touch x)'" and ran; such templates are refused at
// their placeholder, and the contexts that are safe stay allowed.
TEST(Template, APlaceholderWhereQuotingDoesNotProtectIsRefusedWithItsPlace) {
  const std::map<std::string, std::string> vars{{"run_dir", "r$(touch x)"}, {"spec", "s"}};
  auto error_of = [&](const std::string& text) {
    try {
      render_template(text, "t.sh.in", vars);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string e = error_of("#!/bin/bash\ncd \"{{run_dir}}\"\n");
  EXPECT_NE(e.find("t.sh.in:2:5: placeholder {{run_dir}} inside double quotes"), std::string::npos) << e;
  e = error_of("x=`ls {{run_dir}}`\n");
  EXPECT_NE(e.find("t.sh.in:1:7: placeholder {{run_dir}} inside backquotes"), std::string::npos) << e;
  e = error_of("cat <<EOF\ncd {{run_dir}}\nEOF\n");
  EXPECT_NE(e.find("t.sh.in:2:4: placeholder {{run_dir}} inside a here-document"), std::string::npos) << e;
  e = error_of("echo \"a \\\" b\" \"c {{spec}}\"\n");  // an escaped quote does not end the string
  EXPECT_NE(e.find("t.sh.in:1:18: placeholder {{spec}} inside double quotes"), std::string::npos) << e;

  // Safe: a word of its own, after an option, beside a quoted string, in a comment (#SBATCH),
  // in single quotes (the value's own quotes close and reopen them), in a quoted here-document,
  // and after a here-document has ended.
  const std::string ok =
      "#!/bin/bash\n#SBATCH --chdir={{run_dir}}\ncd {{run_dir}} && echo \"$x\"{{spec}}\n"
      "echo 'a'{{spec}}'b' '{{spec}}'\ncat <<'EOF'\n{{spec}}\nEOF\ncat <<-END\n\tplain\n\tEND\n"
      "echo {{spec}} # \"{{spec}}\nread -ra m <<< {{spec}}\necho {{spec}}\n";
  EXPECT_EQ(error_of(ok), "");
  EXPECT_EQ(render_template("cd {{run_dir}}\n", "t", vars), "cd 'r$(touch x)'\n");
}
