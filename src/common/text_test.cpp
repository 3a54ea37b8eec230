#include "common/text.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "common/error.hpp"
#include "common/value.hpp"

using namespace d500;

namespace {
std::string run_bash(const std::string& script) {
  std::string cmd = "bash -c " + shell_quote(script);
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}
}  // namespace

TEST(ShellQuote, HostileValuesReachTheShellAsOneLiteralWord) {
  const std::string marker = "/tmp/d500-quote-test-" + std::to_string(getpid());
  const std::vector<std::string> hostile = {"plain",
                                            "with space",
                                            "it's",
                                            "$(touch " + marker + ")",
                                            "`touch " + marker + "`",
                                            "a;touch " + marker,
                                            "new\nline",
                                            "\"double\"",
                                            "back\\slash",
                                            "'",
                                            "",
                                            "*",
                                            "$HOME",
                                            "--flag"};
  for (const auto& v : hostile) {
    // One word, exactly the value: `set --` makes it the only positional parameter.
    std::string out = run_bash("set -- " + shell_quote(v) + "; printf '%s|%s' \"$#\" \"$1\"");
    EXPECT_EQ(out, "1|" + v) << "value: " << v;
  }
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(Hash, Fnv1aMatchesPublishedTestVectors) {
  EXPECT_EQ(hex64(fnv1a64("")), "cbf29ce484222325");
  EXPECT_EQ(hex64(fnv1a64("a")), "af63dc4c8601ec8c");
  EXPECT_EQ(hex64(fnv1a64("foobar")), "85944171f73967e8");
}

TEST(DidYouMean, SuggestsCloseNamesOnly) {
  EXPECT_EQ(did_you_mean("repetitons", {"repetitions", "warmups"}), "; did you mean 'repetitions'?");
  EXPECT_EQ(did_you_mean("blsa", {"reference", "blas", "mpi"}), "; did you mean 'blas'?");
  EXPECT_EQ(did_you_mean("zzzzzz", {"reference", "blas"}), "");
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);
}

TEST(FmtSig, GivesSignificantDigitsAtEveryMagnitude) {
  EXPECT_EQ(fmt_sig(0.0129456, 3), "0.0129");
  EXPECT_EQ(fmt_sig(0.5, 3), "0.500");
  EXPECT_EQ(fmt_sig(0.0075, 2), "0.0075");
  EXPECT_EQ(fmt_sig(12.345, 3), "12.3");
  EXPECT_EQ(fmt_sig(9.9999999, 3), "10.0") << "rounding up to the next power of ten keeps 3 digits";
  EXPECT_EQ(fmt_sig(-0.99996, 3), "-1.00");
  EXPECT_EQ(fmt_sig(9.994, 3), "9.99");
  EXPECT_EQ(fmt_sig(1234.6, 3), "1235");
  EXPECT_EQ(fmt_sig(0, 3), "0.00");
  EXPECT_EQ(fmt_sig(-0.0314159, 2), "-0.031");
  EXPECT_EQ(fmt_sig(0.00012, 2), "1.2e-04");
}

TEST(WrapWords, FitsTheWidthContinuesIndentedAndKeepsALongWordWhole) {
  EXPECT_EQ(wrap_words("warning: a b c", 120), "warning: a b c\n");
  EXPECT_EQ(wrap_words("aaa bbb ccc ddd", 8), "aaa bbb\n  ccc\n  ddd\n") << "continuation lines indented by two";
  EXPECT_EQ(wrap_words("aaa bbb", 7, "> "), "> aaa\n>   bbb\n");
  EXPECT_EQ(wrap_words("a /a/very/long/path b", 6), "a\n  /a/very/long/path\n  b\n") << "never cut";
  EXPECT_EQ(wrap_words("one\ntwo three", 0), "one\ntwo three\n") << "0: every paragraph on its line";
  EXPECT_EQ(text_columns("\u2026ab"), 3u) << "a code point a column";
  for (const std::string& line : split(wrap_words(std::string(50, 'x') + " " + std::string(60, 'y') + " z", 120), '\n'))
    EXPECT_LE(line.size(), 120u);
}

TEST(Csv, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(csv_field("abc"), "abc");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
}

TEST(Value, CanonicalFormsAreStableAndTyped) {
  EXPECT_EQ(canonical(Value{std::int64_t{1024}}), "1024");
  EXPECT_EQ(canonical(Value{2.0}), "2.0");
  EXPECT_EQ(canonical(Value{0.1}), "0.1");
  EXPECT_EQ(canonical(Value{true}), "true");
  EXPECT_EQ(canonical(Value{std::string("blas")}), "blas");
  EXPECT_EQ(canonical(Value{std::string("a b")}), "\"a b\"");
}

