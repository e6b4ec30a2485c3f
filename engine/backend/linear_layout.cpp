// Detection of a Linear's storage layout from its tensors, and the checkpoint-wide validation
// pass (linear_layout.h).
#include "engine/backend/linear_layout.h"

#include <cmath>

#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::backend {

namespace {

bool IsFloat(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16 || t == DType::kF64;
}

std::string Base(const std::string& name) {
  constexpr std::string_view kWeight = ".weight";
  return name.ends_with(kWeight) ? name.substr(0, name.size() - kWeight.size()) : name;
}

[[noreturn]] void Bad(const std::string& name, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "weight '" + name + "' " + what);
}

std::string Dt(const TensorView& v) {
  return std::string(DTypeName(v.dtype));
}

}  // namespace

Shape LinearLayout::shape() const {
  Shape s = weight.shape;
  if (format == WeightFormat::kNvfp4 && !s.empty()) s.back() *= 2;
  return s;
}

LinearLayout DetectLinearLayout(const WeightStore& store, const std::string& name,
                                const Shape* expected) {
  auto view = store.Find(name);
  Require(view.has_value(), ErrorCode::kNotFound,
          "weight '" + name + "' is missing from the checkpoint in " + store.dir());
  LinearLayout l;
  l.weight = *view;
  const std::string base = Base(name);
  const std::string layouts =
      " (a Linear weight is a float tensor, MXFP8: F8_E4M3 with a U8/F8_E8M0 weight_scale_inv "
      "[N, K/32], or NVFP4: U8 [N, K/2] with an F8_E4M3 weight_scale [N, K/16] and an F32 "
      "weight_scale_2)";
  if (IsFloat(view->dtype)) {
    l.format = WeightFormat::kDense;
  } else if (view->dtype == DType::kF8E4M3) {
    l.format = WeightFormat::kMxfp8;
    for (const char* s : {".weight_scale_inv", ".weight_scale"}) {
      if (auto sc = store.Find(base + s)) {
        l.scales = *sc;
        l.scale_name = base + s;
        break;
      }
    }
    if (l.scale_name.empty())
      Bad(name, "is F8_E4M3 without its block scales ('" + base + ".weight_scale_inv' or '" + base +
                    ".weight_scale')" + layouts);
    if (view->shape.size() != 2) Bad(name, "is F8_E4M3 but not 2-D" + layouts);
    const int64_t N = view->shape[0], K = view->shape[1];
    if (K % 32 != 0) Bad(name, "is MXFP8 with K = " + std::to_string(K) + ", not a multiple of 32");
    if (l.scales.dtype != DType::kU8 && l.scales.dtype != DType::kF8E8M0)
      Bad(l.scale_name, "has dtype " + Dt(l.scales) + ", expected U8 or F8_E8M0 (MXFP8 scales)");
    if (l.scales.shape != Shape{N, K / 32})
      Bad(l.scale_name, "has shape " + ShapeString(l.scales.shape) + ", expected " +
                            ShapeString({N, K / 32}) + " for the MXFP8 weight " +
                            ShapeString(view->shape));
  } else if (view->dtype == DType::kU8) {
    l.format = WeightFormat::kNvfp4;
    auto sc = store.Find(base + ".weight_scale");
    auto g = store.Find(base + ".weight_scale_2");
    if (!sc || !g)
      Bad(name, std::string("is U8 without its NVFP4 scales ('") + base + ".weight_scale' and '" +
                    base + ".weight_scale_2')" + layouts);
    l.scales = *sc;
    l.scale_name = base + ".weight_scale";
    l.global = *g;
    if (view->shape.size() != 2) Bad(name, "is U8 (NVFP4) but not 2-D");
    const int64_t N = view->shape[0], K = 2 * view->shape[1];
    if (K % 16 != 0) Bad(name, "is NVFP4 with K = " + std::to_string(K) + ", not a multiple of 16");
    if (l.scales.dtype != DType::kF8E4M3)
      Bad(l.scale_name, "has dtype " + Dt(l.scales) + ", expected F8_E4M3 (NVFP4 scales)");
    if (l.scales.shape != Shape{N, K / 16})
      Bad(l.scale_name, "has shape " + ShapeString(l.scales.shape) + ", expected " +
                            ShapeString({N, K / 16}) + " for the NVFP4 weight " +
                            ShapeString(view->shape));
    if (!IsFloat(g->dtype) || g->numel() != 1)
      Bad(base + ".weight_scale_2", "must be one float (the NVFP4 global scale), not " + Dt(*g) +
                                        " " + ShapeString(g->shape));
    l.global_scale = ToFloat32(*g, base + ".weight_scale_2")[0];
    if (!(l.global_scale > 0.0f) || !std::isfinite(l.global_scale))
      Bad(base + ".weight_scale_2",
          "is " + std::to_string(l.global_scale) + ", expected a positive global scale");
  } else {
    Bad(name, "has dtype " + Dt(*view) + ", which is no weight layout this engine knows" + layouts);
  }
  if (expected && l.shape() != *expected)
    Bad(name, "has shape " + ShapeString(l.shape()) +
                  (l.format != WeightFormat::kDense ? " (dequantized)" : "") + ", expected " +
                  ShapeString(*expected) + " from config.json");
  return l;
}

void ValidateCheckpoint(const WeightStore& store, const QuantConfig& quant,
                        const std::function<bool(const std::string&)>& skip) {
  int64_t unlisted = 0;
  std::string first_unlisted;
  for (const std::string& name : store.Names()) {
    if (!name.ends_with(".weight") || (skip && skip(name))) continue;
    const LinearLayout l = DetectLinearLayout(store, name);
    if (l.format == WeightFormat::kDense) continue;
    const std::string module = Base(name);
    const WeightFormat want = quant.FormatOf(module);
    if (want == WeightFormat::kDense) {
      if (unlisted++ == 0) first_unlisted = name;
      continue;
    }
    Require(want == l.format, ErrorCode::kInvalidArgument,
            "weight '" + name + "' is stored as " + std::string(WeightFormatName(l.format)) +
                " but the quantization config (" + quant.Describe() + ") says " +
                std::string(WeightFormatName(want)));
  }
  if (unlisted > 0)
    Log(LogLevel::kWarn, unlisted, " quantized weights (the first: '", first_unlisted,
        "') are not quantized by the quantization config (", quant.Describe(),
        "): loaded as their tensors say");
}

}  // namespace m3::engine::backend
