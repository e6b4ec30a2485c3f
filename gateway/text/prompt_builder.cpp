// Chat-template rendering with media placeholder runs, tokenization and span checks (see
// prompt_builder.h).
#include "gateway/text/prompt_builder.h"

#include <random>
#include <string_view>
#include <vector>

#include "gateway/content/content_part.h"
#include "shared/error.h"

namespace m3::text {

using content::MediaKind;
using content::MediaKindName;

namespace {

using Json = nlohmann::ordered_json;

// Describes item i for error messages: "media item 2 (video in message 1, part 0)".
std::string Describe(size_t i, const MediaPart& part) {
  return "media item " + std::to_string(i) + " (" + std::string(MediaKindName(part.kind)) +
         " in message " + std::to_string(part.message_index) + ", part " +
         std::to_string(part.part_index) + ")";
}

// Calls fn(part, message_index, part_index, kind) for every media part, in order.
template <typename Json_, typename Fn>
void ForEachMediaPart(Json_& messages, Fn&& fn) {
  if (!messages.is_array()) return;
  for (size_t m = 0; m < messages.size(); ++m) {
    auto& msg = messages[m];
    if (!msg.is_object()) continue;
    auto content = msg.find("content");
    if (content == msg.end() || !content->is_array()) continue;
    for (size_t p = 0; p < content->size(); ++p) {
      auto& part = (*content)[p];
      if (auto kind = content::MediaKindOf(content::ContentPartType(part))) fn(part, m, p, *kind);
    }
  }
}

size_t CountOccurrences(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string_view::npos;
       pos = text.find(what, pos + what.size())) {
    ++n;
  }
  return n;
}

// Contiguous runs of `what` in `text` ("XX.X" has two).
size_t CountRuns(std::string_view text, std::string_view what) {
  size_t runs = 0, prev_end = std::string_view::npos;
  for (size_t pos = text.find(what); pos != std::string_view::npos;
       pos = text.find(what, pos + what.size())) {
    if (pos != prev_end) ++runs;
    prev_end = pos + what.size();
  }
  return runs;
}

// A marker no user text will contain: letters and digits only, so it survives whatever the
// template does to strings (strip, tojson, concatenation).
std::string SentinelNonce() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string s;
  for (int i = 0; i < 16; ++i) s.push_back("0123456789abcdef"[rng() & 15]);
  return s;
}

bool IsIdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Joins list content into a string for text-only templates (see ContentFormat).
void FlattenContent(Json& messages) {
  for (auto& msg : messages) {
    if (!msg.is_object()) continue;
    auto content = msg.find("content");
    if (content == msg.end() || !content->is_array()) continue;
    std::string joined;
    bool first = true;
    for (const auto& part : *content) {
      const Json* text = nullptr;
      if (part.is_string()) text = &part;
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
          part["text"].is_string()) {
        text = &part["text"];
      }
      if (!text) continue;
      if (!first) joined += '\n';
      joined += text->get_ref<const std::string&>();
      first = false;
    }
    *content = std::move(joined);
  }
}

// True when some string in `j` (keys included) contains `what`. Iterative: request JSON may
// nest deeper than the stack allows recursion.
bool ContainsText(const Json& root, std::string_view what) {
  std::vector<const Json*> pending{&root};
  while (!pending.empty()) {
    const Json& j = *pending.back();
    pending.pop_back();
    if (j.is_string() && j.get_ref<const std::string&>().find(what) != std::string::npos) {
      return true;
    }
    if (j.is_object()) {
      for (const auto& [key, value] : j.items()) {
        if (key.find(what) != std::string::npos) return true;
        pending.push_back(&value);
      }
    } else if (j.is_array()) {
      for (const auto& value : j) pending.push_back(&value);
    }
  }
  return false;
}

}  // namespace

