// m3-gateway parse-output: a model's output text through the output chain a chat request gets
// on the server (text/output_replay.h): tokenized with the model's tokenizer, the ids fed to the
// streaming detokenizer and output parsers all at once or --chunk-tokens N at a time, the
// deltas accumulated. Prints one JSON line: {"content", "reasoning_content", "tool_calls":
// [{"name", "arguments"}], "finish_reason"}. REQ gives "tools" and "chat_template_kwargs" (the
// prompt is rendered with the model's template to find where reasoning starts).
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gateway/cli/command.h"
#include "gateway/cli/input_file.h"
#include "gateway/text/output_replay.h"
#include "shared/error.h"

namespace m3::cli {
namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kMaxRequestBytes = 64ll << 20;
constexpr int64_t kMaxTextBytes = 64ll << 20;

int Run(int argc, char** argv) {
  CLI::App app{
      "Parse a model's output text as the server's chat completions do: m3-gateway "
      "parse-output --model DIR --request REQ.json --text-file F [--chunk-tokens N]",
      "parse-output"};
  std::string model_dir, request_path, text_path;
  int64_t chunk_tokens = 0;
  std::string reasoning_parser = "auto", tool_call_parser = "auto";
  app.add_option("--model", model_dir, "model directory (tokenizer, chat template, configs)")
      ->required();
  app.add_option("--request", request_path,
                 "request JSON: tools, tool_choice, chat_template_kwargs, messages, "
                 "skip_special_tokens, stop")
      ->required();
  app.add_option("--text-file", text_path, "the model's output text (UTF-8)")->required();
  app.add_option("--chunk-tokens", chunk_tokens,
                 "token ids per parser step (0: all at once; 1: as the server streams)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--reasoning-parser", reasoning_parser,
                 "reasoning format: auto (from the chat template), minimax_m2, minimax_m3, none")
      ->capture_default_str();
  app.add_option("--tool-call-parser", tool_call_parser,
                 "tool-call format: auto (from the chat template), minimax_m2, minimax_m3, none")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  Json request;
  try {
    request = Json::parse(ReadInputFile(request_path, kMaxRequestBytes, "request file"));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, request_path + ": not JSON: " + e.what());
  }
  Require(request.is_object(), ErrorCode::kInvalidArgument,
          request_path + ": the request must be a JSON object");
  const std::string text = ReadInputFile(text_path, kMaxTextBytes, "text file");
  const auto replayer =
      text::OutputReplayer::FromModelDir(model_dir, reasoning_parser, tool_call_parser);
  const text::ReplayResult r = replayer.Replay(request, text, static_cast<size_t>(chunk_tokens));

  Json calls = Json::array();
  for (const auto& c : r.tool_calls) {
    calls.push_back({{"name", c.name}, {"arguments", c.arguments}});
  }
  const Json out = {{"content", r.content},
                    {"reasoning_content", r.reasoning_content},
                    {"tool_calls", std::move(calls)},
                    {"finish_reason", std::string(text::FinishReasonName(r.finish_reason))}};
  const std::string line = out.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
  return 0;
}

const CommandRegistrar kRegister(
    {"parse-output", "parse a model's output text as chat completions do (reasoning, tool calls)",
     Run});

}  // namespace
}  // namespace m3::cli
