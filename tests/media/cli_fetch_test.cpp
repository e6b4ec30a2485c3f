// `m3-gateway preprocess` with URL inputs: data: URIs, an http:// loopback origin that is
// allowlisted with --allow-media-host (same bytes as a local file), the SSRF guard refusing
// 127.0.0.1 without the allowlist (the origin is never contacted), fetch limits from the shared
// flags, and --jpeg-draft.
#include <doctest/doctest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "gateway/net/base64.h"
#include "shared/safetensors.h"
#include "tests/media/media_test_util.h"
#include "tests/net/loopback_http.h"

using namespace m3;
using namespace m3::media;
using namespace m3::media::test;

namespace {

std::string TestPng() {
  cv::Mat m(90, 130, CV_8UC3);
  for (int y = 0; y < m.rows; ++y)
    for (int x = 0; x < m.cols; ++x) m.at<cv::Vec3b>(y, x) = {uint8_t(2 * x), uint8_t(3 * y), 77};
  std::vector<uint8_t> buf;
  REQUIRE(cv::imencode(".png", m, buf));
  return std::string(buf.begin(), buf.end());
}

// Runs `m3-gateway preprocess ARGS --output OUT` and returns the result.
m3::test::ProcessResult Preprocess(std::vector<std::string> args, const std::string& out) {
  std::vector<std::string> argv = {m3::test::BinPath("m3-gateway"), "preprocess"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--output");
  argv.push_back(out);
  return m3::test::RunProcess(argv);
}

void CheckPixels(const std::string& out, const std::string& bytes, const MediaPreprocessor& pre) {
  const auto f = SafetensorsFile::Open(out);
  const PreprocessedMedia want = pre.ProcessImage(bytes, {});
  const TensorView pv = f.Get("pixel_values");
  REQUIRE(pv.shape == want.pixel_values.shape());
  CHECK(std::memcmp(pv.data, want.pixel_values.data(), pv.nbytes) == 0);
}

}  // namespace

TEST_CASE("CLI preprocess: data: URL, allowlisted loopback URL, SSRF refusal") {
  const std::string dir = m3::test::TempDir();
  const std::string out = dir + "/out.safetensors";
  const std::string png = TestPng();

  SUBCASE("data: URI") {
    const auto r = Preprocess({"--image", "data:image/png;base64," + net::Base64Encode(png)}, out);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CheckPixels(out, png, Pre());
    // Over --max-image-bytes: refused before decoding.
    const auto big = Preprocess(
        {"--image", "data:image/png;base64," + net::Base64Encode(png), "--max-image-bytes", "100"},
        out);
    CHECK(big.exit_code != 0);
  }

  m3::test::LoopbackOrigin origin([&](const std::string& path) {
    m3::test::ScriptedReply reply;
    if (path == "/cat.png") {
      reply.headers = {{"Content-Type", "image/png"}};
      reply.body = png;
    } else {
      reply.status = 404;
    }
    return reply;
  });

  SUBCASE("http:// loopback origin, allowlisted") {
    const std::string host = "127.0.0.1:" + std::to_string(origin.port());
    const auto r = Preprocess({"--image", origin.Url("/cat.png"), "--allow-media-host", host,
                               "--fetch-timeout-ms", "5000"},
                              out);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CheckPixels(out, png, Pre());
    CHECK(origin.requests() == 1);
    const auto missing =
        Preprocess({"--image", origin.Url("/nope.png"), "--allow-media-host", host}, out);
    CHECK(missing.exit_code != 0);
  }

  SUBCASE("127.0.0.1 without the allowlist is refused by the SSRF guard") {
    const auto r = Preprocess({"--image", origin.Url("/cat.png")}, out);
    CHECK(r.exit_code != 0);
    INFO(r.err);
    CHECK(r.err.find("127.0.0.1") != std::string::npos);
    CHECK(origin.requests() == 0);
  }

  SUBCASE("bad fetch flags are refused") {
    CHECK(Preprocess({"--image", "data:image/png;base64,AA==", "--fetch-timeout-ms", "0"}, out)
              .exit_code != 0);
  }
}

TEST_CASE("CLI preprocess --jpeg-draft uses the fast JPEG mode") {
  const std::string dir = m3::test::TempDir();
  cv::Mat m(1000, 1400, CV_8UC3);
  for (int y = 0; y < m.rows; ++y)
    for (int x = 0; x < m.cols; ++x)
      m.at<cv::Vec3b>(y, x) = {uint8_t(x / 6), uint8_t(y / 4), uint8_t((x ^ y) & 0xff)};
  std::vector<uint8_t> buf;
  REQUIRE(cv::imencode(".jpg", m, buf, {cv::IMWRITE_JPEG_QUALITY, 90}));
  const std::string jpeg(buf.begin(), buf.end());
  const std::string path = dir + "/in.jpg";
  m3::test::WriteFile(path, jpeg);
  const std::string out = dir + "/out.safetensors";
  // max 224x224-ish target: a 1/4-scale decode covers it.
  auto r = Preprocess({"--image", path, "--jpeg-draft", "--max-pixels", "50176"}, out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  MediaLimits draft;
  draft.jpeg_draft = true;
  const MediaPreprocessor fast(Processor(), draft);
  MediaOptions opts;
  opts.max_pixels = 50176;
  const auto f = SafetensorsFile::Open(out);
  const TensorView pv = f.Get("pixel_values");
  const PreprocessedMedia want = fast.ProcessImage(jpeg, opts);
  REQUIRE(pv.shape == want.pixel_values.shape());
  CHECK(std::memcmp(pv.data, want.pixel_values.data(), pv.nbytes) == 0);
  // ...and it differs from the exact path (the mode is really on).
  const PreprocessedMedia exact = Pre().ProcessImage(jpeg, opts);
  CHECK(std::memcmp(pv.data, exact.pixel_values.data(), pv.nbytes) != 0);
}

TEST_CASE("CLI preprocess --video: an animated WebP data: URI is a video") {
  const std::string dir = m3::test::TempDir();
  Ffmpeg({"-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10", "-t", "1", "-c:v", "libwebp_anim",
          "-loop", "0", dir + "/anim.webp"});
  const std::string webp = m3::test::ReadFile(dir + "/anim.webp");
  const std::string out = dir + "/out.safetensors";
  const std::string uri = "data:image/webp;base64," + net::Base64Encode(webp);
  const auto r = Preprocess({"--video", uri, "--fps", "2"}, out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  MediaOptions opts;
  opts.fps = 2;
  const PreprocessedMedia want = Pre().ProcessVideo(webp, opts);
  const auto f = SafetensorsFile::Open(out);
  const TensorView pv = f.Get("pixel_values_videos");
  REQUIRE(pv.shape == want.pixel_values.shape());
  CHECK(std::memcmp(pv.data, want.pixel_values.data(), pv.nbytes) == 0);
  // As an image it is refused by kind, before decoding.
  CHECK(Preprocess({"--image", uri}, out).exit_code != 0);
}
