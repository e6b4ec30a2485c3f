// PromptBuilder: turns an OpenAI-style chat request (messages whose content may mix text,
// image_url and video_url parts, optional tools) into the prompt token ids for a vision-language
// model. Media reach the chat template in one of two ways (MediaRendering): templates that
// write the model's placeholder token themselves (MiniMax-M3's, as HF processors expect) get
// each part as {"type": "image"} / {"type": "video"} and every placeholder token they write is
// replaced by its item's run, in order, as MiniMaxM3VLProcessor does; other templates (e.g.
// MiniMax-M2's, which drops non-text parts) get a unique sentinel text part that is replaced
// by the run. The runs are computed by the caller from the vision processor. The text is then
// tokenized in one piece, as the reference processor does, and each item's placeholder tokens
// are located in the ids and checked against its count.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/content/media_kind.h"
#include "gateway/template/chat_template.h"
#include "gateway/tokenizer/tokenizer.h"
#include "gateway/tokenizer/tokenizer_config.h"

namespace m3::text {

// A media part of the messages, in order of appearance (messages in order, parts in order).
struct MediaPart {
  content::MediaKind kind;
  std::string url;  // image_url.url / video_url.url (HF-style parts: "image"/"video"/"url")
  size_t message_index = 0;
  size_t part_index = 0;
};

// Lists the media parts as content::ReadContentPart reads them: OpenAI image_url / video_url
// parts and the Hugging Face processor's {"type": "image" | "video", ...}. Throws
// m3::Error(kInvalidArgument) for a media part without a URL.
std::vector<MediaPart> FindMediaParts(const nlohmann::ordered_json& messages);

// What one media item becomes in the prompt, from the vision processor.
struct MediaExpansion {
  content::MediaKind kind;
  std::string text;  // e.g. "]<]start of image[>[" + "]<]image[>[" x N + "]<]end of image[>["
  size_t num_placeholders;  // N: the placeholder tokens the vision tower fills for this item
};

// Model-specific names of the placeholder tokens (defaults: MiniMax-M3).
struct PlaceholderTokens {
  std::string image = "]<]image[>[";
  std::string video = "]<]video[>[";
};

struct MediaSpan {
  content::MediaKind kind;
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

// How media parts reach the template (see the top of this file).
enum class MediaRendering { kSentinel, kTemplate };

// kTemplate when the template source itself holds a placeholder token (it writes them for its
// media parts), else kSentinel.
MediaRendering DetectMediaRendering(std::string_view template_source,
                                    const PlaceholderTokens& placeholders);

struct PromptBuilderOptions {
  PlaceholderTokens placeholders;
  ContentFormat content_format = ContentFormat::kParts;
  MediaRendering media_rendering = MediaRendering::kSentinel;
  // Template globals every render gets (the tokenizer's bos_token, eos_token, ...); a
  // request's extra_context overrides them, as apply_chat_template's kwargs do.
  nlohmann::ordered_json template_variables = nlohmann::ordered_json::object();
};

struct PromptInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null, or the request's tools list
  bool add_generation_prompt = true;
  // Further template variables (chat_template_kwargs, bos_token, eos_token, ...).
  nlohmann::ordered_json extra_context = nlohmann::ordered_json::object();
};

struct AssembledPrompt {
  // The rendered prompt before media expansion, one placeholder token per item: what
  // apply_chat_template returns (in sentinel mode each sentinel is shown as the placeholder).
  std::string rendered;
  std::string text;  // the rendered prompt with media expanded
  std::vector<int32_t> ids;
  std::vector<MediaSpan> media;  // per media item, in order of appearance
  // Build's max_ids was passed: `ids` is a prefix of more than max_ids ids, `media` is empty.
  bool over_max_ids = false;
};

class PromptBuilder {
 public:
  PromptBuilder(tmpl::ChatTemplate chat_template, tok::Tokenizer tokenizer,
                PlaceholderTokens placeholders = {},
                ContentFormat content_format = ContentFormat::kParts);
  PromptBuilder(tmpl::ChatTemplate chat_template, tok::Tokenizer tokenizer,
                PromptBuilderOptions options);

  // Everything from a Hugging Face model directory (transformers 4 or 5 layout): tokenizer.json
  // with tokenizer_config.json's added tokens, its special tokens as template variables, the
  // chat template (LoadChatTemplateSource), and the content format and media rendering the
  // template calls for. Throws m3::Error naming the file for anything missing or malformed.
  static PromptBuilder FromModelDir(const std::string& model_dir,
                                    PlaceholderTokens placeholders = {});

  // `media` holds one expansion per media part of input.messages, in order of appearance.
  // Throws m3::Error: kInvalidArgument (media count or kinds do not match the messages, text
  // that itself contains placeholder tokens), kUnprocessable (an item's placeholder tokens are
  // missing or do not match its count; the message names the item), template errors as
  // ChatTemplate::Render throws them.
  // `max_ids`: tokenizing stops soon after the prompt passes this many tokens (over_max_ids), so
  // a prompt far over the model's context costs its rendering, not a whole tokenization.
  AssembledPrompt Build(const PromptInput& input, std::span<const MediaExpansion> media,
                        size_t max_ids = SIZE_MAX) const;

  const tok::Tokenizer& tokenizer() const { return tokenizer_; }
  const PromptBuilderOptions& options() const { return options_; }
  // Set by FromModelDir (empty otherwise).
  const tok::SpecialTokens& special_tokens() const { return special_tokens_; }

 private:
  tmpl::ChatTemplate template_;
  tok::Tokenizer tokenizer_;
  PromptBuilderOptions options_;
  tok::SpecialTokens special_tokens_;
};

}  // namespace m3::text
