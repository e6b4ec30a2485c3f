// `m3-gateway prepare`: the gateway's whole request path offline. A chat request (OpenAI-style
// messages with text, image_url and video_url parts; optional tools) is turned into the model
// inputs the engine takes: the chat template of the model directory is rendered, every media
// item is fetched and preprocessed by the processor configured from that directory, its
// placeholder run is expanded, the prompt is tokenized, and input_ids, pixel_values /
// image_grid_thw and pixel_values_videos / video_grid_thw are written as safetensors (the
// input format of `m3-engine logits / generate`). Local media paths are resolved against the
// request file's directory.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gateway/cli/command.h"
#include "gateway/cli/fetch_flags.h"
#include "gateway/media/media_preprocessor.h"
#include "gateway/media/vision_processor.h"
#include "gateway/net/media_fetcher.h"
#include "gateway/text/prompt_builder.h"
#include "shared/error.h"
#include "shared/safetensors.h"

namespace m3::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The largest request file read (the messages themselves; media are fetched separately).
constexpr std::uintmax_t kMaxRequestBytes = 64u << 20;

Json ReadRequest(const std::string& path) {
  std::error_code ec;
  Require(fs::is_regular_file(path, ec), ErrorCode::kInvalidArgument,
          "request file '" + path + "' does not exist or is not a regular file");
  Require(fs::file_size(path, ec) <= kMaxRequestBytes, ErrorCode::kTooLarge,
          "request file '" + path + "' is larger than 64 MiB");
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  Json j;
  try {
    j = Json::parse(ss.str());
  } catch (const Json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, "request file '" + path + "': " + e.what());
  }
  Require(j.is_object() && j.contains("messages") && j["messages"].is_array(),
          ErrorCode::kInvalidArgument,
          "request file '" + path + "' must be a JSON object with a \"messages\" list");
  return j;
}

// Media parts name URLs (fetched with the guard and limits of `serve`) or local files.
std::string ReadMedia(const std::string& ref, content::MediaKind kind, const fs::path& base,
                      const net::MediaFetcher& fetcher, net::ByteBudget& budget) {
  const bool is_url = ref.rfind("http://", 0) == 0 || ref.rfind("https://", 0) == 0 ||
                      ref.rfind("data:", 0) == 0 || ref.rfind("file://", 0) == 0;
  if (is_url) return fetcher.Fetch(ref, kind, &budget).bytes;
  const fs::path path = fs::path(ref).is_absolute() ? fs::path(ref) : base / ref;
  std::error_code ec;
  Require(fs::is_regular_file(path, ec), ErrorCode::kNotFound,
          "media file '" + path.string() + "' does not exist or is not a regular file");
  const int64_t limit = kind == content::MediaKind::kImage ? fetcher.options().max_image_bytes
                                                           : fetcher.options().max_video_bytes;
  Require(static_cast<int64_t>(fs::file_size(path, ec)) <= limit, ErrorCode::kTooLarge,
          "media file '" + path.string() + "' is over the limit of " + std::to_string(limit) +
              " bytes");
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Appends one modality's items as [sum rows, patch_dim] pixels and [items, 3] grids.
void AddModality(const std::vector<media::PreprocessedMedia>& items, const char* pixels_name,
                 const char* grid_name, NamedTensors& out) {
  if (items.empty()) return;
  int64_t rows = 0;
  const int64_t dim = items[0].pixel_values.shape()[1];
  std::vector<int64_t> grids;
  for (const auto& item : items) {
    rows += item.pixel_values.shape()[0];
    grids.insert(grids.end(), item.grid_thw.begin(), item.grid_thw.end());
  }
  HostTensor pixels = HostTensor::Uninitialized(DType::kF32, {rows, dim});
  uint8_t* at = pixels.data();
  for (const auto& item : items) {
    std::copy_n(item.pixel_values.data(), item.pixel_values.nbytes(), at);
    at += item.pixel_values.nbytes();
  }
  out.emplace_back(pixels_name, std::move(pixels));
  out.emplace_back(grid_name,
                   HostTensor::FromInt64({static_cast<int64_t>(items.size()), 3}, grids));
}

int RunPrepare(int argc, char** argv) {
  CLI::App app("Render, preprocess and tokenize a chat request into engine inputs", "prepare");
  std::string model_dir, request_path, output;
  bool print_prompt = false;
  app.add_option("--model", model_dir,
                 "model directory (tokenizer, chat template, processor settings)")
      ->required();
  app.add_option("--request", request_path,
                 "JSON file: {\"messages\": [...], \"tools\": [...], "
                 "\"add_generation_prompt\": true, \"chat_template_kwargs\": {...}}")
      ->required();
  app.add_option("--output", output, "output .safetensors (input_ids, pixel values, grids)")
      ->required();
  app.add_flag("--print-prompt", print_prompt, "add the rendered prompt to the JSON summary");
  FetchFlags fetch_flags;
  fetch_flags.Add(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  const Json request = ReadRequest(request_path);
  const text::PromptBuilder builder = text::PromptBuilder::FromModelDir(model_dir);
  const media::MediaPreprocessor pre(media::LoadVisionProcessor(model_dir), {});
  const net::MediaFetcher fetcher(fetch_flags.Resolve());
  net::ByteBudget budget(fetcher.options().max_request_bytes);
  const fs::path base = fs::absolute(request_path).parent_path();

  text::PromptInput input;
  input.messages = request["messages"];
  if (request.contains("tools")) input.tools = request["tools"];
  if (request.contains("add_generation_prompt")) {
    Require(request["add_generation_prompt"].is_boolean(), ErrorCode::kInvalidArgument,
            "\"add_generation_prompt\" must be true or false");
    input.add_generation_prompt = request["add_generation_prompt"].get<bool>();
  }
  if (request.contains("chat_template_kwargs")) {
    Require(request["chat_template_kwargs"].is_object(), ErrorCode::kInvalidArgument,
            "\"chat_template_kwargs\" must be an object");
    input.extra_context = request["chat_template_kwargs"];
  }

  std::vector<media::PreprocessedMedia> images, videos;
  std::vector<text::MediaExpansion> expansions;
  for (const text::MediaPart& part : text::FindMediaParts(input.messages)) {
    const bool image = part.kind == content::MediaKind::kImage;
    const std::string bytes = ReadMedia(part.url, part.kind, base, fetcher, budget);
    media::PreprocessedMedia item =
        image ? pre.ProcessImage(bytes, {}) : pre.ProcessVideo(bytes, {});
    expansions.push_back(
        {part.kind, item.prompt_expansion, static_cast<size_t>(item.placeholder_tokens)});
    (image ? images : videos).push_back(std::move(item));
  }
  const text::AssembledPrompt prompt = builder.Build(input, expansions);

  NamedTensors tensors;
  const std::vector<int64_t> ids(prompt.ids.begin(), prompt.ids.end());
  tensors.emplace_back("input_ids", HostTensor::FromInt64({static_cast<int64_t>(ids.size())}, ids));
  AddModality(images, "pixel_values", "image_grid_thw", tensors);
  AddModality(videos, "pixel_values_videos", "video_grid_thw", tensors);
  WriteSafetensors(output, tensors);

  Json summary = {{"output", output},
                  {"prompt_tokens", ids.size()},
                  {"images", images.size()},
                  {"videos", videos.size()}};
  if (print_prompt) summary["prompt"] = prompt.rendered;
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

const CommandRegistrar kRegistrar(
    {"prepare", "render, preprocess and tokenize a chat request into engine inputs", RunPrepare});

}  // namespace
}  // namespace m3::cli
