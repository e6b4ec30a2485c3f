// Validation of chat completion bodies (see chat_request.h).
#include "gateway/openai/chat_request.h"

#include <algorithm>
#include <array>
#include <optional>

#include "gateway/content/content_part.h"
#include "gateway/openai/chat_template_kwargs.h"

namespace m3::openai {
namespace {

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// A content part's defect in the words of the OpenAI API (FieldReader's, for the fields).
[[noreturn]] void RefusePart(const content::PartDefect& d) {
  using Field = content::PartDefect::Field;
  using Problem = content::PartDefect::Problem;
  const std::string quoted = Cat({"'", d.param, "'"});
  switch (d.problem) {
    case Problem::kMissing:
      InvalidField(d.param, quoted + " is required", "missing_required_parameter");
    case Problem::kWrongType: {
      const bool object = d.field == Field::kPart || d.field == Field::kMedia;
      InvalidField(
          d.param,
          Cat({quoted, " must be ", object ? "a JSON object" : "a string", ", got ", d.got}),
          "invalid_type");
    }
    case Problem::kEmpty:
      InvalidField(d.param, quoted + " must not be empty");
    case Problem::kBadValue:
      InvalidField(d.param,
                   quoted + " must be \"auto\", \"low\" or \"high\", got \"" + d.value + "\"");
  }
  InvalidField(d.param, quoted + " is invalid");
}

void ParseContentParts(const Json& parts, const std::string& path, const std::string& role,
                       std::vector<content::MediaRef>& media) {
  using Field = content::PartDefect::Field;
  for (size_t i = 0; i < parts.size(); ++i) {
    content::ContentPart part = content::ReadContentPart(parts[i], Index(path, i));
    const std::string type_path = Index(path, i) + ".type";
    if (part.defect && (part.defect->field == Field::kPart || part.defect->field == Field::kType ||
                        part.defect->field == Field::kText)) {
      RefusePart(*part.defect);
    }
    if (part.type == content::PartType::kText) continue;
    if (part.type != content::PartType::kImageUrl && part.type != content::PartType::kVideoUrl) {
      InvalidField(type_path, "'" + type_path + "' must be \"text\", \"image_url\" or " +
                                  "\"video_url\", got \"" + part.type_name + "\"");
    }
    if (role != "user") {
      InvalidField(type_path, "'" + type_path + "': " + part.type_name +
                                  " parts are allowed in user messages only");
    }
    if (part.defect) RefusePart(*part.defect);
    media.push_back(std::move(part.media));
  }
}

// A call's arguments as the object templates iterate: the object itself, or the object a JSON
// text holds ("" for a call without arguments: {}); nullopt when the text holds no object.
std::optional<Json> ArgumentsObject(const Json& args) {
  if (args.is_object()) return args;
  const std::string& text = args.get_ref<const std::string&>();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return Json::object();
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return std::nullopt;
  return parsed;
}

void ParseToolCalls(const FieldReader& message) {
  const Json* calls = message.Array("tool_calls");
  if (!calls) return;
  const std::string path = message.Path("tool_calls");
  for (size_t i = 0; i < calls->size(); ++i) {
    FieldReader call((*calls)[i], Index(path, i));
    (void)call.String("id");
    if (auto type = call.String("type"); type && *type != "function") {
      InvalidField(call.Path("type"), Cat({"'", call.Path("type"), "' must be \"function\""}));
    }
    const Json* fn = call.Object("function");
    if (!fn) {
      InvalidField(call.Path("function"), Cat({"'", call.Path("function"), "' is required"}),
                   "missing_required_parameter");
    }
    FieldReader f(*fn, call.Path("function"));
    (void)f.RequiredString("name");
    // Arguments are a JSON text (OpenAI) or already an object (some clients); both render.
    if (const Json* args = f.Get("arguments"); args && !args->is_string() && !args->is_object()) {
      InvalidField(f.Path("arguments"),
                   Cat({"'", f.Path("arguments"), "' must be a JSON string or an object"}),
                   "invalid_type");
    } else if (args && args->is_string() && !ArgumentsObject(*args)) {
      InvalidField(f.Path("arguments"),
                   Cat({"'", f.Path("arguments"), "' must be the text of a JSON object"}));
    }
  }
}

void ParseMessages(const FieldReader& body, const ApiLimits& limits,
                   std::vector<content::MediaRef>& media) {
  const Json* messages = &RequireMessages(body, limits);
  static constexpr std::array<std::string_view, 6> kRoles = {"system",    "developer", "user",
                                                             "assistant", "tool",      "function"};
  for (size_t m = 0; m < messages->size(); ++m) {
    FieldReader message((*messages)[m], Index("messages", m));
    const std::string role = message.RequiredString("role");
    if (std::find(kRoles.begin(), kRoles.end(), role) == kRoles.end()) {
      InvalidField(
          message.Path("role"),
          Cat({"'", message.Path("role"),
               "' must be one of system, developer, user, assistant, tool, got \"", role, "\""}));
    }
    (void)message.String("name");
    const Json* content = message.Get("content");
    if (!content) {
      if (role != "assistant") {
        InvalidField(message.Path("content"), Cat({"'", message.Path("content"), "' is required"}),
                     "missing_required_parameter");
      }
    } else if (content->is_array()) {
      ParseContentParts(*content, message.Path("content"), role, media);
    } else if (!content->is_string()) {
      InvalidField(
          message.Path("content"),
          Cat({"'", message.Path("content"), "' must be a string or a list of parts, got "}) +
              std::string(JsonTypeName(*content)),
          "invalid_type");
    }
    if (role == "assistant") {
      ParseToolCalls(message);
      // Earlier turns' reasoning, sent back for the template to render (interleaved thinking):
      // `reasoning_content` (DeepSeek's and vLLM's name) or `reasoning` (OpenRouter's).
      (void)message.String("reasoning_content");
      (void)message.String("reasoning");
    }
    if (role == "tool") (void)message.String("tool_call_id");
  }
  if (media.size() > limits.max_media_items) {
    throw RequestError(ErrorCode::kTooLarge,
                       "the messages hold " + std::to_string(media.size()) +
                           " images and videos, more than the limit of " +
                           std::to_string(limits.max_media_items) + " per request",
                       "messages", "too_many_media_items");
  }
}

Json ParseTools(const FieldReader& body, const ApiLimits& limits) {
  const Json* tools = body.Array("tools");
  if (!tools) return nullptr;
  if (tools->size() > limits.max_tools) {
    throw RequestError(ErrorCode::kTooLarge,
                       "'tools' has " + std::to_string(tools->size()) +
                           " entries, more than the limit of " + std::to_string(limits.max_tools),
                       "tools", "too_many_tools");
  }
  for (size_t i = 0; i < tools->size(); ++i) {
    FieldReader tool((*tools)[i], Index("tools", i));
    if (tool.RequiredString("type") != "function") {
      InvalidField(tool.Path("type"), Cat({"'", tool.Path("type"), "' must be \"function\""}));
    }
    const Json* fn = tool.Object("function");
    if (!fn) {
      InvalidField(tool.Path("function"), Cat({"'", tool.Path("function"), "' is required"}),
                   "missing_required_parameter");
    }
    FieldReader f(*fn, tool.Path("function"));
    if (f.RequiredString("name").empty()) {
      InvalidField(f.Path("name"), Cat({"'", f.Path("name"), "' must not be empty"}));
    }
    (void)f.String("description");
    (void)f.Object("parameters");
    (void)f.Bool("strict");
  }
  return *tools;
}

bool HasTool(const Json& tools, const std::string& name) {
  if (!tools.is_array()) return false;
  for (const Json& t : tools) {
    if (t["function"]["name"] == name) return true;
  }
  return false;
}

ToolChoice ParseToolChoice(const FieldReader& body, const Json& tools, std::string& forced) {
  const Json* choice = body.Get("tool_choice");
  if (!choice) return ToolChoice::kAuto;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "auto") return ToolChoice::kAuto;
    if (c == "none") return ToolChoice::kNone;
    if (c == "required") {
      if (!tools.is_array() || tools.empty()) {
        InvalidField("tool_choice",
                     "'tool_choice' \"required\" needs at least one tool in 'tools'");
      }
      return ToolChoice::kRequired;
    }
    InvalidField("tool_choice",
                 "'tool_choice' must be \"auto\", \"none\", \"required\" or a "
                 "function, got \"" +
                     c + "\"");
  }
  FieldReader r(*choice, "tool_choice");
  if (r.RequiredString("type") != "function") {
    InvalidField("tool_choice.type", "'tool_choice.type' must be \"function\"");
  }
  const Json* fn = r.Object("function");
  if (!fn) {
    InvalidField("tool_choice.function", "'tool_choice.function' is required",
                 "missing_required_parameter");
  }
  const std::string name = FieldReader(*fn, "tool_choice.function").RequiredString("name");
  if (!HasTool(tools, name)) {
    throw RequestError(
        ErrorCode::kUnprocessable,
        "'tool_choice' names the function '" + name + "', which is not among the request's tools",
        "tool_choice.function.name", "unknown_tool");
  }
  forced = name;
  return ToolChoice::kRequired;
}