MediaRendering DetectMediaRendering(std::string_view source, const PlaceholderTokens& p) {
  const bool writes = (!p.image.empty() && source.find(p.image) != std::string_view::npos) ||
                      (!p.video.empty() && source.find(p.video) != std::string_view::npos);
  return writes ? MediaRendering::kTemplate : MediaRendering::kSentinel;
}

ContentFormat DetectContentFormat(std::string_view source) {
  if (source.find("['text']") != std::string_view::npos ||
      source.find("[\"text\"]") != std::string_view::npos) {
    return ContentFormat::kParts;
  }
  for (size_t pos = source.find(".text"); pos != std::string_view::npos;
       pos = source.find(".text", pos + 1)) {
    size_t after = pos + 5;
    if (after >= source.size() || !IsIdentifierChar(source[after])) return ContentFormat::kParts;
  }
  return ContentFormat::kString;
}

std::vector<MediaPart> FindMediaParts(const Json& messages) {
  std::vector<MediaPart> parts;
  ForEachMediaPart(messages, [&](const Json& part, size_t m, size_t p, MediaKind kind) {
    content::ContentPart read = content::ReadContentPart(part, "");
    // The detail is the API's business; a URL is all prompt assembly needs.
    const bool has_url = !read.defect || read.defect->field == content::PartDefect::Field::kDetail;
    MediaPart mp{kind, has_url ? std::move(read.media.url) : std::string(), m, p};
    Require(has_url, ErrorCode::kInvalidArgument,
            "message " + std::to_string(m) + " content part " + std::to_string(p) + " (" +
                std::string(MediaKindName(kind)) + ") has no url");
    parts.push_back(std::move(mp));
  });
  return parts;
}

PromptBuilder::PromptBuilder(tmpl::ChatTemplate chat_template, tok::Tokenizer tokenizer,
                             PlaceholderTokens placeholders, ContentFormat content_format)
    : PromptBuilder(std::move(chat_template), std::move(tokenizer),
                    PromptBuilderOptions{std::move(placeholders), content_format,
                                         MediaRendering::kSentinel, Json::object()}) {}

PromptBuilder::PromptBuilder(tmpl::ChatTemplate chat_template, tok::Tokenizer tokenizer,
                             PromptBuilderOptions options)
    : template_(std::move(chat_template)),
      tokenizer_(std::move(tokenizer)),
      options_(std::move(options)) {
  Require(options_.template_variables.is_object(), ErrorCode::kInvalidArgument,
          "template variables must be an object");
}

PromptBuilder PromptBuilder::FromModelDir(const std::string& model_dir,
                                          PlaceholderTokens placeholders) {
  const tok::TokenizerConfig config = tok::LoadTokenizerConfig(model_dir);
  tok::Tokenizer tokenizer = tok::LoadModelTokenizer(model_dir, config);
  tok::SpecialTokens special = tok::ResolveSpecialTokens(config, tokenizer);
  const std::string source = tmpl::LoadChatTemplateSource(model_dir);
  PromptBuilderOptions options;
  options.content_format = DetectContentFormat(source);
  options.media_rendering = DetectMediaRendering(source, placeholders);
  options.placeholders = std::move(placeholders);
  options.template_variables = special.TemplateVariables();
  PromptBuilder builder(tmpl::ChatTemplate::Parse(source, model_dir + "/chat template"),
                        std::move(tokenizer), std::move(options));
  builder.special_tokens_ = std::move(special);
  return builder;
}

