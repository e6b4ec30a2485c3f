// m3-bench-media: media pipeline timings, printed as JSON.
//  - images: a 1920x1080 JPEG and a 3840x2160 PNG (generated deterministically), end to end
//    (header, decode, resize, normalize + patchify) on one thread, the same stages separately,
//    and the throughput of N threads each processing images;
//  - video: a 60 s 1080p H.264 clip (ffmpeg testsrc2, cached under /tmp) sampled at 1 and
//    2 fps, against `ffmpeg -i clip -vf fps=F,scale=W:H -f null -` timed in the same run.
// Medians of several runs. Usage: m3-bench-media [--runs N] [--threads N] [--no-video]
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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

nlohmann::json BenchImage(const std::string& label, const std::string& bytes, int runs, int threads,
                          const MediaPreprocessor& pre) {
  const MediaOptions opts;
  const ImageHeader header = ReadImageHeader(bytes);
  pre.ProcessImage(bytes, opts);  // warm-up
  nlohmann::json j;
  j["input"] = label;
  j["bytes"] = bytes.size();
  double cpu = 0;
  j["end_to_end_ms"] = MedianMs(
      runs, [&] { pre.ProcessImage(bytes, opts); }, &cpu);
  j["end_to_end_cpu_ms"] = cpu;
  // Stages, for the breakdown.
  const ImageBuffer decoded = DecodeImage(bytes, header, pre.limits());
  j["decode_ms"] = MedianMs(
      runs, [&] { DecodeImage(bytes, header, pre.limits()); }, &cpu);
  j["decode_cpu_ms"] = cpu;
  const ResizeTarget t = pre.processor().ImageResize(decoded.height, decoded.width, opts);
  ImageBuffer resized;
  j["resize_ms"] = MedianMs(
      runs,
      [&] {
        BicubicResampler(decoded.width, decoded.height, t.width, t.height).Resize(decoded, resized);
      },
      &cpu);
  j["resize_cpu_ms"] = cpu;
  j["resize_scalar_ms"] = MedianMs(std::max(1, runs / 4), [&] {
    BicubicResampler(decoded.width, decoded.height, t.width, t.height)
        .ResizeScalar(decoded, resized);
  });
  const PatchLayout layout = pre.processor().Layout(1, t.height, t.width);
  std::vector<float> out(layout.rows * layout.patch_dim);
  j["patchify_ms"] = MedianMs(
      runs, [&] { pre.processor().WriteFrame(resized, 0, 1, out.data()); }, &cpu);
  j["patchify_cpu_ms"] = cpu;
  j["resized_to"] = {t.width, t.height};
  // N threads, each processing images back to back.
  const int per_thread = std::max(2, runs);
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&] {
      for (int k = 0; k < per_thread; ++k) pre.ProcessImage(bytes, opts);
    });
  }
  for (auto& th : pool) th.join();
  const double total = Ms(Clock::now() - start);
  j["threads"] = threads;
  j["threaded_images_per_s"] = 1000.0 * threads * per_thread / total;
  j["threaded_ms_per_image"] = total / (threads * per_thread);
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 9;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool video = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && i + 1 < argc)
      threads = std::max(1, std::atoi(argv[++i]));
    else if (a == "--no-video")
      video = false;
    else {
      std::fprintf(stderr, "usage: m3-bench-media [--runs N] [--threads N] [--no-video]\n");
      return 2;
    }
  }
  const MediaPreprocessor pre(std::make_shared<M3VisionProcessor>(M3VisionConfig{}), MediaLimits{});
  nlohmann::json report;
  report["cores"] = std::thread::hardware_concurrency();
  report["runs"] = runs;
  const std::string jpeg = Encode(".jpg", Picture(1920, 1080), {cv::IMWRITE_JPEG_QUALITY, 90});
  const std::string png = Encode(".png", Picture(3840, 2160), {cv::IMWRITE_PNG_COMPRESSION, 3});
  report["images"] = {BenchImage("1920x1080 JPEG q90", jpeg, runs, threads, pre),
                      BenchImage("3840x2160 PNG", png, std::max(3, runs / 2), threads, pre)};

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
