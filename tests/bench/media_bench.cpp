// m3-bench-media: media pipeline timings, printed as JSON.
//  - images: a 1920x1080 JPEG and a 3840x2160 PNG (generated deterministically, with pixel
//    noise), and a smoother 1080p JPEG (the golden astronaut photo upscaled), for the exact
//    path and the opt-in fast-JPEG (DCT-scaled decode) mode: end to end (header, decode,
//    resize, normalize + patchify) on one thread, the same stages separately, and the
//    throughput of N threads each processing images (the comparison with the reference on the
//    same machine and bytes is m3-bench-jpeg's, run by scripts/device/bench_images.sh);
//  - fast-JPEG accuracy: max/mean abs error against the exact path (normalized units) on the
//    1080p frame and the golden photos (tests/data/m3-tiny/images, run from the repo root);
//  - video: a 60 s 1080p H.264 clip (ffmpeg testsrc2, cached under /tmp) sampled at 1 and
//    2 fps, against `ffmpeg -i clip -vf fps=F,scale=W:H -f null -` timed in the same run.
// Medians of several runs.
// Usage: m3-bench-media [--runs N] [--threads N] [--no-video] [--golden-images DIR]
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gateway/media/bicubic_resampler.h"
#include "gateway/media/image_decoder.h"
#include "gateway/media/image_header.h"
#include "gateway/media/jpeg_decoder.h"
#include "gateway/media/m3_vision_processor.h"
#include "gateway/media/media_preprocessor.h"

using namespace m3::media;
using Clock = std::chrono::steady_clock;

namespace {

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Median wall time of `runs` calls; the median CPU time of this thread goes to *cpu_ms (on a
// shared, loaded machine it is the better estimate of the cost on one free core).
template <typename F>
double MedianMs(int runs, F&& f, double* cpu_ms = nullptr) {
  std::vector<double> t, c;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    const double cpu = ThreadCpuMs();
    f();
    c.push_back(ThreadCpuMs() - cpu);
    t.push_back(Ms(Clock::now() - start));
  }
  if (cpu_ms) *cpu_ms = Median(c);
  return Median(t);
}

// A photo-like test picture: smooth gradients, hard-edged shapes and deterministic noise.
cv::Mat Picture(int w, int h) {
  cv::Mat m(h, w, CV_8UC3);
  uint32_t state = 12345;
  for (int y = 0; y < h; ++y) {
    auto* row = m.ptr<uint8_t>(y);
    for (int x = 0; x < w; ++x) {
      state = state * 1664525u + 1013904223u;
      const int noise = static_cast<int>((state >> 24) % 13) - 6;
      const bool disc = (x - w / 3) * (x - w / 3) + (y - h / 2) * (y - h / 2) < (h / 4) * (h / 4);
      const int r = disc ? 220 : 127 + static_cast<int>(100 * std::sin(x * 6.0 / w));
      const int g = disc ? 40 : 127 + static_cast<int>(100 * std::cos(y * 5.0 / h));
      const int b = (x + y) * 255 / (w + h);
      row[3 * x] = static_cast<uint8_t>(std::clamp(b + noise, 0, 255));
      row[3 * x + 1] = static_cast<uint8_t>(std::clamp(g + noise, 0, 255));
      row[3 * x + 2] = static_cast<uint8_t>(std::clamp(r + noise, 0, 255));
    }
  }
  return m;
}

std::string Encode(const std::string& ext, const cv::Mat& m, std::vector<int> params) {
  std::vector<uint8_t> buf;
  cv::imencode(ext, m, buf, params);
  return std::string(buf.begin(), buf.end());
}

int Run(const std::vector<std::string>& argv) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// One path (exact, or fast-JPEG draft) of one image: single-thread end to end and per stage.
nlohmann::json BenchPath(const std::string& bytes, int runs, const MediaPreprocessor& pre) {
  const MediaOptions opts;
  const ImageHeader header = ReadImageHeader(bytes);
  pre.ProcessImage(bytes, opts);  // warm-up
  nlohmann::json j;
  double cpu = 0;
  j["end_to_end_ms"] = MedianMs(
      runs, [&] { pre.ProcessImage(bytes, opts); }, &cpu);
  j["end_to_end_cpu_ms"] = cpu;
  // Stages, for the breakdown (what ProcessImage does, one at a time).
  const ResizeTarget t = pre.processor().ImageResize(header.height, header.width, opts);
  // JPEG at the scale the path decodes (draft mode: reduced; the bench's pictures are upright).
  const bool jpeg = header.format == MediaFormat::kJpeg;
  const int denom = jpeg && pre.limits().jpeg_draft
                        ? JpegDraftDenominator(header.width, header.height, t.width, t.height)
                        : 1;
  const auto decode = [&] {
    return jpeg ? *DecodeJpeg(bytes, denom) : DecodeImage(bytes, header, pre.limits());
  };
  const ImageBuffer decoded = decode();
  j["decoded_to"] = {decoded.width, decoded.height};
  j["decode_ms"] = MedianMs(runs, decode, &cpu);
  j["decode_cpu_ms"] = cpu;
  ImageBuffer resized;
  j["resize_ms"] = MedianMs(
      runs,
      [&] {
        BicubicResampler(decoded.width, decoded.height, t.width, t.height).Resize(decoded, resized);
      },
      &cpu);
  j["resize_cpu_ms"] = cpu;
  const PatchLayout layout = pre.processor().Layout(1, t.height, t.width);
  std::vector<float> out(layout.rows * layout.patch_dim);
  j["patchify_ms"] = MedianMs(
      runs, [&] { pre.processor().WriteFrame(resized, 0, 1, out.data()); }, &cpu);
  j["patchify_cpu_ms"] = cpu;
  j["resized_to"] = {t.width, t.height};
  return j;
}

// N threads, each processing images back to back.
nlohmann::json BenchThreads(const std::string& bytes, int runs, int threads,
                            const MediaPreprocessor& pre) {
  const int per_thread = std::max(2, runs);
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&] {
      for (int k = 0; k < per_thread; ++k) pre.ProcessImage(bytes, {});
    });
  }
  for (auto& th : pool) th.join();
  const double total = Ms(Clock::now() - start);
  return {{"threads", threads},
          {"images_per_s", 1000.0 * threads * per_thread / total},
          {"ms_per_image", total / (threads * per_thread)}};
}

