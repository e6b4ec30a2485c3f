// Video decoding through MediaPreprocessor::ProcessVideo for the codecs and containers this
// FFmpeg decodes, with clips generated at test time by the ffmpeg CLI (testsrc2, 64x48,
// 10 fps, 2 s): frame sampling, timestamps, rotation and the decoded pixels.
#include <doctest/doctest.h>

#include <cmath>

#include "gateway/media/frame_sampler.h"
#include "gateway/media/video_decoder.h"
#include "tests/media/media_test_util.h"

using namespace m3;
using namespace m3::media;
using namespace m3::media::test;

namespace {

struct Clip {
  std::string name;
  std::vector<std::string> codec_args;
};

const std::string& ClipDir() {
  static const std::string dir = m3::test::TempDir();
  return dir;
}

std::string MakeClip(const Clip& c) {
  const std::string path = ClipDir() + "/" + c.name;
  std::vector<std::string> args = {"-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10", "-t", "2"};
  args.insert(args.end(), c.codec_args.begin(), c.codec_args.end());
  args.push_back(path);
  Ffmpeg(args);
  return path;
}

// Mean absolute difference in uint8 units between our decoded frames and ffmpeg's.
double FrameDiff(const ImageBuffer& f, const std::string& rgb, int64_t index) {
  const int64_t n = f.width * f.height * 3;
  REQUIRE(static_cast<int64_t>(rgb.size()) >= (index + 1) * n);
  double sum = 0;
  for (int64_t y = 0; y < f.height; ++y) {
    for (int64_t x = 0; x < f.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int a = f.row(y)[3 * x + f.ChannelIndex(c)];
        const int b = static_cast<uint8_t>(rgb[index * n + (y * f.width + x) * 3 + c]);
        sum += std::abs(a - b);
      }
    }
  }
  return sum / n;
}

}  // namespace

TEST_CASE("codecs and containers: H.264, H.265, VP9, AV1, MPEG-4, MJPEG, FFV1, GIF") {
  const std::vector<Clip> clips = {
      {"h264.mp4", {"-c:v", "libx264", "-pix_fmt", "yuv420p"}},
      {"h265.mp4", {"-c:v", "libx265", "-x265-params", "log-level=none", "-pix_fmt", "yuv420p"}},
      {"vp9.webm", {"-c:v", "libvpx-vp9", "-pix_fmt", "yuv420p"}},
      {"av1.mkv", {"-c:v", "libaom-av1", "-cpu-used", "8", "-pix_fmt", "yuv420p"}},
      {"mpeg4.avi", {"-c:v", "mpeg4", "-q:v", "3"}},
      {"mjpeg.avi", {"-c:v", "mjpeg", "-q:v", "3", "-pix_fmt", "yuvj420p"}},
      {"ffv1.mkv", {"-c:v", "ffv1"}},
      {"anim.gif", {}},
  };
  for (const Clip& clip : clips) {
    CAPTURE(clip.name);
    const std::string path = MakeClip(clip);
    const std::string bytes = m3::test::ReadFile(path);
    // Default sampling: 1 fps over 2 s = 2 frames, raised to min_frames 4.
    const PreprocessedMedia got = Pre().ProcessVideo(bytes, {});
    CHECK(got.kind == m3::content::MediaKind::kVideo);
    REQUIRE(got.timestamps.size() == 4);
    CHECK(got.timestamps[0] == doctest::Approx(0.0));
    CHECK(got.timestamps[1] == doctest::Approx(0.5));
    CHECK(got.timestamps[3] == doctest::Approx(1.5));
    CHECK(got.grid_thw[0] == 2);
    CHECK(got.grid_thw[1] * 14 >= 28);
    CHECK(got.placeholder_tokens == got.grid_thw[0] * got.grid_thw[1] * got.grid_thw[2] / 4);
    // The prompt carries one timestamp per temporal group (that of its first frame).
    CHECK(got.prompt_expansion.find("]<]0.0 seconds[>[") == 0);
    CHECK(got.prompt_expansion.find("]<]1.0 seconds[>[") != std::string::npos);

    // The frames we decode agree with the ffmpeg CLI's (colour conversion may differ a little).
    const std::string rgb = FfmpegRgbFrames(path);
    VideoDecoder decoder(bytes, MediaLimits{});
    CHECK(decoder.info().width == 64);
    CHECK(decoder.info().height == 48);
    const int64_t frames = decoder.Decode({}, [&](const ImageBuffer& f, int64_t i, double t) {
      CHECK(t == doctest::Approx(i * 0.1));
      CHECK(FrameDiff(f, rgb, i) < 4.0);
      return true;
    });
    CHECK(frames == 20);
  }
}

