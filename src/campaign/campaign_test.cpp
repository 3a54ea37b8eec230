#include "campaign/campaign.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

using namespace d500;

namespace {
// The error message of parsing `text`, or "" when it parses.
std::string error_of(const std::string& text) {
  try {
    parse_campaign_text(text, "c.toml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Campaign, ParsesSettingsAxesZipAndExclude) {
  Campaign c = parse_campaign_text(R"(
[campaign]
name = "study-1"
repetitions = 30
warmups = 4
points_per_job = 5

[fixed]
seed = 7

[axes]
workload = ["gemm"]
backend = ["reference", "blas"]
n = [64, 128]
m = [32, 64]

[[zip]]
axes = ["m", "n"]

[[exclude]]
backend = "reference"
n = [128]
)",
                                   "c.toml");
  EXPECT_EQ(c.name, "study-1");
  EXPECT_EQ(c.repetitions, 30);
  EXPECT_EQ(c.warmups, 4);
  EXPECT_EQ(c.points_per_job, 5);
  EXPECT_EQ(c.template_name, "local");
  ASSERT_EQ(c.fixed.size(), 1u);
  EXPECT_EQ(std::get<std::int64_t>(c.fixed[0].values[0].value), 7);
  ASSERT_EQ(c.axes.size(), 4u);
  ASSERT_EQ(c.zips.size(), 1u);
  EXPECT_EQ(c.zips[0].axes, (std::vector<std::string>{"m", "n"}));
  ASSERT_EQ(c.excludes.size(), 1u);
  EXPECT_EQ(c.excludes[0].match.size(), 2u);
  EXPECT_EQ(c.hash.size(), 16u);
}

TEST(Campaign, SyntaxErrorNamesFileLineAndColumn) {
  std::string e = error_of("[campaign]\nname = \"x\"\nrepetitions = = 3\n");
  EXPECT_NE(e.find("c.toml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("TOML syntax error"), std::string::npos) << e;
}

TEST(Campaign, UnknownKeySuggestsTheNearestValidKey) {
  std::string e = error_of("[campaign]\nname = \"x\"\nrepetitons = 3\n");
  EXPECT_NE(e.find("c.toml:3:1"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'repetitons'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'repetitions'"), std::string::npos) << e;
  e = error_of("[campaign]\nname = \"x\"\n[axis]\nn = [1]\n");
  EXPECT_NE(e.find("did you mean 'axes'"), std::string::npos) << e;
}

TEST(Campaign, WrongTypeIsAnError) {
  std::string e = error_of("[campaign]\nname = \"x\"\nrepetitions = \"ten\"\n");
  EXPECT_NE(e.find("c.toml:3:15"), std::string::npos) << e;
  EXPECT_NE(e.find("valid: an integer 1 to 1000000, or \"auto\""), std::string::npos) << e;
  e = error_of("[campaign]\nname = \"x\"\nrepetitions = 1.5\n");
  EXPECT_NE(e.find("c.toml:3:15"), std::string::npos) << e;
  EXPECT_NE(e.find("expected an integer"), std::string::npos) << e;
  e = error_of("[campaign]\nname = \"x\"\n[axes]\nn = [1, \"two\"]\n");
  EXPECT_NE(e.find("c.toml:4:9"), std::string::npos) << e;
  EXPECT_NE(e.find("mixes integer and string"), std::string::npos) << e;
  e = error_of("[campaign]\nname = \"x\"\n[fixed]\nn = [1, 2]\n");
  EXPECT_NE(e.find("takes one value"), std::string::npos) << e;
}

TEST(Campaign, EmptyAxisAndImpossibleValuesAreErrors) {
  std::string e = error_of("[campaign]\nname = \"x\"\n[axes]\nn = []\n");
  EXPECT_NE(e.find("c.toml:4:5"), std::string::npos) << e;
  EXPECT_NE(e.find("axis 'n' is empty"), std::string::npos) << e;
  e = error_of("[campaign]\nname = \"x\"\nrepetitions = 0\n");
  EXPECT_NE(e.find("valid: 1 to"), std::string::npos) << e;
  e = error_of("[campaign]\nname = \"x\"\nwarmups = -1\n");
  EXPECT_NE(e.find("valid: 0 to"), std::string::npos) << e;
  e = error_of("[campaign]\nname = \"has space\"\n");
  EXPECT_NE(e.find("letters, digits"), std::string::npos) << e;
  e = error_of("[campaign]\nname = \"x\"\n[axes]\nn = [1, 1]\n");
  EXPECT_NE(e.find("twice"), std::string::npos) << e;
  e = error_of("[fixed]\nn = 1\n");
  EXPECT_NE(e.find("missing [campaign]"), std::string::npos) << e;
}

TEST(Campaign, ZipGroupsNeedExistingAxesOfEqualLength) {
  std::string e = error_of("[campaign]\nname = \"x\"\n[axes]\nn = [1, 2]\nm = [1]\n[[zip]]\naxes = [\"n\", \"m\"]\n");
  EXPECT_NE(e.find("equal lengths"), std::string::npos) << e;
  EXPECT_NE(e.find("c.toml:7:"), std::string::npos) << e;
  e = error_of("[campaign]\nname = \"x\"\n[axes]\nn = [1, 2]\nm = [1, 2]\n[[zip]]\naxes = [\"n\", \"mm\"]\n");
  EXPECT_NE(e.find("did you mean 'm'"), std::string::npos) << e;
  e = error_of("[campaign]\nname = \"x\"\n[axes]\nn = [1]\nm = [2]\n[zip]\naxes = [\"n\", \"m\"]\n");
  EXPECT_NE(e.find("[[zip]]"), std::string::npos) << e;
  // A zipped axis may repeat a value; the group may not repeat a combination, and an axis outside
  // it still may not repeat one.
  Campaign c = parse_campaign_text(
      "[campaign]\nname = \"x\"\n[axes]\nm = [256, 256, 512]\nn = [128, 256, 256]\n"
      "[[zip]]\naxes = [\"m\", \"n\"]\n",
      "c.toml");
  ASSERT_EQ(c.axes.size(), 2u);
  EXPECT_EQ(c.axes[0].values.size(), 3u);
  e = error_of(
      "[campaign]\nname = \"x\"\n[axes]\nm = [256, 512, 256]\nn = [128, 256, 128]\n[[zip]]\naxes = [\"m\", \"n\"]\n");
  EXPECT_NE(e.find("group (m, n) lists (256, 128) twice, at position 3"), std::string::npos) << e;
  EXPECT_NE(e.find("c.toml:4:"), std::string::npos) << e;
  e = error_of(
      "[campaign]\nname = \"x\"\n[axes]\nm = [1, 2]\nn = [3, 4]\nk = [5, 5]\n[[zip]]\naxes = [\"m\", \"n\"]\n");
  EXPECT_NE(e.find("axis 'k' lists the value 5 twice"), std::string::npos) << e;
}

TEST(Campaign, AutoRepetitionsParseWithDefaultsAndTheirBounds) {
  const std::string head = "[campaign]\nname = \"a\"\nrepetitions = \"auto\"\n";
  Campaign d = parse_campaign_text(head, "c.toml");
  EXPECT_TRUE(d.auto_repetitions.on);
  EXPECT_EQ(d.auto_repetitions.min, 10);
  EXPECT_EQ(d.repetitions, d.auto_repetitions.max);  // the bound, for everything sized by it
  Campaign c = parse_campaign_text(
      head + "[auto_repetitions]\nci_rel_width = 0.01\nconfidence = 0.99\nmin = 20\nmax = 5000\nmax_time = \"2min\"\n",
      "c.toml");
  EXPECT_DOUBLE_EQ(c.auto_repetitions.ci_rel_width, 0.01);
  EXPECT_DOUBLE_EQ(c.auto_repetitions.confidence, 0.99);
  EXPECT_EQ(c.auto_repetitions.min, 20);
  EXPECT_EQ(c.repetitions, 5000);
  EXPECT_DOUBLE_EQ(c.auto_repetitions.max_time_s, 120);
  for (const auto& [text, seconds] : std::vector<std::pair<std::string, double>>{
           {"90", 90}, {"0.5", 0.5}, {"\"45s\"", 45}, {"\"1h\"", 3600}, {"\"01:30\"", 90}, {"\"01:00:05\"", 3605}})
    EXPECT_DOUBLE_EQ(parse_campaign_text(head + "[auto_repetitions]\nmax_time = " + text + "\n", "c.toml")
                         .auto_repetitions.max_time_s,
                     seconds)
        << text;
}

TEST(Campaign, AutoRepetitionMistakesAreLocatedAndSayWhatIsValid) {
  const std::string head = "[campaign]\nname = \"a\"\nrepetitions = \"auto\"\n[auto_repetitions]\n";
  auto has = [](const std::string& e, const std::string& part) { return e.find(part) != std::string::npos; };
  std::string e = error_of("[campaign]\nname = \"a\"\nrepetitions = \"atuo\"\n");
  EXPECT_TRUE(has(e, "c.toml:3:15") && has(e, "valid: an integer 1 to 1000000, or \"auto\"")) << e;
  e = error_of("[campaign]\nname = \"a\"\nrepetitions = 12\n[auto_repetitions]\nmin = 10\n");
  EXPECT_TRUE(has(e, "c.toml:4") && has(e, "only with repetitions = \"auto\"")) << e;
  e = error_of(head + "mni = 10\n");
  EXPECT_TRUE(has(e, "c.toml:5:1") && has(e, "did you mean 'min'")) << e;
  e = error_of(head + "min = 5\n");
  EXPECT_TRUE(has(e, "c.toml:5:7") && has(e, "at least 6 repetitions") && has(e, "valid: 6 to 1000000")) << e;
  e = error_of(head + "confidence = 0.99\nmin = 7\n");
  EXPECT_TRUE(has(e, "at least 8 repetitions")) << e;
  e = error_of(head + "min = 50\nmax = 20\n");
  EXPECT_TRUE(has(e, "c.toml:6:7") && has(e, "below min = 50")) << e;
  e = error_of(head + "ci_rel_width = 0\n");
  EXPECT_TRUE(has(e, "c.toml:5:16") && has(e, "ci_rel_width") && has(e, "valid:")) << e;
  e = error_of(head + "ci_rel_width = \"2%\"\n");
  EXPECT_TRUE(has(e, "expected a number, got string")) << e;
  for (const char* bad : {"\"soon\"", "0", "-3", "\"10 minutes\"", "1e9"}) {
    e = error_of(head + "max_time = " + bad + "\n");
    EXPECT_TRUE(has(e, "c.toml:5:12") && has(e, "\"HH:MM:SS\"")) << bad << ": " << e;
  }
}

// Issue 52: hostile values end in a clear error, never a crash (std::regex recursed per character
// and overflowed its stack on a 30,000-digit duration; std::stod threw out_of_range on 400
// nines), never an overflow that passes a check, and never a megabyte or an escape sequence
// echoed back.
TEST(Campaign, HostileValuesGetABoundedErrorNeverACrash) {
  const std::string head = "[campaign]\nname = \"h\"\n";
  const std::string huge(30000, '9');
  std::string e = error_of(head + "repetitions = \"auto\"\n[auto_repetitions]\nmax_time = \"" + huge + "s\"\n");
  EXPECT_NE(e.find("c.toml:5:12: key 'max_time' in [auto_repetitions] is not a duration"), std::string::npos)
      << e.substr(0, 300);
  e = error_of(head + "[packing]\njob_time = \"" + std::string(400, '9') + "\"\n");
  EXPECT_NE(e.find("key 'job_time' in [packing] is not a job's time"), std::string::npos) << e.substr(0, 300);
  e = error_of(head + "[packing]\njob_time = \"" + huge + ":00\"\n");
  EXPECT_NE(e.find("key 'job_time' in [packing]"), std::string::npos) << e.substr(0, 300);
  e = error_of(head + "[slurm]\ntime_limit = \"" + huge + "\"\n");
  EXPECT_NE(e.find("key 'time_limit' in [slurm] is \"9999"), std::string::npos) << e.substr(0, 300);
  EXPECT_NE(e.find("...\" (30000 characters)"), std::string::npos) << e.substr(0, 300);
  EXPECT_LT(e.size(), 400u);
  e = error_of(head + "[slurm]\nmem_per_node = \"8388607T\"\n");
  EXPECT_NE(e.find("key 'mem_per_node' in [slurm] is \"8388607T\""), std::string::npos) << e;

  // A megabyte-long name: refused in a line, not echoed whole.
  e = error_of("[campaign]\nname = \"" + std::string(1 << 20, 'a') + "\"\n");
  EXPECT_NE(e.find("key 'name' in [campaign] is \"aaaa"), std::string::npos) << e.substr(0, 300);
  EXPECT_NE(e.find("(1048576 characters)"), std::string::npos) << e.substr(0, 300);
  EXPECT_LT(e.size(), 500u);
  // An escape sequence in a value reaches no terminal raw.
  e = error_of("[campaign]\nname = \"x\\u001b[2Jy\"\n");
  EXPECT_NE(e.find("is \"x\\x1b[2Jy\""), std::string::npos) << e;
  EXPECT_EQ(e.find('\x1b'), std::string::npos);
  e = error_of(head + "[slurm]\npartition = \"p\\u001b]0;title\\u0007\"\n");
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
  EXPECT_NE(e.find("\\x1b]0;title\\x07"), std::string::npos) << e;

  // What the parsers accept is unchanged.
  EXPECT_EQ(parse_time_limit("30"), 30);
  EXPECT_EQ(parse_time_limit("1:30"), 2);
  EXPECT_EQ(parse_time_limit("02:00:00"), 120);
  EXPECT_EQ(parse_time_limit("1-00:30"), 1470);
  EXPECT_EQ(parse_time_limit("1-2"), 1560);
  EXPECT_EQ(parse_time_limit("1:2:3:4"), -1);
  EXPECT_EQ(parse_time_limit("-5"), -1);
  EXPECT_EQ(parse_time_limit("99999999"), -1);
  EXPECT_EQ(parse_memory_size("64G"), 64LL << 30);
  EXPECT_EQ(parse_memory_size("512000"), 512000LL << 20);
  EXPECT_EQ(parse_memory_size("1TB"), 1LL << 40);
  EXPECT_EQ(parse_memory_size("4194303T"), 4194303LL << 40);
  EXPECT_EQ(parse_memory_size("4194304T"), -1);
  EXPECT_EQ(parse_memory_size("1GiB"), -1);
}
