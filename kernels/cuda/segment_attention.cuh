// Vision segment attention on the GPU, the twin of kernels/cpu/segment_attention.h: rotate-half
// rotary (cos/sin f32 [rows, rot]) on q and k of qkv [rows, 3 * heads * head_dim] in place,
// then non-causal attention of each row within its segment [segments[i], segments[i + 1]) ->
// out [rows, heads * head_dim]. bf16 storage, f32 softmax; segments i32 on the device.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

void SegmentAttention(bf16* qkv, int64_t rows, int64_t heads, int64_t head_dim, const float* cos,
                      const float* sin, int64_t rot, const int32_t* segments, int64_t num_segments,
                      bf16* out, cudaStream_t stream);

}  // namespace m3::kernels::cuda
