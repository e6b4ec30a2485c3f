// Anthropic Messages bodies -> the internal chat request (see messages_request.h).
#include "gateway/anthropic/messages_request.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>
#include <vector>

namespace m3::anthropic {
namespace {

using openai::Cat;
using openai::FieldReader;
using openai::InvalidField;
using openai::JsonTypeName;
using openai::RequestError;

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
// Anthropic's own floor for a thinking budget; clients written for it send at least this.
constexpr int64_t kMinThinkingBudget = 1024;

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::string Quoted(const std::string& param) {
  return Cat({"'", param, "'"});
}

[[noreturn]] void Missing(const std::string& param) {
  InvalidField(param, Quoted(param) + " is required", "missing_required_parameter");
}

[[noreturn]] void Unsupported(const std::string& param, const std::string& why) {
  InvalidField(param, Cat({Quoted(param), " is not supported: ", why}), "unsupported_value");
}

// The block's "type", which every content block must have.
std::string BlockType(const FieldReader& block) {
  return block.RequiredString("type");
}

std::string TextOf(const FieldReader& block) {
  const Json* text = block.Get("text");
  if (!text) Missing(block.Path("text"));
  if (!text->is_string()) {
    InvalidField(block.Path("text"),
                 Cat({Quoted(block.Path("text")), " must be a string, got ", JsonTypeName(*text)}),
                 "invalid_type");
  }
  return text->get<std::string>();
}

Json TextPart(const FieldReader& block) {
  return {{"type", "text"}, {"text", TextOf(block)}};
}

// An image block -> an OpenAI image_url part (base64 sources as a data: URI, which the media
// stage decodes); its media item is appended, naming the Anthropic field for later errors.
Json ImagePart(const FieldReader& block, std::vector<content::MediaRef>& media) {
  static constexpr std::array<std::string_view, 4> kTypes = {"image/jpeg", "image/png", "image/gif",
                                                             "image/webp"};
  const Json* source = block.Object("source");
  if (!source) Missing(block.Path("source"));
  const FieldReader s(*source, block.Path("source"));
  const std::string type = s.RequiredString("type");
  content::MediaRef ref;
  ref.kind = content::MediaKind::kImage;
  if (type == "base64") {
    const std::string media_type = s.RequiredString("media_type");
    if (std::find(kTypes.begin(), kTypes.end(), media_type) == kTypes.end()) {
      InvalidField(s.Path("media_type"),
                   Cat({Quoted(s.Path("media_type")),
                        " must be image/jpeg, image/png, image/gif or image/webp, got \"",
                        media_type, "\""}));
    }
    const std::string data = s.RequiredString("data");
    if (data.empty()) InvalidField(s.Path("data"), Quoted(s.Path("data")) + " must not be empty");
    ref.url = Cat({"data:", media_type, ";base64,", data});
    ref.param = s.Path("data");
  } else if (type == "url") {
    ref.url = s.RequiredString("url");
    if (ref.url.empty()) InvalidField(s.Path("url"), Quoted(s.Path("url")) + " must not be empty");
    ref.param = s.Path("url");
  } else {
    InvalidField(s.Path("type"), Cat({Quoted(s.Path("type")),
                                      " must be \"base64\" or \"url\", got \"", type, "\""}));
  }
  Json part = {{"type", "image_url"}, {"image_url", {{"url", ref.url}}}};
  media.push_back(std::move(ref));
  return part;
}

[[noreturn]] void WrongBlock(const std::string& type_path, const std::string& type,
                             std::string_view allowed) {
  InvalidField(type_path,
               Cat({Quoted(type_path), " must be ", allowed, " here, got \"", type, "\""}));
}

// An image block of a tool result and its path.
using ImageBlock = std::pair<const Json*, std::string>;

// tool_result -> a "tool" message with its text (a string or text blocks). Its images go to
// `images`: chat templates take images in user turns (the OpenAI path accepts them nowhere
// else), so they follow the tool results in the user message.
Json ToolMessage(const FieldReader& block, std::vector<ImageBlock>& images) {
  Json message = {{"role", "tool"}, {"tool_call_id", block.RequiredString("tool_use_id")}};
  (void)block.Bool("is_error");
  const Json* content = block.Get("content");
  if (!content) {
    message["content"] = "";
  } else if (content->is_string()) {
    message["content"] = *content;
  } else if (content->is_array()) {
    const std::string path = block.Path("content");
    Json parts = Json::array();
    for (size_t i = 0; i < content->size(); ++i) {
      const FieldReader part((*content)[i], Index(path, i));
      const std::string type = BlockType(part);
      if (type == "text") {
        parts.push_back(TextPart(part));
      } else if (type == "image") {
        images.emplace_back(&(*content)[i], Index(path, i));
      } else {
        WrongBlock(part.Path("type"), type, "\"text\" or \"image\"");
      }
    }
    message["content"] = parts.empty() ? Json("") : std::move(parts);
  } else {
    InvalidField(block.Path("content"),
                 Cat({Quoted(block.Path("content")), " must be a string or a list of blocks, got ",
                      JsonTypeName(*content)}),
                 "invalid_type");
  }
  return message;
}

// A user turn: its tool results first (they answer the assistant's calls just before), then one
// user message with the tool results' images and the turn's own text and images, if any.
void AddUserTurn(const Json& content, const std::string& path, Json& messages,
                 std::vector<content::MediaRef>& media) {
  if (content.is_string()) {
    messages.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  std::vector<ImageBlock> tool_images;
  for (size_t i = 0; i < content.size(); ++i) {
    const FieldReader block(content[i], Index(path, i));
    const std::string type = BlockType(block);
    if (type == "tool_result") {
      messages.push_back(ToolMessage(block, tool_images));
    } else if (type != "text" && type != "image") {
      WrongBlock(block.Path("type"), type, "\"text\", \"image\" or \"tool_result\"");
    }
  }
  Json parts = Json::array();
  for (const auto& [image, image_path] : tool_images) {
    parts.push_back(ImagePart(FieldReader(*image, image_path), media));
  }
  for (size_t i = 0; i < content.size(); ++i) {
    const FieldReader block(content[i], Index(path, i));
    const std::string type = BlockType(block);
    if (type == "text") parts.push_back(TextPart(block));
    if (type == "image") parts.push_back(ImagePart(block, media));
  }
  if (!parts.empty()) messages.push_back({{"role", "user"}, {"content", std::move(parts)}});
}

// An assistant turn: text blocks joined as content, thinking as reasoning_content (rendered
// back for interleaved thinking), tool_use as tool calls with their input object as arguments.
void AddAssistantTurn(const Json& content, const std::string& path, Json& messages) {
  Json message = {{"role", "assistant"}};
  if (content.is_string()) {
    message["content"] = content;
    messages.push_back(std::move(message));
    return;
  }
  std::string text, reasoning;
  Json calls = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const FieldReader block(content[i], Index(path, i));
    const std::string type = BlockType(block);
    if (type == "text") {
      text += TextOf(block);
    } else if (type == "thinking") {
      const std::string thinking = block.RequiredString("thinking");
      (void)block.String("signature");
      if (!reasoning.empty() && !thinking.empty()) reasoning += "\n";
      reasoning += thinking;
    } else if (type == "redacted_thinking") {
      (void)block.String("data");  // opaque to this server: nothing to render
    } else if (type == "tool_use") {
      const std::string id = block.RequiredString("id");
      const std::string name = block.RequiredString("name");
      if (name.empty())
        InvalidField(block.Path("name"), Quoted(block.Path("name")) + " must not be empty");
      const Json* input = block.Object("input");
      if (!input) Missing(block.Path("input"));
      calls.push_back({{"id", id},
                       {"type", "function"},
                       {"function", {{"name", name}, {"arguments", *input}}}});
    } else {
      WrongBlock(block.Path("type"), type,
                 "\"text\", \"thinking\", \"redacted_thinking\" or \"tool_use\"");
    }
  }
  message["content"] = text;
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  messages.push_back(std::move(message));
}

std::string SystemText(const FieldReader& body) {
  const Json* system = body.Get("system");
  if (!system) return {};
  if (system->is_string()) return system->get<std::string>();
  if (!system->is_array()) {
    InvalidField(
        "system",
        Cat({"'system' must be a string or a list of text blocks, got ", JsonTypeName(*system)}),
        "invalid_type");
  }
  std::string text;
  for (size_t i = 0; i < system->size(); ++i) {
    const FieldReader block((*system)[i], Index("system", i));
    const std::string type = BlockType(block);
    if (type != "text") WrongBlock(block.Path("type"), type, "\"text\"");
    if (i > 0) text += "\n";
    text += TextOf(block);
  }
  return text;
}

Json ParseMessages(const FieldReader& body, const openai::ApiLimits& limits,
                   MessagesEndpoint endpoint, std::vector<content::MediaRef>& media) {
  const Json* messages = &openai::RequireMessages(body, limits);
  Json out = Json::array();
  if (std::string system = SystemText(body); !system.empty()) {
    out.push_back({{"role", "system"}, {"content", std::move(system)}});
  }
  for (size_t m = 0; m < messages->size(); ++m) {
    const FieldReader message((*messages)[m], Index("messages", m));
    const std::string role = message.RequiredString("role");
    if (role != "user" && role != "assistant") {
      InvalidField(message.Path("role"),
                   Cat({Quoted(message.Path("role")), " must be \"user\" or \"assistant\", got \"",
                        role, "\""}));
    }
    const Json* content = message.Get("content");
    const std::string path = message.Path("content");
    if (!content) Missing(path);
    if (!content->is_string() && !content->is_array()) {
      InvalidField(path,
                   Cat({Quoted(path), " must be a string or a list of blocks, got ",
                        JsonTypeName(*content)}),
                   "invalid_type");
    }
    if (content->is_array() && content->empty()) {
      InvalidField(path, Quoted(path) + " must not be empty");
    }
    if (role == "user") {
      AddUserTurn(*content, path, out, media);
    } else {
      // Continuing a final assistant message (prefill) needs the template to leave it open,
      // which the chat templates here cannot do; refusing beats answering a different question.
      if (m + 1 == messages->size() && endpoint == MessagesEndpoint::kCreate) {
        Unsupported(message.Path("role"),
                    "the last message must be a user message (continuing a final assistant "
                    "message is not supported)");
      }
      AddAssistantTurn(*content, path, out);
    }
  }
  if (media.size() > limits.max_media_items) {
    throw RequestError(ErrorCode::kTooLarge,
                       "the messages hold " + std::to_string(media.size()) +
                           " images, more than the limit of " +
                           std::to_string(limits.max_media_items) + " per request",
                       "messages", "too_many_media_items");
  }
  return out;
}

Json ParseTools(const FieldReader& body, const openai::ApiLimits& limits) {
  const Json* tools = body.Array("tools");
  if (!tools) return nullptr;
  if (tools->size() > limits.max_tools) {
    throw RequestError(ErrorCode::kTooLarge,
                       "'tools' has " + std::to_string(tools->size()) +
                           " entries, more than the limit of " + std::to_string(limits.max_tools),
                       "tools", "too_many_tools");
  }
  Json out = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const FieldReader tool((*tools)[i], Index("tools", i));
    if (auto type = tool.String("type"); type && *type != "custom") {
      Unsupported(tool.Path("type"), "server tools (\"" + *type +
                                         "\") do not run here; give client tools with a name "
                                         "and an input_schema");
    }
    const std::string name = tool.RequiredString("name");
    if (name.empty())
      InvalidField(tool.Path("name"), Quoted(tool.Path("name")) + " must not be empty");
    Json fn = {{"name", name}};
    if (auto description = tool.String("description")) fn["description"] = *description;
    const Json* schema = tool.Object("input_schema");
    if (!schema) Missing(tool.Path("input_schema"));
    fn["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

bool HasTool(const Json& tools, const std::string& name) {
  if (!tools.is_array()) return false;
  return std::any_of(tools.begin(), tools.end(),
                     [&](const Json& t) { return t["function"]["name"] == name; });
}

openai::ToolChoice ParseToolChoice(const FieldReader& body, openai::ChatRequest& req) {
  const Json* choice = body.Object("tool_choice");
  if (!choice) return openai::ToolChoice::kAuto;
  const FieldReader r(*choice, "tool_choice");
  if (r.Bool("disable_parallel_tool_use").value_or(false)) req.parallel_tool_calls = false;
  const std::string type = r.RequiredString("type");
  if (type == "auto") return openai::ToolChoice::kAuto;
  if (type == "none") return openai::ToolChoice::kNone;
  if (type == "any" || type == "tool") {
    if (!req.tools.is_array() || req.tools.empty()) {
      InvalidField("tool_choice", "'tool_choice' \"" + type + "\" needs at least one tool");
    }
  }
  if (type == "any") return openai::ToolChoice::kRequired;
  if (type == "tool") {
    const std::string name = r.RequiredString("name");
    if (!HasTool(req.tools, name)) {
      throw RequestError(ErrorCode::kUnprocessable,
                         "'tool_choice.name' names the tool '" + name +
                             "', which is not among the request's tools",
                         "tool_choice.name", "unknown_tool");
    }
    req.forced_tool = name;
    return openai::ToolChoice::kRequired;
  }
  InvalidField(
      "tool_choice.type",
      "'tool_choice.type' must be \"auto\", \"any\", \"tool\" or \"none\", got \"" + type + "\"");
}

std::optional<bool> ParseThinking(const FieldReader& body, std::optional<int64_t> max_tokens) {
  const Json* thinking = body.Object("thinking");
  if (!thinking) return std::nullopt;
  const FieldReader r(*thinking, "thinking");
  const std::string type = r.RequiredString("type");
  if (type == "disabled") return false;
  if (type != "enabled") {
    InvalidField("thinking.type",
                 "'thinking.type' must be \"enabled\" or \"disabled\", got \"" + type + "\"");
  }
  // The budget is checked as Anthropic checks it; the model's template decides how long it
  // thinks (it has no budget control), and max_tokens bounds the whole answer.
  const auto budget = r.Int("budget_tokens", kMinThinkingBudget, kMaxInt32);
  if (!budget) Missing("thinking.budget_tokens");
  if (max_tokens && *budget >= *max_tokens) {
    InvalidField("thinking.budget_tokens", "'thinking.budget_tokens' (" + std::to_string(*budget) +
                                               ") must be less than max_tokens (" +
                                               std::to_string(*max_tokens) + ")");
  }
  return true;
}

// Anthropic's sampling fields, checked under their own names and ranges, then read by the
// OpenAI path's sampling parser (which adds the model's generation_config defaults).
openai::SamplingRequest ParseSampling(const FieldReader& body, const openai::ServedModel& model,
                                      const openai::ApiLimits& limits) {
  Json s = Json::object();
  const auto max_tokens = body.Int("max_tokens", 1, kMaxInt32);
  if (!max_tokens) Missing("max_tokens");
  s["max_tokens"] = *max_tokens;
  if (auto v = body.Number("temperature", 0.0, 1.0)) s["temperature"] = *v;
  if (auto v = body.Number("top_p", 0.0, 1.0, /*min_exclusive=*/true)) s["top_p"] = *v;
  if (auto v = body.Int("top_k", 0, kMaxInt32)) s["top_k"] = *v;
  if (const Json* stops = body.Array("stop_sequences")) {
    if (stops->size() > limits.max_stop_strings) {
      InvalidField("stop_sequences", "'stop_sequences' has " + std::to_string(stops->size()) +
                                         " strings, more than the limit of " +
                                         std::to_string(limits.max_stop_strings));
    }
    for (size_t i = 0; i < stops->size(); ++i) {
      const std::string param = Index("stop_sequences", i);
      const Json& stop = (*stops)[i];
      if (!stop.is_string()) {
        InvalidField(param, Cat({Quoted(param), " must be a string, got ", JsonTypeName(stop)}),
                     "invalid_type");
      }
      if (stop.get_ref<const std::string&>().empty()) {
        InvalidField(param, Quoted(param) + " must not be an empty string");
      }
      if (stop.get_ref<const std::string&>().size() > limits.max_stop_string_bytes) {
        InvalidField(param, Quoted(param) + " is longer than " +
                                std::to_string(limits.max_stop_string_bytes) + " bytes");
      }
    }
    if (!stops->empty()) s["stop"] = *stops;
  }
  return openai::ParseSampling(FieldReader(s, ""), openai::Endpoint::kChatCompletions, model,
                               limits);
}

}  // namespace

MessagesRequest ParseMessagesRequest(const Json& body_json, const openai::ServedModel& model,
                                     const openai::ApiLimits& limits, MessagesEndpoint endpoint) {
  const FieldReader body(body_json, "");
  MessagesRequest out;
  openai::ChatRequest& req = out.chat;
  (void)body.RequiredString("model");
  req.model = openai::ParseModel(body, model);
  req.messages = ParseMessages(body, limits, endpoint, req.media);
  req.tools = ParseTools(body, limits);
  req.tool_choice = ParseToolChoice(body, req);
  if (req.tool_choice == openai::ToolChoice::kNone) req.tools = nullptr;
  if (endpoint == MessagesEndpoint::kCreate) {
    req.sampling = ParseSampling(body, model, limits);
    if (auto stream = body.Bool("stream")) req.stream.stream = *stream;
    if (const Json* metadata = body.Object("metadata")) {
      (void)FieldReader(*metadata, "metadata").String("user_id");
    }
  }
  out.thinking = ParseThinking(body, req.sampling.max_tokens);
  if (out.thinking) {
    req.chat_template_kwargs["thinking_mode"] = *out.thinking ? "enabled" : "disabled";
  }
  return out;
}

}  // namespace m3::anthropic
