// Validation of chat completion bodies (see chat_request.h).
#include "gateway/openai/chat_request.h"

#include <algorithm>
#include <array>

namespace m3::openai {
namespace {

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

ImageDetail ParseDetail(const FieldReader& image) {
  auto detail = image.String("detail");
  if (!detail || *detail == "auto") return ImageDetail::kAuto;
  if (*detail == "low") return ImageDetail::kLow;
  if (*detail == "high") return ImageDetail::kHigh;
  InvalidField(image.Path("detail"), "'" + image.Path("detail") +
                                         "' must be \"auto\", \"low\" or \"high\", got \"" +
                                         *detail + "\"");
}

std::string ParseUrl(const Json& part, const std::string& path, const char* key) {
  const Json& value = part[key];
  if (value.is_string()) {  // the shorthand some clients send: "image_url": "https://..."
    if (value.get<std::string>().empty()) InvalidField(path, "'" + path + "' must not be empty");
    return value.get<std::string>();
  }
  FieldReader r(value, path);
  std::string url = r.RequiredString("url");
  if (url.empty()) InvalidField(r.Path("url"), "'" + r.Path("url") + "' must not be empty");
  return url;
}

void ParseContentParts(const Json& parts, const std::string& path, const std::string& role,
                       std::vector<MediaRef>& media) {
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string part_path = Index(path, i);
    FieldReader part(parts[i], part_path);
    const std::string type = part.RequiredString("type");
    if (type == "text") {
      (void)part.RequiredString("text");
      continue;
    }
    const bool image = type == "image_url";
    const bool video = type == "video_url";
    if (!image && !video) {
      InvalidField(part.Path("type"), "'" + part.Path("type") +
                                          "' must be \"text\", \"image_url\" or " +
                                          "\"video_url\", got \"" + type + "\"");
    }
    if (role != "user") {
      InvalidField(part.Path("type"), "'" + part.Path("type") + "': " + type +
                                          " parts are allowed in user messages only");
    }
    const char* key = image ? "image_url" : "video_url";
    const std::string media_path = part.Path(key);
    if (!part.Has(key)) {
      InvalidField(media_path, "'" + media_path + "' is required", "missing_required_parameter");
    }
    MediaRef ref;
    ref.kind = image ? text::MediaKind::kImage : text::MediaKind::kVideo;
    ref.url = ParseUrl(parts[i], media_path, key);
    ref.param = parts[i][key].is_string() ? media_path : media_path + ".url";
    if (image && parts[i][key].is_object())
      ref.detail = ParseDetail(FieldReader(parts[i][key], media_path));
    media.push_back(std::move(ref));
  }
}

void ParseToolCalls(const FieldReader& message) {
  const Json* calls = message.Array("tool_calls");
  if (!calls) return;
  const std::string path = message.Path("tool_calls");
  for (size_t i = 0; i < calls->size(); ++i) {
    FieldReader call((*calls)[i], Index(path, i));
    (void)call.String("id");
    if (auto type = call.String("type"); type && *type != "function") {
      InvalidField(call.Path("type"), "'" + call.Path("type") + "' must be \"function\"");
    }
    const Json* fn = call.Object("function");
    if (!fn) {
      InvalidField(call.Path("function"), "'" + call.Path("function") + "' is required",
                   "missing_required_parameter");
    }
    FieldReader f(*fn, call.Path("function"));
    (void)f.RequiredString("name");
    // Arguments are a JSON text (OpenAI) or already an object (some clients); both render.
    if (const Json* args = f.Get("arguments"); args && !args->is_string() && !args->is_object()) {
      InvalidField(f.Path("arguments"),
                   "'" + f.Path("arguments") + "' must be a JSON string or an object",
                   "invalid_type");
    }
  }
}

void ParseMessages(const FieldReader& body, const ApiLimits& limits, std::vector<MediaRef>& media) {
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
  static constexpr std::array<std::string_view, 6> kRoles = {"system",    "developer", "user",
                                                             "assistant", "tool",      "function"};
  for (size_t m = 0; m < messages->size(); ++m) {
    FieldReader message((*messages)[m], Index("messages", m));
    const std::string role = message.RequiredString("role");
    if (std::find(kRoles.begin(), kRoles.end(), role) == kRoles.end()) {
      InvalidField(message.Path("role"), "'" + message.Path("role") +
                                             "' must be one of system, developer, user, " +
                                             "assistant, tool, got \"" + role + "\"");
    }
    (void)message.String("name");
    const Json* content = message.Get("content");
    if (!content) {
      if (role != "assistant") {
        InvalidField(message.Path("content"), "'" + message.Path("content") + "' is required",
                     "missing_required_parameter");
      }
    } else if (content->is_array()) {
      ParseContentParts(*content, message.Path("content"), role, media);
    } else if (!content->is_string()) {
      InvalidField(message.Path("content"),
                   "'" + message.Path("content") + "' must be a string or a list of parts, got " +
                       std::string(JsonTypeName(*content)),
                   "invalid_type");
    }
    if (role == "assistant") {
      ParseToolCalls(message);
      (void)message.String("reasoning_content");
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
      InvalidField(tool.Path("type"), "'" + tool.Path("type") + "' must be \"function\"");
    }
    const Json* fn = tool.Object("function");
    if (!fn) {
      InvalidField(tool.Path("function"), "'" + tool.Path("function") + "' is required",
                   "missing_required_parameter");
    }
    FieldReader f(*fn, tool.Path("function"));
    if (f.RequiredString("name").empty()) {
      InvalidField(f.Path("name"), "'" + f.Path("name") + "' must not be empty");
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

// Without constrained decoding the model cannot be made to call a tool.
[[noreturn]] void CannotForce(const std::string& what) {
  InvalidField("tool_choice",
               "'tool_choice' " + what +
                   " is not supported: forcing a tool call needs constrained decoding; use "
                   "\"auto\" or \"none\"",
               "unsupported_value");
}

ToolChoice ParseToolChoice(const FieldReader& body, const Json& tools) {
  const Json* choice = body.Get("tool_choice");
  if (!choice) return ToolChoice::kAuto;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "auto") return ToolChoice::kAuto;
    if (c == "none") return ToolChoice::kNone;
    if (c == "required") CannotForce("\"required\"");
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
  CannotForce("naming a function");
}

}  // namespace

text::PromptInput ChatRequest::ToPromptInput() const {
  text::PromptInput in;
  in.messages = messages;
  in.tools = tools;
  in.add_generation_prompt = add_generation_prompt;
  in.extra_context = chat_template_kwargs;
  return in;
}

ChatRequest ParseChatRequest(const Json& body_json, const ServedModel& model,
                             const ApiLimits& limits) {
  const FieldReader body(body_json, "");
  ChatRequest req;
  req.model = ParseModel(body, model);
  ParseMessages(body, limits, req.media);
  req.messages = body_json["messages"];
  req.tools = ParseTools(body, limits);
  req.tool_choice = ParseToolChoice(body, req.tools);
  if (req.tool_choice == ToolChoice::kNone) req.tools = nullptr;
  (void)body.Bool("parallel_tool_calls");
  if (const Json* kwargs = body.Object("chat_template_kwargs")) req.chat_template_kwargs = *kwargs;
  if (auto v = body.Bool("add_generation_prompt")) req.add_generation_prompt = *v;
  RejectUnsupported(body);
  req.sampling = ParseSampling(body, Endpoint::kChatCompletions, model, limits);
  req.stream = ParseStreamOptions(body);
  (void)body.String("user");
  return req;
}

}  // namespace m3::openai