// The assistant turns of the history as templates read them, the way vLLM hands them over:
// the reasoning in `reasoning_content` (also when sent as `reasoning`), and each tool call's
// arguments as an object (templates iterate them: MiniMax's render each as a parameter).
void PrepareAssistantTurns(Json& messages) {
  for (Json& m : messages) {
    if (m.value("role", "") != "assistant") continue;
    if (const auto reasoning = m.find("reasoning");
        reasoning != m.end() && reasoning->is_string()) {
      const auto content = m.find("reasoning_content");
      if (content == m.end() || content->is_null()) m["reasoning_content"] = *reasoning;
    }
    const auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (Json& call : *calls) {
      const auto fn = call.find("function");
      if (fn == call.end() || !fn->is_object()) continue;
      const auto args = fn->find("arguments");
      if (args != fn->end() && args->is_string()) *args = *ArgumentsObject(*args);
    }
  }
}

}  // namespace

const Json& RequireMessages(const FieldReader& body, const ApiLimits& limits) {
  const Json* messages = body.Array("messages");
  if (!messages) {
    InvalidField("messages", "'messages' is required", "missing_required_parameter");
  }
  if (messages->empty()) InvalidField("messages", "'messages' must not be empty");
  if (messages->size() > limits.max_messages) {
    throw RequestError(ErrorCode::kTooLarge,
                       "'messages' has " + std::to_string(messages->size()) +
                           " messages, more than the limit of " +
                           std::to_string(limits.max_messages),
                       "messages", "too_many_messages");
  }
  return *messages;
}

