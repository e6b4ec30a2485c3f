// Reading and checking MiniMax-M3 VL processor settings; see m3_vision_config.h.
#include "gateway/media/m3_vision_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "shared/error.h"

namespace m3::media {
namespace {

using Json = nlohmann::json;
using Bounds = M3VisionConfigBounds;

// A value as the error message quotes it: its JSON, cut short.
std::string Quote(const Json& j) {
  std::string s = j.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// Reads the keys of one JSON object (a whole file, or a section of processor_config.json);
// errors name the file and the key as "image_processor.size.longest_edge".
class SectionReader {
 public:
  SectionReader(const Json& object, std::string file, std::string prefix)
      : j_(&object), file_(std::move(file)), prefix_(std::move(prefix)) {}

  const std::string& file() const { return file_; }
  std::string Name(std::string_view key) const { return prefix_ + std::string(key); }
  std::string Where(std::string_view key) const { return file_ + ": " + Name(key); }

  const Json* Find(const char* key) const {
    auto it = j_->find(key);
    return it == j_->end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<int64_t> Int(const char* key, int64_t lo, int64_t hi) const {
    const Json* v = Find(key);
    if (!v) return std::nullopt;
    const std::string range =
        " must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    std::optional<double> d;
    if (v->is_number_unsigned()) {
      d = static_cast<double>(v->get<uint64_t>());
    } else if (v->is_number_integer()) {
      d = static_cast<double>(v->get<int64_t>());
    } else if (v->is_number_float()) {
      d = v->get<double>();
    }
    Require(d && std::isfinite(*d) && std::floor(*d) == *d, ErrorCode::kInvalidArgument,
            Where(key) + range + ", got " + Quote(*v));
    Require(*d >= static_cast<double>(lo) && *d <= static_cast<double>(hi),
            ErrorCode::kInvalidArgument, Where(key) + range + ", got " + Quote(*v));
    return static_cast<int64_t>(*d);
  }

  // A finite number in (lo, hi].
  std::optional<double> Number(const char* key, double lo, double hi) const {
    const Json* v = Find(key);
    if (!v) return std::nullopt;
    const bool ok = v->is_number() && std::isfinite(v->get<double>()) && v->get<double>() > lo &&
                    v->get<double>() <= hi;
    Require(ok, ErrorCode::kInvalidArgument,
            Where(key) + " must be a number over " + Quote(Json(lo)) + " and at most " +
                Quote(Json(hi)) + ", got " + Quote(*v));
    return v->get<double>();
  }

  std::optional<bool> Bool(const char* key) const {
    const Json* v = Find(key);
    if (!v) return std::nullopt;
    Require(v->is_boolean(), ErrorCode::kInvalidArgument,
            Where(key) + " must be true or false, got " + Quote(*v));
    return v->get<bool>();
  }

  // Three finite numbers (one per RGB channel), or one for all three as the reference allows;
  // `positive` for divisors.
  std::optional<std::array<double, 3>> Channels(const char* key, bool positive) const {
    const Json* v = Find(key);
    if (!v) return std::nullopt;
    const std::string want = std::string(" must be ") +
                             (positive ? "a positive number" : "a finite number") +
                             " or a list of three, got " + Quote(*v);
    auto value = [&](const Json& x) {
      const bool ok =
          x.is_number() && std::isfinite(x.get<double>()) && (!positive || x.get<double>() > 0);
      Require(ok, ErrorCode::kInvalidArgument, Where(key) + want);
      return x.get<double>();
    };
    if (v->is_number()) {
      const double x = value(*v);
      return std::array<double, 3>{x, x, x};
    }
    Require(v->is_array() && v->size() == 3, ErrorCode::kInvalidArgument, Where(key) + want);
    return std::array<double, 3>{value((*v)[0]), value((*v)[1]), value((*v)[2])};
  }

  std::optional<SectionReader> Object(const char* key) const {
    const Json* v = Find(key);
    if (!v) return std::nullopt;
    Require(v->is_object(), ErrorCode::kInvalidArgument,
            Where(key) + " must be an object, got " + Quote(*v));
    return SectionReader(*v, file_, Name(key) + ".");
  }

  // The reference's steps that this pipeline always takes: switching one off, or another
  // resampling filter or scale, would silently give the model other numbers.
  void CheckFixedSteps() const {
    for (const char* key : {"do_resize", "do_rescale", "do_normalize"}) {
      Require(Bool(key).value_or(true), ErrorCode::kUnsupported,
              Where(key) + " is false; only the reference's default (true) is implemented");
    }
    Bool("do_convert_rgb");  // every decoder converts to RGB; the value only has to be sane
    if (const Json* v = Find("resample")) {
      Require(*v == Json(3), ErrorCode::kUnsupported,
              Where("resample") + " is " + Quote(*v) +
                  "; only 3 (bicubic, the reference's default) is implemented");
    }
    if (const Json* v = Find("rescale_factor")) {
      const bool ok = v->is_number() && std::abs(v->get<double>() * 255.0 - 1.0) < 1e-9;
      Require(ok, ErrorCode::kUnsupported,
              Where("rescale_factor") + " is " + Quote(*v) +
                  "; only 1/255 (the reference's default) is implemented");
    }
  }

 private:
  const Json* j_;  // a pointer so readers can be reassigned
  std::string file_, prefix_;
};

// The patch layout and normalization, which images and videos share (one vision tower).
struct Common {
  std::optional<int64_t> patch_size, temporal_patch_size, merge_size;
  std::optional<std::array<double, 3>> mean, std;
};

Common ReadCommon(const SectionReader& r) {
  Common c;
  c.patch_size = r.Int("patch_size", 1, Bounds::kMaxPatchSize);
  c.temporal_patch_size = r.Int("temporal_patch_size", 1, Bounds::kMaxTemporalPatchSize);
  c.merge_size = r.Int("merge_size", 1, Bounds::kMaxMergeSize);
  c.mean = r.Channels("image_mean", /*positive=*/false);
  c.std = r.Channels("image_std", /*positive=*/true);
  r.CheckFixedSteps();
  return c;
}

// Sets `value` from `from` where it has one; where the image settings already set it
// (`image` names them), the two must agree.
template <typename T>
void Merge(const std::optional<T>& from, const SectionReader& r, const char* key, T& value,
           const SectionReader* image) {
  if (!from) return;
  if (image && image->Find(key)) {
    Require(*from == value, ErrorCode::kInvalidArgument,
            r.Where(key) + " (" + Quote(Json(*from)) + ") differs from " + image->Where(key) +
                " (" + Quote(Json(value)) + "); images and videos share one vision tower");
  }
  value = *from;
}

void ApplyCommon(const SectionReader& r, M3VisionConfig& c, const SectionReader* image) {
  const Common v = ReadCommon(r);
  Merge(v.patch_size, r, "patch_size", c.patch_size, image);
  Merge(v.temporal_patch_size, r, "temporal_patch_size", c.temporal_patch_size, image);
  Merge(v.merge_size, r, "merge_size", c.merge_size, image);
  Merge(v.mean, r, "image_mean", c.image_mean, image);
  Merge(v.std, r, "image_std", c.image_std, image);
}

// min/max pixels: "size" {shortest_edge, longest_edge} (transformers' form; a stale
// {height, width} of early checkpoints is ignored as the reference ignores it), then explicit
// min_pixels / max_pixels, which win. Checked together so the message names the keys used.
void ApplyPixels(const SectionReader& r, int64_t& min_pixels, int64_t& max_pixels) {
  std::string min_key = "the default min_pixels", max_key = "the default max_pixels";
  auto take = [&](const SectionReader& from, const char* key, int64_t& value, std::string& name) {
    if (auto v = from.Int(key, 1, Bounds::kMaxPixels)) {
      value = *v;
      name = from.Name(key);
    }
  };
  if (auto size = r.Object("size")) {
    take(*size, "shortest_edge", min_pixels, min_key);
    take(*size, "longest_edge", max_pixels, max_key);
  }
  take(r, "min_pixels", min_pixels, min_key);
  take(r, "max_pixels", max_pixels, max_key);
  Require(min_pixels <= max_pixels, ErrorCode::kInvalidArgument,
          r.file() + ": " + min_key + " (" + std::to_string(min_pixels) + ") is over " + max_key +
              " (" + std::to_string(max_pixels) + ")");
}

void ApplyVideo(const SectionReader& r, M3VisionConfig& c) {
  ApplyPixels(r, c.video_min_pixels, c.video_max_pixels);
  if (auto v = r.Int("total_pixels", 1, Bounds::kMaxTotalPixels)) c.video_total_pixels = *v;
  if (auto v = r.Number("fps", 0.0, Bounds::kMaxFps)) c.video_fps = *v;
  if (auto v = r.Int("min_frames", 1, Bounds::kMaxFrames)) c.video_min_frames = *v;
  if (auto v = r.Int("max_frames", 1, Bounds::kMaxFrames)) c.video_max_frames = *v;
  Require(c.video_min_frames <= c.video_max_frames, ErrorCode::kInvalidArgument,
          r.Where("min_frames") + " (" + std::to_string(c.video_min_frames) + ") is over " +
              r.Name("max_frames") + " (" + std::to_string(c.video_max_frames) + ")");
  if (auto v = r.Bool("do_sample_frames")) c.video_sample_frames = *v;
}

std::optional<Json> ReadJson(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  Require(std::filesystem::is_regular_file(path, ec), ErrorCode::kInvalidArgument,
          path.string() + " is not a regular file");
  std::ifstream in(path, std::ios::binary);
  Require(in.good(), ErrorCode::kNotFound, "cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  Require(!j.is_discarded(), ErrorCode::kInvalidArgument, path.string() + ": invalid JSON");
  Require(j.is_object(), ErrorCode::kInvalidArgument, path.string() + ": not a JSON object");
  return j;
}

}  // namespace

void CheckM3VisionConfig(const M3VisionConfig& c, const std::string& where) {
  auto in = [&](int64_t v, int64_t lo, int64_t hi, const char* name) {
    Require(v >= lo && v <= hi, ErrorCode::kInvalidArgument,
            where + ": " + name + " must be from " + std::to_string(lo) + " to " +
                std::to_string(hi) + ", got " + std::to_string(v));
  };
  in(c.patch_size, 1, Bounds::kMaxPatchSize, "patch_size");
  in(c.temporal_patch_size, 1, Bounds::kMaxTemporalPatchSize, "temporal_patch_size");
  in(c.merge_size, 1, Bounds::kMaxMergeSize, "merge_size");
  in(c.image_min_pixels, 1, c.image_max_pixels, "image min_pixels (at most max_pixels)");
  in(c.image_max_pixels, 1, Bounds::kMaxPixels, "image max_pixels");
  in(c.video_min_pixels, 1, c.video_max_pixels, "video min_pixels (at most max_pixels)");
  in(c.video_max_pixels, 1, Bounds::kMaxPixels, "video max_pixels");
  in(c.video_total_pixels, 1, Bounds::kMaxTotalPixels, "video total_pixels");
  in(c.video_min_frames, 1, c.video_max_frames, "video min_frames (at most max_frames)");
  in(c.video_max_frames, 1, Bounds::kMaxFrames, "video max_frames");
  Require(c.video_fps > 0 && c.video_fps <= Bounds::kMaxFps, ErrorCode::kInvalidArgument,
          where + ": video fps must be over 0 and at most " + std::to_string(Bounds::kMaxFps));
  for (int i = 0; i < 3; ++i) {
    Require(std::isfinite(c.image_mean[i]) && std::isfinite(c.image_std[i]) && c.image_std[i] > 0,
            ErrorCode::kInvalidArgument,
            where + ": image_mean must be finite and image_std finite and positive");
  }
}

M3VisionConfig LoadM3VisionConfig(const std::string& model_dir) {
  M3VisionConfig c;
  const std::filesystem::path dir(model_dir);
  const std::optional<Json> combined = ReadJson(dir / "processor_config.json");
  const std::string combined_name = (dir / "processor_config.json").string();

  // The image settings: processor_config.json's section, else preprocessor_config.json.
  std::optional<Json> image_file;
  std::optional<SectionReader> image;
  if (combined) image = SectionReader(*combined, combined_name, "").Object("image_processor");
  if (!image) {
    image_file = ReadJson(dir / "preprocessor_config.json");
    if (image_file) image.emplace(*image_file, (dir / "preprocessor_config.json").string(), "");
  }
  if (image) {
    ApplyCommon(*image, c, nullptr);
    ApplyPixels(*image, c.image_min_pixels, c.image_max_pixels);
  }

  std::optional<Json> video_file;
  std::optional<SectionReader> video;
  if (combined) video = SectionReader(*combined, combined_name, "").Object("video_processor");
  if (!video) {
    video_file = ReadJson(dir / "video_preprocessor_config.json");
    if (video_file) {
      video.emplace(*video_file, (dir / "video_preprocessor_config.json").string(), "");
    }
  }
  if (video) {
    ApplyCommon(*video, c, image ? &*image : nullptr);
    ApplyVideo(*video, c);
  }
  CheckM3VisionConfig(c, model_dir);
  return c;
}

}  // namespace m3::media
