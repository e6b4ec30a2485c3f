// Parity with the reference (HF MiniMaxM3VL image/video processors) on the golden sets:
// every image of tests/data/m3-tiny (max_pixels 150528) and m3-alt (max_pixels 50176), and
// the all-frames video of each, decoded from video_ffv1.mkv (m3-tiny) or taken from the raw
// frames (m3-alt), and portrait pictures (tests/data/portrait, exact). Tolerances elsewhere: max
// abs <= 0.02 (about one uint8 step), mean abs <= 1e-3.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "gateway/media/bicubic_resampler.h"
#include "gateway/media/m3_vision_processor.h"
#include "gateway/media/media_preprocessor.h"
#include "gateway/media/video_decoder.h"
#include "shared/safetensors.h"
#include "tests/test_util.h"

using namespace m3;
using namespace m3::media;

namespace {

struct Diff {
  double max_abs = 0, mean_abs = 0;
};

Diff Compare(const HostTensor& got, const TensorView& want) {
  const std::vector<float> w = ToFloat32(want, "golden");
  const auto g = got.as<float>();
  REQUIRE(g.size() == w.size());
  Diff d;
  for (size_t i = 0; i < w.size(); ++i) {
    const double e = std::abs(double(g[i]) - double(w[i]));
    d.max_abs = std::max(d.max_abs, e);
    d.mean_abs += e;
  }
  d.mean_abs /= std::max<size_t>(1, w.size());
  return d;
}

void CheckImages(const std::string& set, int64_t max_pixels) {
  const auto golden = SafetensorsFile::Open(test::DataPath(set + "/preprocess.safetensors"));
  MediaPreprocessor pre(std::make_shared<M3VisionProcessor>(M3VisionConfig{}), MediaLimits{});
  MediaOptions opts;
  opts.max_pixels = max_pixels;
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::DataPath(set + "/images"))) {
    const std::string name = entry.path().stem().string();
    const std::string bytes = test::ReadFile(entry.path().string());
    const PreprocessedMedia got = pre.ProcessImage(bytes, opts);
    const auto grid = ToInt64(golden.Get(name + ".image_grid_thw"), "grid");
    CAPTURE(name);
    REQUIRE(grid.size() == 3);
    CHECK(got.grid_thw[0] == grid[0]);
    CHECK(got.grid_thw[1] == grid[1]);
    CHECK(got.grid_thw[2] == grid[2]);
    const Diff d = Compare(got.pixel_values, golden.Get(name + ".pixel_values"));
    MESSAGE(set << "/" << name << ": max abs " << d.max_abs << ", mean abs " << d.mean_abs);
    CHECK(d.max_abs <= 0.02);
    CHECK(d.mean_abs <= 1e-3);
    CHECK(got.placeholder_tokens == grid[0] * grid[1] * grid[2] / 4);
    ++checked;
  }
  CHECK(checked > 0);
}

}  // namespace

TEST_CASE("image parity with the reference processor: m3-tiny (max_pixels 150528)") {
  CheckImages("m3-tiny", 150528);
}

TEST_CASE("image parity with the reference processor: m3-alt (max_pixels 50176)") {
  CheckImages("m3-alt", 50176);
}

// tests/data/portrait: the reference image processor (transformers 5.17 on the GPU machine, PIL
// pictures as the chat goldens pass them; scripts/golden/chat_e2e_reference.py) on portrait
// pictures and their landscape counterparts, and on chat-e2e's tall.png, at max_pixels 50176. It
// holds the reference's resized uint8 picture (NAME.resized [H, W, 3]) and grid; the resize is
// what portrait handling could get wrong, and normalizing + patchifying a resized picture is
// pinned by the sets above, so ProcessImage must equal WriteFrame of the reference's picture
// exactly.
TEST_CASE("portrait and landscape pictures: exactly the reference's resize and grid") {
  const auto golden = SafetensorsFile::Open(test::DataPath("portrait/reference.safetensors"));
  const auto proc = std::make_shared<M3VisionProcessor>(M3VisionConfig{});
  MediaPreprocessor pre(proc, MediaLimits{});
  MediaOptions opts;
  opts.max_pixels = 50176;
  std::vector<std::pair<std::string, std::string>> pictures = {
      {"tall", test::DataPath("chat-e2e/images/tall.png")}};
  for (const auto& entry : std::filesystem::directory_iterator(test::DataPath("portrait/images")))
    pictures.emplace_back(entry.path().stem().string(), entry.path().string());
  int portrait = 0;
  for (const auto& [name, path] : pictures) {
    CAPTURE(name);
    const PreprocessedMedia got = pre.ProcessImage(test::ReadFile(path), opts);
    const auto grid = ToInt64(golden.Get(name + ".image_grid_thw"), "grid");
    REQUIRE(grid.size() == 3);
    CHECK(got.grid_thw[0] == grid[0]);
    CHECK(got.grid_thw[1] == grid[1]);
    CHECK(got.grid_thw[2] == grid[2]);
    const TensorView resized = golden.Get(name + ".resized");
    REQUIRE(resized.shape == Shape{grid[1] * 14, grid[2] * 14, 3});
    const int64_t h = resized.shape[0], w = resized.shape[1];
    portrait += h > w;
    ImageBuffer picture;
    picture.Allocate(w, h, ChannelOrder::kRGB);
    for (int64_t y = 0; y < h; ++y) std::memcpy(picture.row(y), resized.data + y * w * 3, w * 3);
    const PatchLayout layout = proc->Layout(1, h, w);
    HostTensor want(DType::kF32, {layout.rows, layout.patch_dim});
    proc->WriteFrame(picture, 0, 1, want.as<float>().data());
    REQUIRE(got.pixel_values.shape() == want.shape());
    CHECK(std::memcmp(got.pixel_values.data(), want.data(), want.nbytes()) == 0);
  }
  CHECK(pictures.size() == 7);
  CHECK(portrait == 4);
}

