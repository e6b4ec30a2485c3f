// RunScheduledEncodes: encode, fill the cache, hand the features to the waiting sequences.
#include "engine/runtime/scheduled_encodes.h"

#include <algorithm>

#include "shared/error.h"

namespace m3::engine {

void RunScheduledEncodes(ScheduledStep& step, ModelRunner& runner, EncoderCache& cache) {
  auto has_failed = [&](const Sequence* seq) {
    return std::any_of(step.failed.begin(), step.failed.end(),
                       [&](const auto& f) { return f.first == seq; });
  };
  for (const ScheduledEncode& e : step.encodes) {
    // Nobody left to use it: a sequence stops encoding at its first failure.
    if (has_failed(e.source.seq) &&
        std::all_of(e.sharers.begin(), e.sharers.end(),
                    [&](const SegmentSlot& s) { return has_failed(s.seq); }))
      continue;
    const PlacedSegment& ps = e.placed();
    const MediaItem& item = e.source.seq->request().media[static_cast<size_t>(ps.item)];
    std::shared_ptr<const EncoderOutput> out;
    try {
      out =
          runner.Encode(item.patches.data() + ps.segment.patch_offset * item.patch_dim, ps.segment);
      Require(out && out->tokens() == ps.segment.tokens, ErrorCode::kInternal,
              "the encoder returned the wrong number of feature rows");
    } catch (const Error& err) {
      auto fail = [&](const SegmentSlot& s) {
        if (has_failed(s.seq)) return;
        step.Unschedule(s.seq);
        step.failed.emplace_back(s.seq, err);
      };
      fail(e.source);
      for (const SegmentSlot& s : e.sharers) fail(s);
      continue;
    }
    cache.Insert(ps.key, out);
    if (!e.source.preempted && !has_failed(e.source.seq))
      e.source.seq->features[e.source.segment] = out;
    for (const SegmentSlot& s : e.sharers) {
      if (has_failed(s.seq)) continue;
      // The lookup a sharer stands for (a hit, unless the cache could not keep the output).
      std::shared_ptr<const EncoderOutput> hit = cache.Find(ps.key);
      if (!s.preempted) s.seq->features[s.segment] = hit ? std::move(hit) : out;
    }
  }
}

}  // namespace m3::engine
