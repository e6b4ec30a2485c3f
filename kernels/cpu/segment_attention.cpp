// SegmentAttention: rotary per row, then AttendRanges per (row, head) over the row's segment.
#include "kernels/cpu/segment_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/rope.h"

namespace m3::kernels::cpu {

void SegmentAttention(float* qkv, int64_t rows, int64_t heads, int64_t head_dim, const float* cos,
                      const float* sin, int64_t rot, const int64_t* segments, int64_t num_segments,
                      float* out) {
  const int64_t width = heads * head_dim, stride = 3 * width;
  ParallelFor(rows, 8, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      ApplyRotaryHalf(qkv + r * stride, heads, head_dim, rot, cos + r * rot, sin + r * rot);
      ApplyRotaryHalf(qkv + r * stride + width, heads, head_dim, rot, cos + r * rot, sin + r * rot);
    }
  });
  const float scale = static_cast<float>(1.0 / std::sqrt(double(head_dim)));
  ParallelFor(rows * heads, 8, [&](int64_t b, int64_t e) {
    std::vector<std::pair<int64_t, int64_t>> ranges(1);
    for (int64_t idx = b; idx < e; ++idx) {
      const int64_t r = idx / heads, h = idx % heads;
      const int64_t seg = std::upper_bound(segments, segments + num_segments + 1, r) - segments - 1;
      ranges[0] = {segments[seg], segments[seg + 1]};
      AttendRanges(qkv + r * stride + h * head_dim, qkv + width + h * head_dim,
                   qkv + 2 * width + h * head_dim, stride, head_dim, scale, ranges,
                   out + r * width + h * head_dim);
    }
  });
}

}  // namespace m3::kernels::cpu