text::PromptInput ChatRequest::ToPromptInput(const Json& default_kwargs) const {
  text::PromptInput in;
  in.messages = messages;
  in.tools = tools;
  in.add_generation_prompt = add_generation_prompt;
  in.extra_context = MergeChatTemplateKwargs(default_kwargs, chat_template_kwargs);
  return in;
}

ChatRequest ParseChatRequest(const Json& body_json, const ServedModel& model,
                             const ApiLimits& limits) {
  const FieldReader body(body_json, "");
  ChatRequest req;
  req.model = ParseModel(body, model);
  ParseMessages(body, limits, req.media);
  req.messages = body_json["messages"];
  PrepareAssistantTurns(req.messages);
  req.tools = ParseTools(body, limits);
  req.tool_choice = ParseToolChoice(body, req.tools, req.forced_tool);
  if (req.tool_choice == ToolChoice::kNone) req.tools = nullptr;
  req.parallel_tool_calls = body.Bool("parallel_tool_calls").value_or(true);
  if (const Json* kwargs = body.Object("chat_template_kwargs")) {
    CheckChatTemplateKwargs(*kwargs, "chat_template_kwargs");
    req.chat_template_kwargs = *kwargs;
  }
  if (auto v = body.Bool("add_generation_prompt")) req.add_generation_prompt = *v;
  RejectUnsupported(body);
  req.sampling = ParseSampling(body, Endpoint::kChatCompletions, model, limits);
  req.sampling.structured = ParseStructuredOutput(body);
  if (req.tool_choice == ToolChoice::kRequired && req.sampling.structured) {
    InvalidField(req.sampling.structured->param,
                 "'" + req.sampling.structured->param +
                     "' cannot be combined with a forced tool call (tool_choice)");
  }
  req.stream = ParseStreamOptions(body);
  (void)body.String("user");
  return req;
}

}  // namespace m3::openai
