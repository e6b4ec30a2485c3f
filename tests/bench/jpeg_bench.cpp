// m3-bench-jpeg: single-thread timings of the still-JPEG path on given files, printed as JSON,
// for a same-machine, same-bytes comparison with the reference (scripts/device/bench_images.sh
// runs both on one core). Per file, median and min of N rounds (and the median thread CPU time),
// every case run once per round:
//  - ours end to end, the path the preprocessor takes for a JPEG: header + EXIF orientation,
//    smart resize target, decode + antialiased bicubic resize, then the patch layout, the F32
//    output tensor and normalize + patchify. "two_pass": full-size DecodeJpeg, then
//    BicubicResampler; "stream": DecodeJpegResized (strips decoded and resized on the fly);
//  - the stages alone: full-size decode, resize, patchify;
//  - libjpeg-turbo floors, straight jpeglib calls with PIL's settings (RGB out, ISLOW IDCT,
//    fancy upsampling): a full-size decode (what any exact decoder built on libjpeg-turbo pays)
//    and a 1/8-scale decode (about the entropy-decoding floor: every DCT coefficient is still
//    Huffman-decoded, whatever the output size).
// Usage: m3-bench-jpeg [--runs N] FILE.jpg...
#include <time.h>

#include <algorithm>
#include <chrono>
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// After <cstdio>: jpeglib.h uses FILE and size_t without including their headers.
#include <jpeglib.h>

#include "gateway/media/bicubic_resampler.h"
#include "gateway/media/exif_orientation.h"
#include "gateway/media/jpeg_decoder.h"
#include "gateway/media/m3_vision_processor.h"
#include "shared/error.h"
#include "shared/tensor.h"

using namespace m3::media;
using Clock = std::chrono::steady_clock;

namespace {

#define M3_STRINGIFY_(x) #x
#define M3_STRINGIFY(x) M3_STRINGIFY_(x)

double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Named cases timed round-robin: each case warms up once, then every round runs every case
// once, so drift on a shared machine (other tenants, clock changes) affects all cases alike.
// Per case: median and min wall time, and the median CPU time of this thread (on a loaded
// machine the better estimate of the cost on one free core).
using Case = std::pair<std::string, std::function<void()>>;

nlohmann::json TimeInterleaved(int runs, const std::vector<Case>& cases) {
  for (const auto& c : cases) c.second();
  std::vector<std::vector<double>> wall(cases.size()), cpu(cases.size());
  for (int i = 0; i < runs; ++i) {
    for (size_t k = 0; k < cases.size(); ++k) {
      const double c0 = ThreadCpuMs();
      const auto t0 = Clock::now();
      cases[k].second();
      wall[k].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      cpu[k].push_back(ThreadCpuMs() - c0);
    }
  }
  nlohmann::json j;
  for (size_t k = 0; k < cases.size(); ++k) {
    j[cases[k].first] = {{"median_ms", Median(wall[k])},
                         {"min_ms", *std::min_element(wall[k].begin(), wall[k].end())},
                         {"cpu_median_ms", Median(cpu[k])}};
  }
  return j;
}

// The floors: libjpeg-turbo alone. Error handling as in jpeg_decoder.cpp: error_exit longjmps
// back into LibjpegDecode, whose frame holds nothing with a destructor.
struct FloorError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
};

void FloorOnError(j_common_ptr cinfo) {
  std::longjmp(reinterpret_cast<FloorError*>(cinfo->err)->jump, 1);
}
void FloorOnMessage(j_common_ptr, int) {}

