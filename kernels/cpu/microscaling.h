// Block-scaled weight formats of the released checkpoints, by row (one output feature of an
// nn.Linear weight [N, K]), on the host: the quantizers tools write checkpoints with and the
// dequantizers the CPU backend loads them with (and the GPU kernels are tested against).
//  - MXFP8: e4m3 codes [K], one e8m0 scale per 32 along K. ModelOpt's rule: the block
//    exponent e = clamp(ceil(log2(amax / 448)), -127, 127) (-127 for an all-zero block),
//    stored biased (e + 127), codes = e4m3(w * 2^-e); w = code * 2^e.
//  - NVFP4: e2m1 values packed two a byte (the even element in the low nibble) [K / 2], one
//    e4m3 scale per 16 along K, and one float32 global scale per tensor (weight_scale_2 =
//    amax / (6 * 448)): block scale s = e4m3(amax_block / (6 * global)), values
//    e2m1(w / (s * global)); w = e2m1 * s * global.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

inline constexpr int64_t kMxfp8Block = 32;
inline constexpr int64_t kNvfp4Block = 16;

// K a multiple of kMxfp8Block: codes [K], scales [K / 32].
void QuantizeMxfp8Row(const float* w, int64_t K, uint8_t* codes, uint8_t* scales);
void DequantizeMxfp8Row(const uint8_t* codes, const uint8_t* scales, int64_t K, float* out);

// The global scale of a tensor whose largest magnitude is amax (1 for an all-zero tensor).
float Nvfp4GlobalScale(float amax);
// K a multiple of kNvfp4Block: packed [K / 2], scales [K / 16] (e4m3).
void QuantizeNvfp4Row(const float* w, int64_t K, float global_scale, uint8_t* packed,
                      uint8_t* scales);
void DequantizeNvfp4Row(const uint8_t* packed, const uint8_t* scales, float global_scale, int64_t K,
                        float* out);

}  // namespace m3::kernels::cpu