TEST(Value, ACanonicalTextParsesBackToItsParameters) {
  const Params p{{"workload", std::string("train")},
                 {"backend", std::string("blas")},
                 {"n", std::int64_t{512}},
                 {"lr", 0.1},
                 {"alpha", 2.0},
                 {"shuffle", true},
                 {"dataset", std::string("/data/a b \"q\".h5")},
                 {"network", std::string("lenet5")}};
  EXPECT_EQ(parse_canonical_point(canonical_point(p)), p);
  EXPECT_EQ(canonical_point(parse_canonical_point(canonical_point(p))), canonical_point(p));
  const Params head = parse_canonical_point("gemm:reference");
  EXPECT_EQ(head.size(), 2u);
  EXPECT_EQ(std::get<std::string>(head.at("backend")), "reference");
}

// A number a string parameter fixes on every point is set aside by the report and `d500 plan`'s
// listing (a named shape's dimensions); not one the backend fixes (a campaign may zip a size with
// it), not one that varies within a value of the string, not where the string has one value.
TEST(Value, ANumberANamedShapeFixesIsFoundAndNothingElse) {
  auto point = [](const char* backend, const char* shape, std::int64_t c, std::int64_t n) {
    return Params{{"backend", Value{std::string(backend)}},
                  {"shape", Value{std::string(shape)}},
                  {"c", Value{c}},
                  {"n", Value{n}}};
  };
  const std::vector<Params> pts = {point("blas", "res2", 64, 8), point("blas", "res3", 128, 16),
                                   point("onednn", "res2", 64, 16), point("onednn", "res3", 128, 8)};
  std::vector<const Params*> ptrs;
  for (const auto& p : pts) ptrs.push_back(&p);
  EXPECT_EQ(fixed_by_another(ptrs, {"backend", "c", "n", "shape"}), std::vector<std::string>{"c"});
  const std::vector<Params> zipped = {point("blas", "res2", 64, 8), point("onednn", "res2", 64, 16)};
  const std::vector<const Params*> z = {&zipped[0], &zipped[1]};
  EXPECT_TRUE(fixed_by_another(z, {"backend", "n"}).empty()) << "the backend fixes n: a zip, not a name";
  EXPECT_TRUE(fixed_by_another(z, {"backend", "c", "n", "shape"}).empty()) << "one shape names nothing apart";
}

TEST(WriteFileAtomic, ReportsAnUnwritableDirectory) {
  EXPECT_THROW(write_file_atomic("/nonexistent-dir/x.txt", "x"), Error);
}

// Issue 52: a link planted at a file d500 writes is replaced, never written through; an append
// refuses it; and no temporary is left behind.
TEST(WriteFileAtomic, ReplacesALinkAndNeverWritesThroughIt) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("d500-text-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  write_file_atomic((dir / "victim").string(), "secret\n");
  std::filesystem::create_symlink(dir / "victim", dir / "report.md");
  write_file_atomic((dir / "report.md").string(), "the report\n");
  EXPECT_EQ(read_file((dir / "victim").string()), "secret\n");
  EXPECT_FALSE(std::filesystem::is_symlink(dir / "report.md"));
  EXPECT_EQ(read_file((dir / "report.md").string()), "the report\n");

  std::filesystem::create_symlink(dir / "victim", dir / "job.log");
  try {
    append_file((dir / "job.log").string(), "appended\n");
    ADD_FAILURE() << "appended through a link";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("job.log: is a symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file((dir / "victim").string()), "secret\n");
  append_file((dir / "real.log").string(), "one\n");
  append_file((dir / "real.log").string(), "two\n");
  EXPECT_EQ(read_file((dir / "real.log").string()), "one\ntwo\n");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_FALSE(e.path().string().ends_with(".tmp")) << e.path();
    ++files;
  }
  EXPECT_EQ(files, 4);
  std::filesystem::remove_all(dir);
}

TEST(Split, KeepsEmptyInnerPartsAndDropsATrailingOne) {
  EXPECT_EQ(split("a\tb\t\tc", '\t'), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(split("x\ny\n", '\n'), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(split("", ',').empty());
}

TEST(NumberList, SpacesAndCommasSeparateAndAnythingElseIsRefused) {
  EXPECT_EQ(parse_number_list("0.85, 0.89 0.9"), (std::vector<double>{0.85, 0.89, 0.9}));
  EXPECT_EQ(parse_number_list(""), std::vector<double>{});
  EXPECT_FALSE(parse_number_list("0.8 high"));
  EXPECT_FALSE(parse_number_list("0.8x"));
}
