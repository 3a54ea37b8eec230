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
  Campaign c = parse_campaign_text("[campaign]\nname = \"x\"\n[axes]\nm = [256, 256, 512]\nn = [128, 256, 256]\n"
                                   "[[zip]]\naxes = [\"m\", \"n\"]\n", "c.toml");
  ASSERT_EQ(c.axes.size(), 2u);
  EXPECT_EQ(c.axes[0].values.size(), 3u);
  e = error_of("[campaign]\nname = \"x\"\n[axes]\nm = [256, 512, 256]\nn = [128, 256, 128]\n[[zip]]\naxes = [\"m\", \"n\"]\n");
  EXPECT_NE(e.find("group (m, n) lists (256, 128) twice, at position 3"), std::string::npos) << e;
  EXPECT_NE(e.find("c.toml:4:"), std::string::npos) << e;
  e = error_of("[campaign]\nname = \"x\"\n[axes]\nm = [1, 2]\nn = [3, 4]\nk = [5, 5]\n[[zip]]\naxes = [\"m\", \"n\"]\n");
  EXPECT_NE(e.find("axis 'k' lists the value 5 twice"), std::string::npos) << e;
}

TEST(Campaign, AutoRepetitionsParseWithDefaultsAndTheirBounds) {
  const std::string head = "[campaign]\nname = \"a\"\nrepetitions = \"auto\"\n";
  Campaign d = parse_campaign_text(head, "c.toml");
  EXPECT_TRUE(d.auto_repetitions.on);
  EXPECT_EQ(d.auto_repetitions.min, 10);
  EXPECT_EQ(d.repetitions, d.auto_repetitions.max);  // the bound, for everything sized by it
  Campaign c = parse_campaign_text(head + "[auto_repetitions]\nci_rel_width = 0.01\nconfidence = 0.99\nmin = 20\nmax = 5000\nmax_time = \"2min\"\n",
                                   "c.toml");
  EXPECT_DOUBLE_EQ(c.auto_repetitions.ci_rel_width, 0.01);
  EXPECT_DOUBLE_EQ(c.auto_repetitions.confidence, 0.99);
  EXPECT_EQ(c.auto_repetitions.min, 20);
  EXPECT_EQ(c.repetitions, 5000);
  EXPECT_DOUBLE_EQ(c.auto_repetitions.max_time_s, 120);
  for (const auto& [text, seconds] : std::vector<std::pair<std::string, double>>{
           {"90", 90}, {"0.5", 0.5}, {"\"45s\"", 45}, {"\"1h\"", 3600}, {"\"01:30\"", 90}, {"\"01:00:05\"", 3605}})
    EXPECT_DOUBLE_EQ(parse_campaign_text(head + "[auto_repetitions]\nmax_time = " + text + "\n", "c.toml").auto_repetitions.max_time_s,
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