TEST_CASE("frame sampling follows fps, min/max frames, and all-frames") {
  const std::string bytes = m3::test::ReadFile(MakeClip({"s.mp4", {"-c:v", "libx264"}}));
  MediaOptions five;
  five.fps = 5;  // 10 of the 20 frames, every other one
  const PreprocessedMedia a = Pre().ProcessVideo(bytes, five);
  REQUIRE(a.timestamps.size() == 10);
  for (size_t i = 0; i < 10; ++i) CHECK(a.timestamps[i] == doctest::Approx(0.2 * i));
  CHECK(a.grid_thw[0] == 5);

  MediaOptions capped;
  capped.max_frames = 5;
  capped.min_frames = 1;
  capped.fps = 10;
  const PreprocessedMedia b = Pre().ProcessVideo(bytes, capped);
  REQUIRE(b.timestamps.size() == 5);  // 5 frames: padded to 6, grid t = 3
  CHECK(b.grid_thw[0] == 3);
  CHECK(b.timestamps[1] == doctest::Approx(0.4));

  MediaOptions all;
  all.all_frames = true;
  const PreprocessedMedia c = Pre().ProcessVideo(bytes, all);
  CHECK(c.timestamps.size() == 20);
  CHECK(c.grid_thw[0] == 10);

  // Sampling rule: the count truncates duration x fps, like the reference's int().
  FrameSampling s;
  s.fps = 1.0;
  s.min_frames = 4;
  s.max_frames = 768;
  CHECK(SampleFrameTimes(s, 4.5, 9).size() == 4);
  CHECK(SampleFrameTimes(s, 100.9, 3000).size() == 100);
  CHECK(SampleFrameTimes(s, 1.0, 3).size() == 3);  // never more frames than exist
}

TEST_CASE("rotation metadata is applied as the ffmpeg CLI applies it (128x72 shown as 72x128)") {
  const std::string plain = ClipDir() + "/plain.mp4";
  Ffmpeg({"-f", "lavfi", "-i", "testsrc2=size=128x72:rate=10", "-t", "1", "-c:v", "libx264",
          "-pix_fmt", "yuv420p", plain});
  const std::string rotated = ClipDir() + "/rotated.mp4";
  Ffmpeg({"-i", plain, "-c", "copy", "-metadata:s:v:0", "rotate=90", rotated});
  const std::string bytes = m3::test::ReadFile(rotated);
  VideoDecoder decoder(bytes, MediaLimits{});
  CHECK(decoder.info().rotation % 180 == 90);
  CHECK(decoder.info().width == 72);
  CHECK(decoder.info().height == 128);
  const std::string rgb = FfmpegRgbFrames(rotated);  // the CLI auto-rotates
  int64_t checked = 0;
  decoder.Decode({}, [&](const ImageBuffer& f, int64_t i, double) {
    REQUIRE(f.width == 72);
    REQUIRE(f.height == 128);
    CHECK(FrameDiff(f, rgb, i) < 4.0);
    ++checked;
    return i < 3;
  });
  CHECK(checked == 4);
  const PreprocessedMedia got = Pre().ProcessVideo(bytes, {});
  CHECK(got.grid_thw[1] > got.grid_thw[2]);  // taller than wide
}

TEST_CASE("sparse sampling of a long clip seeks instead of decoding everything") {
  // 40 s at 5 fps with a keyframe every 10 frames: sampling at 0.1 fps needs 4 frames.
  const std::string path = ClipDir() + "/sparse.mp4";
  Ffmpeg({"-f", "lavfi", "-i", "testsrc2=size=64x48:rate=5", "-t", "40", "-c:v", "libx264", "-g",
          "10", "-pix_fmt", "yuv420p", path});
  const std::string bytes = m3::test::ReadFile(path);
  MediaLimits limits;
  limits.max_video_frames_decoded = 120;  // all 200 frames would be refused
  const MediaPreprocessor pre(Processor(), limits);
  MediaOptions opts;
  opts.fps = 0.1;
  const PreprocessedMedia got = pre.ProcessVideo(bytes, opts);
  REQUIRE(got.timestamps.size() == 4);
  CHECK(got.timestamps[1] == doctest::Approx(10.0));
  CHECK(got.timestamps[3] == doctest::Approx(30.0));
}
