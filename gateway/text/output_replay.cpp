// Offline replay of model output through the output chain (see output_replay.h).
#include "gateway/text/output_replay.h"

#include <filesystem>

#include "gateway/template/chat_template.h"
#include "shared/error.h"
#include "shared/model_config_view.h"

namespace m3::text {
namespace {

using Json = nlohmann::ordered_json;

void Check(bool ok, const std::string& message) {
  Require(ok, ErrorCode::kInvalidArgument, "request: " + message);
}

}  // namespace

OutputReplayer OutputReplayer::FromModelDir(const std::string& model_dir,
                                            std::string_view reasoning_parser,
                                            std::string_view tool_call_parser) {
  PromptBuilder builder = PromptBuilder::FromModelDir(model_dir);
  const ChatFormat format = ResolveChatFormat(tmpl::LoadChatTemplateSource(model_dir),
                                              reasoning_parser, tool_call_parser);
  std::vector<int64_t> eos;
  if (std::filesystem::exists(std::filesystem::path(model_dir) / "config.json")) {
    eos = LoadModelConfigView(model_dir).eos_token_ids();
  } else if (const auto& e = builder.special_tokens().eos) {
    eos.push_back(e->id);
  }
  return OutputReplayer(std::move(builder), format, std::move(eos));
}

OutputParserOptions OutputReplayer::ParserOptions(const Json& request,
                                                  std::string_view rendered_prompt) const {
  OutputParserOptions o;
  if (auto it = request.find("skip_special_tokens"); it != request.end()) {
    Check(it->is_boolean(), "\"skip_special_tokens\" must be a boolean");
    o.skip_special_tokens = it->get<bool>();
  }
  if (auto it = request.find("stop"); it != request.end() && !it->is_null()) {
    Check(it->is_string() || it->is_array(), "\"stop\" must be a string or a list of strings");
    for (const auto& s : it->is_string() ? Json::array({*it}) : *it) {
      Check(s.is_string() && !s.get<std::string>().empty(), "\"stop\" must hold non-empty strings");
      o.stop.stop_strings.push_back(s.get<std::string>());
    }
  }
  for (int64_t id : eos_) o.stop.stop_token_ids.push_back(static_cast<int32_t>(id));
  bool tool_choice_none = false;
  if (auto it = request.find("tool_choice"); it != request.end() && !it->is_null()) {
    Check(it->is_string() || it->is_object(), "\"tool_choice\" must be a string or an object");
    tool_choice_none = it->is_string() && *it == "none";
  }
  if (auto it = request.find("tools"); it != request.end() && !it->is_null()) {
    Check(it->is_array(), "\"tools\" must be a list");
    o.parse_tool_calls = !it->empty() && !tool_choice_none;
    o.tools = *it;
  }
  ApplyChatFormat(format_, rendered_prompt, o);
  return o;
}

ReplayResult OutputReplayer::Replay(const Json& request, std::string_view text,
                                    size_t chunk_tokens) const {
  Check(request.is_object(), "must be a JSON object");
  PromptInput input;
  input.messages = Json::array({{{"role", "user"}, {"content", ""}}});
  if (auto it = request.find("messages"); it != request.end()) {
    Check(it->is_array() && !it->empty(), "\"messages\" must be a non-empty list");
    input.messages = *it;
  }
  Check(FindMediaParts(input.messages).empty(),
        "media parts are not rendered here (the prompt only decides where reasoning starts)");
  if (auto it = request.find("tools"); it != request.end() && !it->is_null()) {
    Check(it->is_array(), "\"tools\" must be a list");
    input.tools = *it;
  }
  if (auto it = request.find("chat_template_kwargs"); it != request.end() && !it->is_null()) {
    Check(it->is_object(), "\"chat_template_kwargs\" must be an object");
    input.extra_context = *it;
  }
  const AssembledPrompt prompt = builder_.Build(input, {});

  OutputParser parser(builder_.tokenizer(), ParserOptions(request, prompt.rendered));
  const std::vector<int32_t> ids = builder_.tokenizer().Encode(text, false);
  ReplayResult r;
  auto take = [&](OutputDelta d) {
    r.num_deltas += !d.empty();
    r.content += d.content;
    r.reasoning_content += d.reasoning_content;
    for (auto& piece : d.tool_calls) JoinToolCallPiece(r.tool_calls, std::move(piece));
    if (d.finish_reason) r.finish_reason = *d.finish_reason;
  };
  const std::span<const int32_t> all(ids);
  const size_t step = chunk_tokens == 0 ? std::max<size_t>(all.size(), 1) : chunk_tokens;
  for (size_t i = 0; i < all.size() && !parser.finished(); i += step) {
    take(parser.Step(all.subspan(i, std::min(step, all.size() - i))));
  }
  take(parser.Finish(FinishReason::kStop));
  r.num_tokens = parser.result().num_tokens;
  return r;
}

}  // namespace m3::text
