// Frame-time sampling; see frame_sampler.h. Sample k sits at k * duration / n, which for a
// constant-rate video is frame floor(k * frame_count / n), the reference's index choice.
#include "gateway/media/frame_sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "shared/error.h"

namespace m3::media {

std::vector<double> SampleFrameTimes(const FrameSampling& sampling, double duration,
                                     int64_t frame_count) {
  if (sampling.all_frames) return {};
  // In double until clamped: a request's fps (up to 1e308) times the duration overflows int64.
  double want = std::floor(duration * sampling.fps + 1e-9);
  if (!(want >= 0)) want = 0;  // NaN from a corrupt duration
  want = std::clamp(want, static_cast<double>(sampling.min_frames),
                    static_cast<double>(sampling.max_frames));
  if (frame_count > 0) want = std::min(want, static_cast<double>(frame_count));
  // The container's frame count and the request's max_frames can both be huge; the times
  // vector is allocated before any other check sees the count.
  Require(want <= static_cast<double>(kMaxSampledFrames), ErrorCode::kTooLarge,
          "video sampling asks for more than " + std::to_string(kMaxSampledFrames) +
              " frames (fps x duration, capped by max_frames and the frames that exist)");
  const int64_t n = std::max<int64_t>(static_cast<int64_t>(want), 1);
  std::vector<double> times(n);
  for (int64_t k = 0; k < n; ++k)
    times[k] = static_cast<double>(k) * duration / static_cast<double>(n);
  return times;
}

}  // namespace m3::media