AssembledPrompt PromptBuilder::Build(const PromptInput& input,
                                     std::span<const MediaExpansion> media, size_t max_ids) const {
  const PlaceholderTokens& placeholders = options_.placeholders;
  const bool template_writes = options_.media_rendering == MediaRendering::kTemplate;
  auto marker_of = [&](MediaKind kind) -> const std::string& {
    return kind == MediaKind::kImage ? placeholders.image : placeholders.video;
  };

  // 1. Replace each media part by what the template gets for it: the HF form
  //    {"type": "image"}, or a text part holding a unique sentinel.
  Json messages = input.messages;
  Require(messages.is_array(), ErrorCode::kInvalidArgument, "messages must be a list");
  const std::string nonce = SentinelNonce();
  auto sentinel = [&](size_t i) { return "M3MEDIA" + nonce + "N" + std::to_string(i) + "E"; };
  std::vector<MediaPart> parts;
  ForEachMediaPart(messages, [&](Json& part, size_t m, size_t p, MediaKind kind) {
    parts.push_back(MediaPart{kind, {}, m, p});
    part = template_writes ? Json{{"type", std::string(MediaKindName(kind))}}
                           : Json{{"type", "text"}, {"text", sentinel(parts.size() - 1)}};
  });
  if (template_writes) {
    // Every placeholder token in the rendered prompt is taken for a media item, so none may
    // come from the request's own text.
    for (const MediaKind kind : {MediaKind::kImage, MediaKind::kVideo}) {
      const std::string& marker = marker_of(kind);
      if (marker.empty()) continue;
      Require(!ContainsText(messages, marker) && !ContainsText(input.tools, marker),
              ErrorCode::kInvalidArgument,
              "message text must not contain the " + std::string(MediaKindName(kind)) +
                  " placeholder token '" + marker + "'");
    }
  }
  Require(parts.size() == media.size(), ErrorCode::kInvalidArgument,
          "the messages have " + std::to_string(parts.size()) + " media parts but " +
              std::to_string(media.size()) + " media expansions were given");

  // Both ids are looked up even without media of that kind: placeholder tokens that come from
  // the text itself must be caught too.
  const std::optional<int32_t> image_id = tokenizer_.TokenToId(placeholders.image);
  const std::optional<int32_t> video_id = tokenizer_.TokenToId(placeholders.video);
  for (size_t i = 0; i < parts.size(); ++i) {
    const MediaExpansion& e = media[i];
    Require(e.kind == parts[i].kind, ErrorCode::kInvalidArgument,
            Describe(i, parts[i]) + " was given a " + std::string(MediaKindName(e.kind)) +
                " expansion");
    const std::string& marker = marker_of(e.kind);
    const std::optional<int32_t>& id = e.kind == MediaKind::kImage ? image_id : video_id;
    Require(id.has_value(), ErrorCode::kUnsupported,
            "the tokenizer has no placeholder token '" + marker + "' for " + Describe(i, parts[i]));
    Require(e.num_placeholders > 0 && CountOccurrences(e.text, marker) == e.num_placeholders,
            ErrorCode::kUnprocessable,
            Describe(i, parts[i]) + ": its expansion holds " +
                std::to_string(CountOccurrences(e.text, marker)) + " placeholders, expected " +
                std::to_string(e.num_placeholders));
  }

  if (options_.content_format == ContentFormat::kString) FlattenContent(messages);

  // 2. Render.
  Json context = options_.template_variables;
  if (input.extra_context.is_object()) {
    for (const auto& [key, value] : input.extra_context.items()) context[key] = value;
  }
  context["messages"] = std::move(messages);
  if (!input.tools.is_null()) context["tools"] = input.tools;
  context["add_generation_prompt"] = input.add_generation_prompt;
  const std::string rendered = template_.Render(context);

  // 3. Put each item's placeholder run where its sentinel, or the placeholder token the
  //    template wrote for it, landed.
  AssembledPrompt out;
  size_t cursor = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string s = template_writes ? marker_of(parts[i].kind) : sentinel(i);
    size_t pos = rendered.find(s, template_writes ? cursor : 0);
    Require(pos != std::string::npos, ErrorCode::kUnprocessable,
            Describe(i, parts[i]) + " does not appear in the prompt rendered by the chat template");
    if (template_writes) {
      // The template writes one token per item, in order: another kind first is out of order.
      const std::string& other =
          marker_of(parts[i].kind == MediaKind::kImage ? MediaKind::kVideo : MediaKind::kImage);
      const size_t other_pos = other.empty() ? std::string::npos : rendered.find(other, cursor);
      Require(other_pos == std::string::npos || other_pos > pos, ErrorCode::kUnprocessable,
              Describe(i, parts[i]) + " is out of order in the rendered prompt");
    } else {
      Require(rendered.find(s, pos + s.size()) == std::string::npos, ErrorCode::kUnprocessable,
              Describe(i, parts[i]) + " appears more than once in the rendered prompt");
      Require(pos >= cursor, ErrorCode::kUnprocessable,
              Describe(i, parts[i]) + " is out of order in the rendered prompt");
    }
    out.rendered.append(rendered, cursor, pos - cursor);
    out.rendered += marker_of(parts[i].kind);
    out.text.append(rendered, cursor, pos - cursor);
    out.text += media[i].text;
    cursor = pos + s.size();
  }
  if (template_writes) {
    for (const MediaKind kind : {MediaKind::kImage, MediaKind::kVideo}) {
      const std::string& marker = marker_of(kind);
      Require(marker.empty() || rendered.find(marker, cursor) == std::string::npos,
              ErrorCode::kInvalidArgument,
              "the chat template wrote more " + std::string(MediaKindName(kind)) +
                  " placeholder tokens ('" + marker + "') than the request has " +
                  std::string(MediaKindName(kind)) + "s");
    }
  }
  out.rendered.append(rendered, cursor, std::string::npos);
  out.text.append(rendered, cursor, std::string::npos);

  // 4. Tokenize in one piece (the template already wrote BOS and the role markers).
  out.ids = tokenizer_.Encode(out.text, /*add_special_tokens=*/false, max_ids);
  if (out.ids.size() > max_ids) {
    // Only "too long" is known: the media checks below need the whole encoding.
    out.over_max_ids = true;
    return out;
  }

  // 5. Assign placeholder tokens to the items in order and check them.
  out.media.resize(parts.size());
  size_t item = 0;
  for (size_t k = 0; k < out.ids.size(); ++k) {
    const int32_t id = out.ids[k];
    const bool is_image = image_id && id == *image_id, is_video = video_id && id == *video_id;
    if (!is_image && !is_video) continue;
    const MediaKind kind = is_image ? MediaKind::kImage : MediaKind::kVideo;
    Require(item < parts.size(), ErrorCode::kInvalidArgument,
            "the prompt holds more " + std::string(MediaKindName(kind)) +
                " placeholder tokens than its media items need (message text must not contain '" +
                marker_of(kind) + "')");
    Require(kind == parts[item].kind, ErrorCode::kUnprocessable,
            Describe(item, parts[item]) + ": found a " + std::string(MediaKindName(kind)) +
                " placeholder token where its placeholders were expected");
    MediaSpan& span = out.media[item];
    span.kind = kind;
    if (span.num_placeholders == 0) span.begin = k;
    if (!span.runs.empty() && span.runs.back().second == k) {
      span.runs.back().second = k + 1;
    } else {
      span.runs.emplace_back(k, k + 1);
    }
    span.end = k + 1;
    if (++span.num_placeholders == media[item].num_placeholders) ++item;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const MediaSpan& span = out.media[i];
    Require(span.num_placeholders == media[i].num_placeholders, ErrorCode::kUnprocessable,
            Describe(i, parts[i]) + ": " + std::to_string(span.num_placeholders) +
                " placeholder tokens in the prompt, expected " +
                std::to_string(media[i].num_placeholders));
    const std::string& marker = marker_of(parts[i].kind);
    Require(span.runs.size() == CountRuns(media[i].text, marker), ErrorCode::kUnprocessable,
            Describe(i, parts[i]) +
                ": its placeholder tokens are not laid out as its expansion "
                "(text next to it may contain placeholder tokens)");
  }
  return out;
}

}  // namespace m3::text
