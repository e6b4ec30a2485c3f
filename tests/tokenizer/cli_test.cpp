// m3-gateway tokenize / detokenize, run as processes on the built binary.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/test_util.h"

namespace {

using m3::test::RunProcess;
using nlohmann::json;

std::string LastLine(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

}  // namespace

TEST_CASE("tokenize and detokenize match the reference encodings") {
  const std::string bin = m3::test::BinPath("m3-gateway");
  const std::string tok = m3::test::DataPath("tokenizer/tokenizer.json");
  const std::string dir = m3::test::TempDir();
  const json rows = json::parse(m3::test::ReadFile(m3::test::DataPath("tokenizer/encodings.json")));
  for (size_t k = 0; k < rows.size(); k += 4) {
    const auto& row = rows[k];
    const std::string text_file = dir + "/text.txt";
    m3::test::WriteFile(text_file, row["text"].get<std::string>());
    const auto enc = RunProcess({bin, "tokenize", "--tokenizer", tok, "--text-file", text_file});
    REQUIRE(enc.exit_code == 0);
    CHECK(json::parse(LastLine(enc.out))["ids"] == row["ids"]);

    const std::string ids_file = dir + "/ids.json";
    m3::test::WriteFile(ids_file, row["ids"].dump());
    const auto dec = RunProcess({bin, "detokenize", "--tokenizer", tok, "--ids-file", ids_file});
    REQUIRE(dec.exit_code == 0);
    CHECK(dec.out == row["decoded"].get<std::string>());
  }
}

TEST_CASE("detokenize accepts {\"ids\": [...]} and skips special tokens on request") {
  const std::string bin = m3::test::BinPath("m3-gateway");
  const std::string tok = m3::test::DataPath("tokenizer/tokenizer.json");
  const std::string dir = m3::test::TempDir();
  m3::test::WriteFile(dir + "/t.txt", "<think>ok</think>\n");
  const auto enc = RunProcess({bin, "tokenize", "--tokenizer", tok, "--text-file", dir + "/t.txt"});
  REQUIRE(enc.exit_code == 0);
  m3::test::WriteFile(dir + "/ids.json", LastLine(enc.out));
  auto dec = RunProcess({bin, "detokenize", "--tokenizer", tok, "--ids-file", dir + "/ids.json"});
  REQUIRE(dec.exit_code == 0);
  CHECK(dec.out == "<think>ok</think>\n");
  dec = RunProcess({bin, "detokenize", "--tokenizer", tok, "--ids-file", dir + "/ids.json",
                    "--skip-special-tokens"});
  REQUIRE(dec.exit_code == 0);
  CHECK(dec.out == "ok\n");
}

TEST_CASE("bad input gives a message and a non-zero exit") {
  const std::string bin = m3::test::BinPath("m3-gateway");
  const std::string tok = m3::test::DataPath("tokenizer/tokenizer.json");
  const std::string dir = m3::test::TempDir();
  m3::test::WriteFile(dir + "/bad.json", "[1, 2,");
  m3::test::WriteFile(dir + "/range.json", "[1, 99999999]");
  m3::test::WriteFile(dir + "/text.txt", "hello");
  m3::test::WriteFile(dir + "/broken_tokenizer.json", "{\"model\": {\"type\": \"Unigram\"}}");
  struct Case {
    std::vector<std::string> argv;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{bin, "detokenize", "--tokenizer", tok, "--ids-file", dir + "/bad.json"}, "JSON"},
      {{bin, "detokenize", "--tokenizer", tok, "--ids-file", dir + "/range.json"}, "99999999"},
      {{bin, "detokenize", "--tokenizer", tok, "--ids-file", dir + "/missing.json"}, "missing"},
      {{bin, "tokenize", "--tokenizer", dir + "/broken_tokenizer.json", "--text-file",
        dir + "/text.txt"},
       "Unigram"},
      {{bin, "tokenize", "--tokenizer", tok}, "text-file"},
  };
  for (const auto& c : cases) {
    const auto r = RunProcess(c.argv);
    CHECK(r.exit_code != 0);
    CHECK(r.err.find(c.needle) != std::string::npos);
  }
}