// Decodes `bytes` at 1/scale_denom into `out` (allocated here, as a decoder would). False on a
// libjpeg error.
bool LibjpegDecode(std::string_view bytes, int scale_denom, ImageBuffer& out) {
  jpeg_decompress_struct cinfo{};
  FloorError err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = FloorOnError;
  err.mgr.emit_message = FloorOnMessage;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  cinfo.scale_num = 1;
  cinfo.scale_denom = static_cast<unsigned int>(scale_denom);
  jpeg_start_decompress(&cinfo);
  out.Allocate(cinfo.output_width, cinfo.output_height, ChannelOrder::kRGB);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW rows[16];
    const JDIMENSION first = cinfo.output_scanline;
    const JDIMENSION n = std::min<JDIMENSION>(16, cinfo.output_height - first);
    for (JDIMENSION i = 0; i < n; ++i) rows[i] = out.row(first + i);
    jpeg_read_scanlines(&cinfo, rows, n);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

ImageBuffer LibjpegDecodeOrThrow(std::string_view bytes, int scale_denom) {
  ImageBuffer out;
  m3::Require(LibjpegDecode(bytes, scale_denom, out), m3::ErrorCode::kInvalidArgument,
              "libjpeg cannot decode the file");
  return out;
}

// What MediaPreprocessor::ProcessImage does with a JPEG (default options), end to end, the
// header read through libjpeg; `decode_resize` turns the bytes into the resized picture (throws
// for CMYK, which this library alone does not decode).
template <typename DecodeResize>
m3::HostTensor EndToEnd(std::string_view bytes, const M3VisionProcessor& proc,
                        DecodeResize&& decode_resize) {
  const JpegInfo info = ReadJpegInfo(bytes);
  const bool swap = OrientationSwapsAxes(info.orientation);
  const ResizeTarget t = proc.ImageResize(swap ? info.width : info.height,
                                          swap ? info.height : info.width, MediaOptions{});
  const ImageBuffer resized = decode_resize(bytes, t);
  const PatchLayout layout = proc.Layout(1, t.height, t.width);
  auto out = m3::HostTensor::Uninitialized(m3::DType::kF32, {layout.rows, layout.patch_dim});
  proc.WriteFrame(resized, 0, 1, out.as<float>().data());
  return out;
}

ImageBuffer TwoPass(std::string_view bytes, const ResizeTarget& t) {
  std::optional<ImageBuffer> decoded = DecodeJpeg(bytes);
  m3::Require(decoded.has_value(), m3::ErrorCode::kUnsupported, "CMYK JPEG: not benchmarked");
  ImageBuffer resized;
  BicubicResampler(decoded->width, decoded->height, t.width, t.height).Resize(*decoded, resized);
  return resized;
}

ImageBuffer Stream(std::string_view bytes, const ResizeTarget& t) {
  std::optional<ImageBuffer> resized = DecodeJpegResized(bytes, t.width, t.height);
  m3::Require(resized.has_value(), m3::ErrorCode::kUnsupported, "CMYK JPEG: not benchmarked");
  return std::move(*resized);
}

bool SameFloats(const m3::HostTensor& a, const m3::HostTensor& b) {
  return a.nbytes() == b.nbytes() && std::equal(a.data(), a.data() + a.nbytes(), b.data());
}

bool SamePixels(const ImageBuffer& a, const ImageBuffer& b) {
  const size_t n = static_cast<size_t>(a.width * a.height * ImageBuffer::kChannels);
  return a.width == b.width && a.height == b.height && a.order == b.order &&
         std::equal(a.pixels.begin(), a.pixels.begin() + n, b.pixels.begin());
}

nlohmann::json BenchFile(const std::string& path, const std::string& bytes, int runs,
                         const M3VisionProcessor& proc) {
  const JpegInfo info = ReadJpegInfo(bytes);
  const bool swap = OrientationSwapsAxes(info.orientation);
  const ResizeTarget t = proc.ImageResize(swap ? info.width : info.height,
                                          swap ? info.height : info.width, MediaOptions{});
  const PatchLayout layout = proc.Layout(1, t.height, t.width);
  nlohmann::json j;
  j["file"] = path;
  j["bytes"] = bytes.size();
  j["size"] = {info.width, info.height};
  j["orientation"] = info.orientation;
  j["resized_to"] = {t.width, t.height};
  j["patch_rows"] = layout.rows;

  const m3::HostTensor reference = EndToEnd(bytes, proc, TwoPass);
  j["stream_identical_to_two_pass"] = SameFloats(EndToEnd(bytes, proc, Stream), reference);
  // The full decode must give our decoder's pixels (before orientation).
  const std::optional<ImageBuffer> decoded = DecodeJpeg(bytes);
  m3::Require(decoded.has_value(), m3::ErrorCode::kUnsupported, "CMYK JPEG: not benchmarked");
  const ImageBuffer floor = LibjpegDecodeOrThrow(bytes, 1);
  if (info.orientation == 1) j["libjpeg_full_identical_to_decode"] = SamePixels(floor, *decoded);
  const ImageBuffer eighth = LibjpegDecodeOrThrow(bytes, 8);
  j["libjpeg_scale_1_8_size"] = {eighth.width, eighth.height};

  ImageBuffer resized;
  BicubicResampler(decoded->width, decoded->height, t.width, t.height).Resize(*decoded, resized);
  const std::vector<Case> cases = {
      {"ours_e2e_two_pass", [&] { EndToEnd(bytes, proc, TwoPass); }},
      {"ours_e2e_stream", [&] { EndToEnd(bytes, proc, Stream); }},
      // The stages alone, on the same data.
      {"stage_decode_full", [&] { DecodeJpeg(bytes); }},
      {"stage_resize",
       [&] {
         ImageBuffer out;
         BicubicResampler(decoded->width, decoded->height, t.width, t.height).Resize(*decoded, out);
       }},
      {"stage_patchify",
       [&] {
         auto out = m3::HostTensor::Uninitialized(m3::DType::kF32, {layout.rows, layout.patch_dim});
         proc.WriteFrame(resized, 0, 1, out.as<float>().data());
       }},
      {"libjpeg_full_rgb", [&] { LibjpegDecodeOrThrow(bytes, 1); }},
      {"libjpeg_scale_1_8", [&] { LibjpegDecodeOrThrow(bytes, 8); }}};
  j.update(TimeInterleaved(runs, cases));
  return j;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line
                                        : line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 15;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (!a.empty() && a[0] == '-') {
      files.clear();
      break;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: m3-bench-jpeg [--runs N] FILE.jpg...\n");
    return 2;
  }
  const M3VisionProcessor proc{M3VisionConfig{}};
  nlohmann::json report;
  report["runs"] = runs;
  report["threads"] = 1;
  report["cpu"] = CpuModel();
  report["compiler"] = __VERSION__;
  report["libjpeg_turbo"] = M3_STRINGIFY(LIBJPEG_TURBO_VERSION);
  report["files"] = nlohmann::json::array();
  int rc = 0;
  for (const std::string& path : files) {
    try {
      std::ifstream in(path, std::ios::binary);
      m3::Require(in.is_open(), m3::ErrorCode::kNotFound, "cannot open " + path);
      const std::string bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      report["files"].push_back(BenchFile(path, bytes, runs, proc));
    } catch (const std::exception& e) {
      report["files"].push_back({{"file", path}, {"error", e.what()}});
      rc = 1;
    }
  }
  std::printf("%s\n", report.dump(1).c_str());
  return rc;
}
