// Shape checks and float32 dequantization of quantized parts (kernels/cpu/microscaling.h).
#include "engine/backend/quantized_parts.h"

#include "kernels/cpu/microscaling.h"
#include "shared/error.h"

namespace m3::engine::backend {

namespace {
int64_t PartRows(const QuantizedPart& p) {
  return p.codes.shape.empty() ? 0 : p.codes.shape[0];
}
}  // namespace

void CheckQuantizedParts(WeightFormat format, std::span<const QuantizedPart> parts,
                         const Shape& shape) {
  auto need = [](bool ok, const char* what) {
    Require(ok, ErrorCode::kInternal, std::string("quantized weight upload: ") + what);
  };
  need(format != WeightFormat::kDense, "a dense format");
  need(shape.size() >= 2, "a weight of fewer than 2 dimensions");
  const int64_t K = shape.back(), block = WeightFormatBlock(format);
  need(K % block == 0, "K is not a multiple of the format's block");
  const bool mx = format == WeightFormat::kMxfp8;
  const int64_t code_cols = mx ? K : K / 2;
  int64_t rows = 0;
  for (const QuantizedPart& p : parts) {
    need(p.codes.shape.size() == 2 && p.scales.shape.size() == 2, "parts must be 2-D");
    need(p.codes.shape[1] == code_cols && p.scales.shape[1] == K / block &&
             p.scales.shape[0] == PartRows(p),
         "part widths do not match K");
    need(mx ? p.codes.dtype == DType::kF8E4M3 : p.codes.dtype == DType::kU8, "code dtype");
    need(mx ? (p.scales.dtype == DType::kU8 || p.scales.dtype == DType::kF8E8M0)
            : p.scales.dtype == DType::kF8E4M3,
         "scale dtype");
    rows += PartRows(p);
  }
  need(rows * K == NumElements(shape), "parts do not fill the shape");
}

std::vector<float> DequantizeParts(WeightFormat format, std::span<const QuantizedPart> parts,
                                   const Shape& shape) {
  CheckQuantizedParts(format, parts, shape);
  const int64_t K = shape.back(), block = WeightFormatBlock(format);
  std::vector<float> out(static_cast<size_t>(NumElements(shape)));
  float* dst = out.data();
  for (const QuantizedPart& p : parts) {
    const int64_t code_cols = p.codes.shape[1], scale_cols = K / block;
    for (int64_t r = 0; r < PartRows(p); ++r, dst += K) {
      const uint8_t* codes = p.codes.data + r * code_cols;
      const uint8_t* scales = p.scales.data + r * scale_cols;
      if (format == WeightFormat::kMxfp8)
        kernels::cpu::DequantizeMxfp8Row(codes, scales, K, dst);
      else
        kernels::cpu::DequantizeNvfp4Row(codes, scales, p.global_scale, K, dst);
    }
  }
  return out;
}

}  // namespace m3::engine::backend
