// Non-causal attention within segments (the vision tower: each image / video segment attends
// only to itself), the CPU twin of the GPU variable-length attention. Reads q, k and v from one
// fused projection row [q heads | k heads | v heads] after rotating the first `rot` channels of
// each q / k head with per-row cos/sin (rotate-half, rope.h); out [rows, heads, head_dim].
// Segment i is rows [segments[i], segments[i + 1]).
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

// qkv is rotated in place (its q and k parts).
void SegmentAttention(float* qkv, int64_t rows, int64_t heads, int64_t head_dim, const float* cos,
                      const float* sin, int64_t rot, const int64_t* segments, int64_t num_segments,
                      float* out);

}  // namespace m3::kernels::cpu
