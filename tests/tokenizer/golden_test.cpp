// Checks the tokenizer against ids, ids-with-special-tokens and decodings recorded with the
// Hugging Face `tokenizers` library for every string of every reference set.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "gateway/tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace {

using nlohmann::json;

struct SetResult {
  size_t strings = 0;
  size_t ids_ok = 0, special_ok = 0, decoded_ok = 0, skip_ok = 0, checked_special = 0;
};

std::string Show(const std::vector<int32_t>& v) {
  return json(v).dump();
}

SetResult CheckSet(const std::string& tokenizer_path, const std::string& encodings_path) {
  const auto tok = m3::tok::Tokenizer::FromFile(m3::test::DataPath(tokenizer_path));
  const json rows = json::parse(m3::test::ReadFile(m3::test::DataPath(encodings_path)));
  SetResult r;
  int reported = 0;
  for (const auto& row : rows) {
    ++r.strings;
    const std::string text = row["text"].get<std::string>();
    const auto expected = row["ids"].get<std::vector<int32_t>>();
    const auto ids = tok.Encode(text);
    if (ids == expected) {
      ++r.ids_ok;
    } else if (reported++ < 5) {
      MESSAGE(encodings_path << ": ids differ for " << json(text).dump() << "\n  got      "
                             << Show(ids) << "\n  expected " << Show(expected));
    }
    if (row.contains("ids_with_special")) {
      ++r.checked_special;
      const auto with = tok.Encode(text, true);
      if (with == row["ids_with_special"].get<std::vector<int32_t>>()) {
        ++r.special_ok;
      } else if (reported++ < 5) {
        MESSAGE(encodings_path << ": ids_with_special differ for " << json(text).dump()
                               << "\n  got " << Show(with));
      }
    }
    const std::string decoded = tok.Decode(expected);
    if (decoded == row["decoded"].get<std::string>()) {
      ++r.decoded_ok;
    } else if (reported++ < 5) {
      MESSAGE(encodings_path << ": decoded differs for " << json(text).dump() << "\n  got "
                             << json(decoded).dump());
    }
    const std::string skipped = tok.Decode(expected, true);
    if (skipped == row["decoded_skip_special"].get<std::string>()) {
      ++r.skip_ok;
    } else if (reported++ < 5) {
      MESSAGE(encodings_path << ": decoded_skip_special differs for " << json(text).dump()
                             << "\n  got " << json(skipped).dump());
    }
  }
  MESSAGE(encodings_path << ": " << r.ids_ok << "/" << r.strings << " ids, " << r.special_ok << "/"
                         << r.checked_special << " ids_with_special, " << r.decoded_ok << "/"
                         << r.strings << " decoded, " << r.skip_ok << "/" << r.strings
                         << " decoded_skip_special");
  return r;
}

void RequireAll(const SetResult& r) {
  CHECK(r.strings > 0);
  CHECK(r.ids_ok == r.strings);
  CHECK(r.special_ok == r.checked_special);
  CHECK(r.decoded_ok == r.strings);
  CHECK(r.skip_ok == r.strings);
}

}  // namespace

TEST_CASE("MiniMax tokenizer matches HF on encodings.json") {
  RequireAll(CheckSet("tokenizer/tokenizer.json", "tokenizer/encodings.json"));
}

TEST_CASE("MiniMax tokenizer matches HF on minimax.encodings.json") {
  RequireAll(CheckSet("tokenizer/tokenizer.json", "tokenizer/minimax.encodings.json"));
}

TEST_CASE("retrained tokenizer matches HF") {
  RequireAll(CheckSet("tokenizer/retrained/tokenizer.json", "tokenizer/retrained/encodings.json"));
}

TEST_CASE("variant tokenizers match HF") {
  for (const char* name : {"metaspace", "bytelevel_digits", "prepend_replace"}) {
    SUBCASE(name) {
      const std::string base = std::string("tokenizer/variants/") + name;
      RequireAll(CheckSet(base + ".tokenizer.json", base + ".encodings.json"));
    }
  }
}
