// Frame-time sampling; see frame_sampler.h. Sample k sits at k * duration / n, which for a
// constant-rate video is frame floor(k * frame_count / n), the reference's index choice.
#include "gateway/media/frame_sampler.h"

#include <algorithm>
#include <cmath>

namespace m3::media {

std::vector<double> SampleFrameTimes(const FrameSampling& sampling, double duration,
                                     int64_t frame_count) {
  if (sampling.all_frames) return {};
  int64_t n = static_cast<int64_t>(std::floor(duration * sampling.fps + 1e-9));
  n = std::clamp(n, sampling.min_frames, sampling.max_frames);
  if (frame_count > 0) n = std::min(n, frame_count);
  n = std::max<int64_t>(n, 1);
  std::vector<double> times(n);
  for (int64_t k = 0; k < n; ++k)
    times[k] = static_cast<double>(k) * duration / static_cast<double>(n);
  return times;
}

}  // namespace m3::media
