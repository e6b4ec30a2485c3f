// SampleFrameTimes: which instants of a video become frames. `fps` frames per second of video
// (the count truncated, as the reference's int(total / video_fps * fps)), clamped to
// [min_frames, max_frames] and to the frames that exist, spread evenly from the start.
#pragma once

#include <cstdint>
#include <vector>

#include "gateway/media/vision_processor.h"

namespace m3::media {

// Most frames one sampling may pick (the times are allocated before the frames are decoded).
inline constexpr int64_t kMaxSampledFrames = int64_t{1} << 20;

// Seconds from the stream start, ascending. Empty when sampling.all_frames (every frame).
// Throws kTooLarge when more than kMaxSampledFrames would be sampled.
std::vector<double> SampleFrameTimes(const FrameSampling& sampling, double duration,
                                     int64_t frame_count);

}  // namespace m3::media
