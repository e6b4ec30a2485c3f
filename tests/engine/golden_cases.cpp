// GoldenSet loading and the parity-figure report.
#include "tests/engine/golden_cases.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "engine/model_registry.h"
#include "tests/test_util.h"

namespace m3::test {

std::vector<float> GoldenSet::Floats(const std::string& key) const {
  return ToFloat32(cases.Get(key), key);
}
std::vector<int64_t> GoldenSet::Ints(const std::string& key) const {
  return ToInt64(cases.Get(key), key);
}
Shape GoldenSet::ShapeOf(const std::string& key) const {
  return cases.Get(key).shape;
}

NamedTensors GoldenSet::InputTensors(const std::string& prefix) const {
  NamedTensors out;
  for (const char* name :
       {"input_ids", "pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw"}) {
    auto v = cases.Find(prefix + "." + name);
    if (!v) continue;
    HostTensor t(v->dtype, v->shape);
    std::memcpy(t.data(), v->data, v->nbytes);
    out.emplace_back(name, std::move(t));
  }
  return out;
}

engine::ModelInputs GoldenSet::Inputs(const std::string& prefix) const {
  engine::ModelInputs in;
  in.input_ids = Ints(prefix + ".input_ids");
  auto vision = [&](const std::string& pix, const std::string& grid) {
    std::optional<engine::VisionInput> v;
    if (!cases.Has(prefix + "." + pix)) return v;
    v.emplace();
    v->pixels = Floats(prefix + "." + pix);
    Shape s = ShapeOf(prefix + "." + pix);
    v->rows = s[0];
    v->patch_dim = s[1];
    auto g = Ints(prefix + "." + grid);
    for (size_t i = 0; i + 2 < g.size(); i += 3) v->grids.push_back({g[i], g[i + 1], g[i + 2]});
    return v;
  };
  in.images = vision("pixel_values", "image_grid_thw");
  in.videos = vision("pixel_values_videos", "video_grid_thw");
  return in;
}

const GoldenSet& Golden(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<GoldenSet>> sets;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = sets[name];
  if (!slot) {
    slot.reset(new GoldenSet{name,
                             SafetensorsFile::Open(DataPath(name + "/model_cases.safetensors")),
                             engine::LoadModel(DataPath(name + "/model"))});
  }
  return *slot;
}

namespace {

struct ParityReport {
  std::map<std::string, double> worst;
  ~ParityReport() {
    if (worst.empty()) return;
    std::printf("parity (max relative L2 per case):\n");
    for (const auto& [k, v] : worst) std::printf("  %-40s %.3e\n", k.c_str(), v);
  }
};

ParityReport& Report() {
  static ParityReport report;
  return report;
}

}  // namespace

void RecordParity(const std::string& key, double rel_l2) {
  double& w = Report().worst[key];
  w = std::max(w, rel_l2);
}

namespace {

void AppendMedia(const std::optional<engine::VisionInput>& v, bool video,
                 std::vector<engine::MediaItem>& out) {
  if (!v) return;
  int64_t row = 0;
  for (const auto& g : v->grids) {
    engine::MediaItem m;
    m.video = video;
    m.grid_thw = g;
    m.placeholder_tokens = g[0] * g[1] * g[2] / 4;
    m.patch_dim = v->patch_dim;
    const int64_t rows = g[0] * g[1] * g[2];
    m.patches.assign(v->pixels.begin() + row * v->patch_dim,
                     v->pixels.begin() + (row + rows) * v->patch_dim);
    row += rows;
    out.push_back(std::move(m));
  }
}

}  // namespace

std::vector<engine::MediaItem> MediaItems(const engine::ModelInputs& inputs) {
  std::vector<engine::MediaItem> out;
  AppendMedia(inputs.images, false, out);
  AppendMedia(inputs.videos, true, out);
  return out;
}

}  // namespace m3::test
