// Animated WebP as a video (libwebpdemux): lossless animations made at test time by img2webp
// with uneven frame durations decode to the exact frames, with each frame's start time as its
// timestamp, through the same sampling, resize and patchify path as other videos.
#include <doctest/doctest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "gateway/media/animated_webp_decoder.h"
#include "gateway/media/image_decoder.h"
#include "gateway/media/image_header.h"
#include "tests/media/media_test_util.h"

using namespace m3;
using namespace m3::media;
using namespace m3::media::test;

namespace {

constexpr int kW = 90, kH = 62;
const int kDurationsMs[] = {100, 250, 50, 400, 200, 300};  // starts 0 .1 .35 .4 .8 1.0; end 1.3

// Frame k: a gradient moved by k, so frames differ everywhere.
cv::Mat Frame(int k) {
  cv::Mat m(kH, kW, CV_8UC3);
  for (int y = 0; y < kH; ++y)
    for (int x = 0; x < kW; ++x)
      m.at<cv::Vec3b>(y, x) = {uint8_t(3 * x + 20 * k), uint8_t(4 * y + 7 * k), uint8_t(40 * k)};
  return m;
}

const std::string& Animation() {
  static const std::string bytes = [] {
    const std::string dir = m3::test::TempDir();
    std::vector<std::string> argv = {"/usr/bin/img2webp", "-loop", "0"};
    for (int k = 0; k < 6; ++k) {
      const std::string f = dir + "/f" + std::to_string(k) + ".png";
      REQUIRE(cv::imwrite(f, Frame(k)));
      argv.insert(argv.end(), {"-lossless", "-d", std::to_string(kDurationsMs[k]), f});
    }
    argv.insert(argv.end(), {"-o", dir + "/anim.webp"});
    const auto r = m3::test::RunProcess(argv);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return m3::test::ReadFile(dir + "/anim.webp");
  }();
  return bytes;
}

// What ProcessVideo must give for these frames (indices into Frame()).
HostTensor ExpectedVideo(const std::vector<int>& frames, const MediaOptions& options) {
  const int64_t n = static_cast<int64_t>(frames.size());
  const ResizeTarget t = Processor()->VideoResize(kH, kW, n, options);
  const PatchLayout layout = Processor()->Layout(n, t.height, t.width);
  HostTensor out(DType::kF32, {layout.rows, layout.patch_dim});
  for (int64_t i = 0; i < n; ++i) {
    ImageBuffer resized;
    BicubicResampler(kW, kH, t.width, t.height)
        .Resize(ImageBufferFromBgrMat(Frame(frames[i])), resized);
    Processor()->WriteFrame(resized, i, n, out.as<float>().data());
  }
  return out;
}

}  // namespace

TEST_CASE("animated WebP: container info without decoding") {
  CHECK(ReadImageHeader(Animation()).animated);
  AnimatedWebpDecoder d(Animation(), MediaLimits{});
  CHECK(d.info().width == kW);
  CHECK(d.info().height == kH);
  CHECK(d.info().frame_count == 6);
  CHECK(d.info().duration == doctest::Approx(1.3));
  MediaLimits tight;
  tight.max_video_frames_decoded = 5;
  CHECK(ErrorOf([&] { AnimatedWebpDecoder(Animation(), tight); }) == ErrorCode::kTooLarge);
  tight = {};
  tight.max_video_seconds = 1.0;
  CHECK(ErrorOf([&] { AnimatedWebpDecoder(Animation(), tight); }) == ErrorCode::kTooLarge);
  CHECK(ErrorOf([&] { AnimatedWebpDecoder(Animation().substr(0, 40), MediaLimits{}); }) ==
        ErrorCode::kInvalidArgument);
}

TEST_CASE("animated WebP: every frame, exact pixels and start times") {
  MediaOptions all;
  all.all_frames = true;
  const PreprocessedMedia v = Pre().ProcessVideo(Animation(), all);
  CHECK(v.kind == m3::content::MediaKind::kVideo);
  REQUIRE(v.timestamps.size() == 6);
  const double starts[] = {0, 0.1, 0.35, 0.4, 0.8, 1.0};
  for (int k = 0; k < 6; ++k) CHECK(v.timestamps[k] == doctest::Approx(starts[k]));
  CHECK(MaxAbsDiff(v.pixel_values, ExpectedVideo({0, 1, 2, 3, 4, 5}, all)) == 0.0);
  CHECK(v.grid_thw[0] == 3);
}

TEST_CASE("animated WebP: sampled at fps like other videos") {
  // 1.3 s at 4 fps -> 5 samples at k * 1.3 / 5 = 0, .26, .52, .78, 1.04 s, shown by frames
  // 0, 1, 3, 3, 5 (frame 3 covers [.4, .8)).
  MediaOptions opts;
  opts.fps = 4;
  opts.min_frames = 1;
  const PreprocessedMedia v = Pre().ProcessVideo(Animation(), opts);
  REQUIRE(v.timestamps.size() == 5);
  const double want[] = {0, 0.1, 0.4, 0.4, 1.0};
  for (int k = 0; k < 5; ++k) CHECK(v.timestamps[k] == doctest::Approx(want[k]));
  CHECK(MaxAbsDiff(v.pixel_values, ExpectedVideo({0, 1, 3, 3, 5}, opts)) == 0.0);
  // Placeholder text carries the group timestamps, as for any video.
  CHECK(v.prompt_expansion.find("]<]0.0 seconds[>[") != std::string::npos);
}