nlohmann::json BenchImage(const std::string& label, const std::string& bytes, int runs, int threads,
                          const MediaPreprocessor& exact, const MediaPreprocessor& fast) {
  nlohmann::json j;
  j["input"] = label;
  j["bytes"] = bytes.size();
  j["exact"] = BenchPath(bytes, runs, exact);
  j["exact"]["resize_scalar_ms"] = [&] {
    const ImageHeader h = ReadImageHeader(bytes);
    const ImageBuffer decoded = DecodeImage(bytes, h, exact.limits());
    const ResizeTarget t = exact.processor().ImageResize(decoded.height, decoded.width, {});
    ImageBuffer resized;
    return MedianMs(std::max(1, runs / 4), [&] {
      BicubicResampler(decoded.width, decoded.height, t.width, t.height)
          .ResizeScalar(decoded, resized);
    });
  }();
  j["fast_jpeg"] = BenchPath(bytes, runs, fast);
  j["exact_threaded"] = BenchThreads(bytes, runs, threads, exact);
  j["fast_jpeg_threaded"] = BenchThreads(bytes, runs, threads, fast);
  return j;
}

// Fast-JPEG mode against the exact path on the same JPEG, in normalized (model input) units.
nlohmann::json DraftError(const std::string& label, const std::string& jpeg,
                          const MediaOptions& opts, const MediaPreprocessor& exact,
                          const MediaPreprocessor& fast) {
  const PreprocessedMedia a = exact.ProcessImage(jpeg, opts);
  const PreprocessedMedia b = fast.ProcessImage(jpeg, opts);
  const auto x = a.pixel_values.as<float>();
  const auto y = b.pixel_values.as<float>();
  double max_err = 0, sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(double(x[i]) - double(y[i]));
    max_err = std::max(max_err, d);
    sum += d;
  }
  const ImageHeader h = ReadImageHeader(jpeg);
  return {{"input", label},
          {"size", {h.width, h.height}},
          {"max_pixels", opts.max_pixels ? *opts.max_pixels : 0},
          {"resized_to", {a.grid_thw[2] * 14, a.grid_thw[1] * 14}},
          {"max_abs_error", max_err},
          {"mean_abs_error", sum / std::max<size_t>(1, x.size())}};
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 9;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool video = true;
  std::string data_dir = "tests/data/m3-tiny/images";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && i + 1 < argc)
      threads = std::max(1, std::atoi(argv[++i]));
    else if (a == "--no-video")
      video = false;
    else if (a == "--golden-images" && i + 1 < argc)
      data_dir = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: m3-bench-media [--runs N] [--threads N] [--no-video] "
                   "[--golden-images DIR]\n");
      return 2;
    }
  }
  const auto processor = std::make_shared<M3VisionProcessor>(M3VisionConfig{});
  const MediaPreprocessor pre(processor, MediaLimits{});
  MediaLimits draft_limits;
  draft_limits.jpeg_draft = true;
  const MediaPreprocessor fast(processor, draft_limits);
  nlohmann::json report;
  report["cores"] = std::thread::hardware_concurrency();
  report["runs"] = runs;
  const std::string jpeg = Encode(".jpg", Picture(1920, 1080), {cv::IMWRITE_JPEG_QUALITY, 90});
  const std::string png = Encode(".png", Picture(3840, 2160), {cv::IMWRITE_PNG_COMPRESSION, 3});
  report["images"] = {BenchImage("1920x1080 JPEG q90", jpeg, runs, threads, pre, fast),
                      BenchImage("3840x2160 PNG (fast_jpeg: same path)", png, std::max(3, runs / 2),
                                 threads, pre, fast)};
  // Content matters to JPEG decoding (entropy decoding dominates noisy pictures): a smoother
  // 1080p JPEG, the golden astronaut photo upscaled, as a second data point.
  if (const cv::Mat photo = cv::imread(data_dir + "/photo_astronaut_512x512.png", cv::IMREAD_COLOR);
      !photo.empty()) {
    const ImageBuffer src = ImageBufferFromBgrMat(photo);
    ImageBuffer big;
    BicubicResampler(src.width, src.height, 1920, 1080).Resize(src, big);
    const cv::Mat frame(1080, 1920, CV_8UC3, big.pixels.data());
    report["images"].push_back(BenchImage("1920x1080 JPEG q90 (astronaut photo upscaled, smooth)",
                                          Encode(".jpg", frame, {cv::IMWRITE_JPEG_QUALITY, 90}),
                                          runs, threads, pre, fast));
  }

  // Fast-JPEG accuracy: the 1080p frame, and the golden photos re-encoded as JPEG q95, at the
  // default size limit (draft applies only when the target is at most half the stored size)
  // and at max_pixels = 224*224, where it does.
  nlohmann::json errors = nlohmann::json::array();
  const std::string jpeg95 = Encode(".jpg", Picture(1920, 1080), {cv::IMWRITE_JPEG_QUALITY, 95});
  errors.push_back(DraftError("1920x1080 synthetic JPEG q95", jpeg95, {}, pre, fast));
  errors.push_back(DraftError("1920x1080 synthetic JPEG q90", jpeg, {}, pre, fast));
  for (const auto& entry : std::filesystem::directory_iterator(data_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("photo_", 0) != 0 || entry.path().extension() != ".png") continue;
    const cv::Mat photo = cv::imread(entry.path().string(), cv::IMREAD_COLOR);
    if (photo.empty()) continue;
    const std::string q95 = Encode(".jpg", photo, {cv::IMWRITE_JPEG_QUALITY, 95});
    MediaOptions small;
    small.max_pixels = 224 * 224;
    errors.push_back(DraftError(name + " as JPEG q95", q95, {}, pre, fast));
    errors.push_back(DraftError(name + " as JPEG q95", q95, small, pre, fast));
  }
  report["fast_jpeg_error"] = errors;

  if (video) {
    const std::string dir = "/tmp/m3-bench-media";
    std::filesystem::create_directories(dir);
    const std::string clip = dir + "/testsrc2_1080p_60s.mp4";
    if (!std::filesystem::exists(clip)) {
      const int rc = Run({"/usr/bin/ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                          "testsrc2=size=1920x1080:rate=30", "-t", "60", "-c:v", "libx264",
                          "-preset", "veryfast", "-pix_fmt", "yuv420p", clip + ".tmp.mp4"});
      if (rc != 0) {
        std::fprintf(stderr, "ffmpeg failed to make the clip\n");
        return 1;
      }
      std::filesystem::rename(clip + ".tmp.mp4", clip);
    }
    std::ifstream in(clip, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const int vruns = std::max(1, std::min(runs, 3));
    nlohmann::json videos = nlohmann::json::array();
    for (double fps : {1.0, 2.0}) {
      MediaOptions opts;
      opts.fps = fps;
      PreprocessedMedia last;
      const double ours = MedianMs(vruns, [&] { last = pre.ProcessVideo(bytes, opts); });
      const int64_t w = last.grid_thw[2] * 14, h = last.grid_thw[1] * 14;
      char filter[128];
      std::snprintf(filter, sizeof filter, "fps=%g,scale=%lld:%lld", fps, static_cast<long long>(w),
                    static_cast<long long>(h));
      const double theirs = MedianMs(vruns, [&] {
        Run({"/usr/bin/ffmpeg", "-nostdin", "-v", "error", "-i", clip, "-vf", filter, "-f", "null",
             "-"});
      });
      videos.push_back({{"clip", "testsrc2 1920x1080 30 fps 60 s H.264"},
                        {"fps", fps},
                        {"frames", last.timestamps.size()},
                        {"resized_to", {w, h}},
                        {"ours_ms", ours},
                        {"ffmpeg_cli_ms", theirs},
                        {"ratio", ours / theirs},
                        {"ffmpeg_filter", filter}});
    }
    report["video"] = videos;
  }
  std::printf("%s\n", report.dump(1).c_str());
  return 0;
}
