// PromptBuilder: turns an OpenAI-style chat request (messages whose content may mix text,
// image_url and video_url parts, optional tools) into the prompt token ids for a vision-language
// model. The chat template is rendered with each media part replaced by a unique sentinel text
// part (templates such as MiniMax-M2's drop non-text parts, others render them their own way),
// the sentinel is replaced by that item's placeholder run (computed by the caller from the
// vision processor), and the text is tokenized in one piece, as the reference processor does.
// Each item's placeholder tokens are then located in the ids and checked against its count.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/template/chat_template.h"
#include "gateway/tokenizer/tokenizer.h"

namespace m3::text {

enum class MediaKind { kImage, kVideo };
std::string_view MediaKindName(MediaKind kind);  // "image", "video"

// A media part of the messages, in order of appearance (messages in order, parts in order).
struct MediaPart {
  MediaKind kind;
  std::string url;  // image_url.url / video_url.url (HF-style parts: "image"/"video"/"url")
  size_t message_index = 0;
  size_t part_index = 0;
};

// Lists the media parts: {"type":"image_url","image_url":{"url":...}} (or "image_url": "..."),
// {"type":"video_url","video_url":{"url":...}}, and HF-style {"type":"image"|"video", ...}.
// Throws m3::Error(kInvalidArgument) for a media part without a URL.
std::vector<MediaPart> FindMediaParts(const nlohmann::ordered_json& messages);

// What one media item becomes in the prompt, from the vision processor.
struct MediaExpansion {
  MediaKind kind;
  std::string text;  // e.g. "]<]start of image[>[" + "]<]image[>[" x N + "]<]end of image[>["
  size_t num_placeholders;  // N: the placeholder tokens the vision tower fills for this item
};

// Model-specific names of the placeholder tokens (defaults: MiniMax-M3).
struct PlaceholderTokens {
  std::string image = "]<]image[>[";
  std::string video = "]<]video[>[";
};

struct MediaSpan {
  MediaKind kind;
  size_t begin = 0;  // [begin, end): first placeholder token to one past the last, in ids
  size_t end = 0;
  size_t num_placeholders = 0;
  // Contiguous placeholder runs: one for an image, one per temporal group of a video.
  std::vector<std::pair<size_t, size_t>> runs;
};

// How message content reaches the template. Templates written for multimodal parts walk the
// content list; text-only templates (Qwen3, Llama, DeepSeek, ...) expect a string, so list
// content is joined into one: text parts (media sentinels included) separated by "\n", the
// way vLLM flattens content for such templates.
enum class ContentFormat { kParts, kString };

// kParts when the template source reads the "text" field of content parts (`.text`,
// `['text']`), else kString.
ContentFormat DetectContentFormat(std::string_view template_source);

struct PromptInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null, or the request's tools list
  bool add_generation_prompt = true;
  // Further template variables (chat_template_kwargs, bos_token, eos_token, ...).
  nlohmann::ordered_json extra_context = nlohmann::ordered_json::object();
};

struct AssembledPrompt {
  std::string text;  // the rendered prompt with media expanded
  std::vector<int32_t> ids;
  std::vector<MediaSpan> media;  // per media item, in order of appearance
};

class PromptBuilder {
 public:
  PromptBuilder(tmpl::ChatTemplate chat_template, tok::Tokenizer tokenizer,
                PlaceholderTokens placeholders = {},
                ContentFormat content_format = ContentFormat::kParts);

  // `media` holds one expansion per media part of input.messages, in order of appearance.
  // Throws m3::Error: kInvalidArgument (media count or kinds do not match the messages, text
  // that itself contains placeholder tokens), kUnprocessable (an item's placeholder tokens are
  // missing or do not match its count; the message names the item), template errors as
  // ChatTemplate::Render throws them.
  AssembledPrompt Build(const PromptInput& input, std::span<const MediaExpansion> media) const;

 private:
  tmpl::ChatTemplate template_;
  tok::Tokenizer tokenizer_;
  PlaceholderTokens placeholders_;
  ContentFormat content_format_;
};

}  // namespace m3::text
