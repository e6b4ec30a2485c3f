// m3-gateway tokenize: encodes a text file (raw bytes, invalid UTF-8 replaced) with a
// tokenizer.json and prints {"ids":[...]} as the last line of stdout.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gateway/cli/command.h"
#include "gateway/cli/input_file.h"
#include "gateway/tokenizer/tokenizer.h"
#include "shared/error.h"

namespace {

int Run(int argc, char** argv) {
  CLI::App app{"Encode a text file into token ids with a tokenizer.json", "tokenize"};
  std::string tokenizer_path, text_path;
  bool add_special_tokens = false;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json (Hugging Face format)")->required();
  app.add_option("--text-file", text_path, "file whose bytes are the text to encode")->required();
  app.add_flag("--add-special-tokens", add_special_tokens,
               "run the post-processor (BOS/EOS template) after encoding");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const auto tokenizer = m3::tok::Tokenizer::FromFile(tokenizer_path);
  const std::string text = m3::cli::ReadInputFile(text_path, int64_t{1} << 30, "text file");
  const auto ids = tokenizer.Encode(text, add_special_tokens);
  std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
  return 0;
}

const m3::cli::CommandRegistrar kRegistrar({"tokenize", "encode a text file into token ids", Run});

}  // namespace
