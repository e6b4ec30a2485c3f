// m3-gateway detokenize: decodes token ids (a JSON list, or an object with "ids") with a
// tokenizer.json and prints the text exactly, with no added newline.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gateway/cli/command.h"
#include "gateway/cli/input_file.h"
#include "gateway/tokenizer/tokenizer.h"
#include "shared/error.h"

namespace {

std::vector<int32_t> ParseIds(const std::string& bytes, const std::string& path) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(bytes);
  } catch (const nlohmann::json::exception& e) {
    throw m3::Error(m3::ErrorCode::kInvalidArgument,
                    "ids file '" + path + "' is not valid JSON: " + e.what());
  }
  const nlohmann::json* list = &doc;
  if (doc.is_object()) {
    auto it = doc.find("ids");
    m3::Require(it != doc.end(), m3::ErrorCode::kInvalidArgument,
                "ids file '" + path + "' is an object without an \"ids\" field");
    list = &*it;
  }
  m3::Require(list->is_array(), m3::ErrorCode::kInvalidArgument,
              "ids file '" + path + "' must hold a JSON list of ids or {\"ids\": [...]}");
  std::vector<int32_t> ids;
  ids.reserve(list->size());
  for (const auto& v : *list) {
    m3::Require(v.is_number_integer(), m3::ErrorCode::kInvalidArgument,
                "ids file '" + path + "' holds a non-integer id: " + v.dump());
    // Unsigned values over INT64_MAX (e.g. 2^64-1) would read back as negative int64s.
    m3::Require(!(v.is_number_unsigned() && v.get<uint64_t>() > INT32_MAX) &&
                    v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX,
                m3::ErrorCode::kInvalidArgument,
                "ids file '" + path + "' holds an id out of range (0 to 2147483647): " + v.dump());
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

int Run(int argc, char** argv) {
  CLI::App app{"Decode token ids back into text with a tokenizer.json", "detokenize"};
  std::string tokenizer_path, ids_path;
  bool skip_special_tokens = false;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json (Hugging Face format)")->required();
  app.add_option("--ids-file", ids_path, "JSON list of ids, or {\"ids\": [...]}")->required();
  app.add_flag("--skip-special-tokens", skip_special_tokens, "leave special tokens out");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const std::string bytes = m3::cli::ReadInputFile(ids_path, int64_t{1} << 30, "ids file");
  const auto ids = ParseIds(bytes, ids_path);
  const auto tokenizer = m3::tok::Tokenizer::FromFile(tokenizer_path);
  const std::string text = tokenizer.Decode(ids, skip_special_tokens);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

const m3::cli::CommandRegistrar kRegistrar({"detokenize", "decode token ids into text", Run});

}  // namespace