TEST_CASE("video_ffv1.mkv decodes to exactly video_frames.safetensors and matches the golden") {
  const std::string bytes = test::ReadFile(test::DataPath("m3-tiny/video_ffv1.mkv"));
  const auto frames_file =
      SafetensorsFile::Open(test::DataPath("m3-tiny/video_frames.safetensors"));
  const TensorView frames = frames_file.Get("frames");
  REQUIRE(frames.shape == Shape{9, 90, 160, 3});

  MediaPreprocessor pre(std::make_shared<M3VisionProcessor>(M3VisionConfig{}), MediaLimits{});
  MediaOptions opts;
  opts.all_frames = true;
  const PreprocessedMedia got = pre.ProcessVideo(bytes, opts);
  const auto golden = SafetensorsFile::Open(test::DataPath("m3-tiny/preprocess.safetensors"));
  const auto grid = ToInt64(golden.Get("video.video_grid_thw"), "grid");
  CHECK(got.grid_thw[0] == grid[0]);
  CHECK(got.grid_thw[1] == grid[1]);
  CHECK(got.grid_thw[2] == grid[2]);
  const Diff d = Compare(got.pixel_values, golden.Get("video.pixel_values_videos"));
  MESSAGE("m3-tiny/video: max abs " << d.max_abs << ", mean abs " << d.mean_abs);
  CHECK(d.max_abs <= 0.02);
  CHECK(d.mean_abs <= 1e-3);
  REQUIRE(got.timestamps.size() == 9);
  CHECK(got.timestamps[1] == doctest::Approx(0.5));  // 2 fps
}

TEST_CASE("video_ffv1.mkv frames are bit-exact with video_frames.safetensors") {
  const std::string bytes = test::ReadFile(test::DataPath("m3-tiny/video_ffv1.mkv"));
  const auto frames_file =
      SafetensorsFile::Open(test::DataPath("m3-tiny/video_frames.safetensors"));
  const TensorView frames = frames_file.Get("frames");
  VideoDecoder decoder(bytes, MediaLimits{});
  CHECK(decoder.info().width == 160);
  CHECK(decoder.info().height == 90);
  int64_t n = 0;
  decoder.Decode({}, [&](const ImageBuffer& f, int64_t index, double) {
    REQUIRE(index < 9);
    REQUIRE(f.width == 160);
    REQUIRE(f.height == 90);
    const uint8_t* want = frames.data + index * 90 * 160 * 3;
    int64_t mismatches = 0;
    for (int64_t y = 0; y < 90; ++y) {
      for (int64_t x = 0; x < 160; ++x) {
        for (int c = 0; c < 3; ++c) {
          mismatches += f.row(y)[3 * x + f.ChannelIndex(c)] != want[(y * 160 + x) * 3 + c];
        }
      }
    }
    CHECK(mismatches == 0);
    ++n;
    return true;
  });
  CHECK(n == 9);
}

TEST_CASE("m3-alt video (5 frames, padded to 6) matches the golden from the raw frames") {
  const auto frames_file = SafetensorsFile::Open(test::DataPath("m3-alt/video_frames.safetensors"));
  const TensorView frames = frames_file.Get("frames");
  REQUIRE(frames.shape.size() == 4);
  const int64_t t = frames.shape[0], h = frames.shape[1], w = frames.shape[2];
  const M3VisionProcessor proc{M3VisionConfig{}};
  const ResizeTarget target = proc.VideoResize(h, w, t, MediaOptions{});
  const PatchLayout layout = proc.Layout(t, target.height, target.width);
  HostTensor out(DType::kF32, {layout.rows, layout.patch_dim});
  const BicubicResampler resampler(w, h, target.width, target.height);
  for (int64_t i = 0; i < t; ++i) {
    ImageBuffer frame, resized;
    frame.Allocate(w, h, ChannelOrder::kRGB);
    std::memcpy(frame.pixels.data(), frames.data + i * h * w * 3, h * w * 3);
    resampler.Resize(frame, resized);
    proc.WriteFrame(resized, i, t, out.as<float>().data());
  }
  const auto golden = SafetensorsFile::Open(test::DataPath("m3-alt/preprocess.safetensors"));
  const auto grid = ToInt64(golden.Get("video.video_grid_thw"), "grid");
  CHECK(layout.grid_thw[0] == grid[0]);
  CHECK(layout.grid_thw[1] == grid[1]);
  CHECK(layout.grid_thw[2] == grid[2]);
  const Diff d = Compare(out, golden.Get("video.pixel_values_videos"));
  MESSAGE("m3-alt/video: max abs " << d.max_abs << ", mean abs " << d.mean_abs);
  CHECK(d.max_abs <= 0.02);
  CHECK(d.mean_abs <= 1e-3);
}
