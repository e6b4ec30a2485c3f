// `m3-gateway preprocess`: runs the media pipeline on one image or video and writes the
// model inputs (pixel values, grid, timestamps) as safetensors, printing a JSON summary.
// Inputs are local paths (the caller's own files) or URLs (http://, https://, data:, file://)
// fetched through the gateway's MediaFetcher with the same SSRF guard, limits and flags as
// `serve`.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "gateway/cli/command.h"
#include "gateway/cli/fetch_flags.h"
#include "gateway/cli/input_file.h"
#include "gateway/media/media_preprocessor.h"
#include "gateway/media/vision_processor.h"
#include "gateway/net/media_fetcher.h"
#include "shared/error.h"
#include "shared/safetensors.h"

namespace m3::cli {
namespace {

// Returns the bytes named by `location`: URLs through the fetcher (guard, limits, kind
// check), anything else as a local file path.
std::string ReadInput(const std::string& location, content::MediaKind kind,
                      const net::MediaFetcher& fetcher) {
  const bool is_url = location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0 ||
                      location.rfind("data:", 0) == 0 || location.rfind("file://", 0) == 0;
  if (is_url) {
    net::ByteBudget budget(fetcher.options().max_request_bytes);
    return fetcher.Fetch(location, kind, &budget).bytes;
  }
  return ReadInputFile(location,
                       kind == content::MediaKind::kImage ? fetcher.options().max_image_bytes
                                                          : fetcher.options().max_video_bytes,
                       kind == content::MediaKind::kImage ? "image file" : "video file");
}

int RunPreprocess(int argc, char** argv) {
  CLI::App app("Preprocess one image or video into model inputs (safetensors)", "preprocess");
  std::string image, video, output, model_dir;
  media::MediaOptions options;
  int64_t min_pixels = 0, max_pixels = 0, min_frames = 0, max_frames = 0;
  double fps = 0;
  auto* image_opt =
      app.add_option("--image", image, "image file or URL (PNG, JPEG, GIF, WebP, BMP, TIFF)");
  auto* video_opt = app.add_option("--video", video, "video file or URL");
  image_opt->excludes(video_opt);
  app.add_option("--output", output, "output .safetensors file")->required();
  app.add_option("--model", model_dir,
                 "model directory (processor_config.json, or preprocessor_config.json and "
                 "video_preprocessor_config.json; default: the processor's defaults)");
  auto* min_opt = app.add_option("--min-pixels", min_pixels, "minimum pixels after resizing");
  auto* max_opt = app.add_option("--max-pixels", max_pixels, "maximum pixels after resizing");
  auto* fps_opt = app.add_option("--fps", fps, "video: frames sampled per second");
  auto* all_opt =
      app.add_flag("--all-frames", options.all_frames, "video: every frame, no sampling");
  fps_opt->excludes(all_opt);
  auto* min_frames_opt = app.add_option("--min-frames", min_frames, "video: fewest sampled frames");
  auto* max_frames_opt = app.add_option("--max-frames", max_frames, "video: most sampled frames");
  bool jpeg_draft = false;
  app.add_flag("--jpeg-draft", jpeg_draft,
               "decode JPEGs at reduced DCT scale when the resize target allows (faster, not "
               "bit-exact with the reference)");
  FetchFlags fetch_flags;
  fetch_flags.Add(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  Require(!image.empty() || !video.empty(), ErrorCode::kInvalidArgument,
          "one of --image or --video is required");
  if (min_opt->count()) options.min_pixels = min_pixels;
  if (max_opt->count()) options.max_pixels = max_pixels;
  if (fps_opt->count()) options.fps = fps;
  if (min_frames_opt->count()) options.min_frames = min_frames;
  if (max_frames_opt->count()) options.max_frames = max_frames;

  const net::FetchOptions fetch = fetch_flags.Resolve();
  media::MediaLimits limits;
  limits.jpeg_draft = jpeg_draft;
  const media::MediaPreprocessor pre(media::LoadVisionProcessor(model_dir), limits);
  const net::MediaFetcher fetcher(fetch);
  const bool is_image = !image.empty();
  const std::string bytes =
      ReadInput(is_image ? image : video,
                is_image ? content::MediaKind::kImage : content::MediaKind::kVideo, fetcher);
  media::PreprocessedMedia out =
      is_image ? pre.ProcessImage(bytes, options) : pre.ProcessVideo(bytes, options);

  const std::vector<int64_t> grid(out.grid_thw.begin(), out.grid_thw.end());
  NamedTensors tensors;
  if (is_image) {
    tensors.emplace_back("pixel_values", std::move(out.pixel_values));
    tensors.emplace_back("image_grid_thw", HostTensor::FromInt64({1, 3}, grid));
  } else {
    tensors.emplace_back("pixel_values_videos", std::move(out.pixel_values));
    tensors.emplace_back("video_grid_thw", HostTensor::FromInt64({1, 3}, grid));
    HostTensor stamps(DType::kF64, {static_cast<int64_t>(out.timestamps.size())});
    std::copy(out.timestamps.begin(), out.timestamps.end(), stamps.as<double>().begin());
    tensors.emplace_back("video_timestamps", std::move(stamps));
  }
  const Shape shape = tensors[0].second.shape();
  WriteSafetensors(output, tensors, {{"processor", std::string(pre.processor().name())}});

  nlohmann::json summary = {{"kind", is_image ? "image" : "video"},
                            {"output", output},
                            {"pixel_values_shape", shape},
                            {"grid_thw", grid},
                            {"placeholder_tokens", out.placeholder_tokens}};
  if (!is_image) summary["timestamps"] = out.timestamps;
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

const CommandRegistrar kRegistrar(
    {"preprocess", "decode, resize and patchify one image or video into model inputs",
     RunPreprocess});

}  // namespace
}  // namespace m3::cli
