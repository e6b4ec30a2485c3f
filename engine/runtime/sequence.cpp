// Sequence: media placement (which positions each encoded segment fills), token keys and the
// page hash chain.
#include "engine/runtime/sequence.h"

#include <algorithm>
#include <string>

#include "engine/runtime/content_hash.h"
#include "shared/error.h"

namespace m3::engine {
namespace {

// Text tokens key as their id; media placeholders as (segment content, feature row), so two
// prompts share a page only when the images in it are the same.
constexpr uint64_t kTextKeyTag = 0x7465787400000000ULL;

uint64_t SegmentKey(const MediaItem& item, const MediaSegment& seg) {
  uint64_t seed = HashCombine(item.video ? 2 : 1, static_cast<uint64_t>(item.patch_dim));
  for (int64_t g : seg.grid_thw) seed = HashCombine(seed, static_cast<uint64_t>(g));
  const float* p = item.patches.data() + seg.patch_offset * item.patch_dim;
  return HashBytes(p, static_cast<size_t>(seg.patch_rows * item.patch_dim) * sizeof(float), seed);
}

}  // namespace

Sequence::Sequence(EngineRequest request, OutputSink out, const ModelRunner& runner,
                   uint64_t arrival)
    : sink(std::move(out)),
      request_(std::move(request)),
      arrival_(arrival),
      prompt_len_(static_cast<int64_t>(request_.prompt.size())),
      tokens_(request_.prompt) {
  if (request_.grammar) {
    grammar = std::make_unique<grammar::GrammarMatcher>(request_.grammar);
    grammar_active = request_.grammar_start_after < 0;
  }
  keys_.reserve(tokens_.size());
  for (int32_t t : tokens_) keys_.push_back(kTextKeyTag | static_cast<uint32_t>(t));
  const RunnerInfo& info = runner.info();
  for (bool video : {false, true}) {
    const int64_t placeholder = video ? info.video_token_id : info.image_token_id;
    const char* kind = video ? "video" : "image";
    std::vector<int64_t> positions;
    for (int64_t i = 0; i < prompt_len_; ++i)
      if (tokens_[i] == placeholder) positions.push_back(i);
    size_t next = 0;
    int item_no = 0;
    for (size_t i = 0; i < request_.media.size(); ++i) {
      const MediaItem& item = request_.media[i];
      if (item.video != video) continue;
      const std::string what = std::string(kind) + " " + std::to_string(item_no++);
      std::vector<MediaSegment> segs = runner.SplitMedia(video, item.grid_thw);
      int64_t tokens = 0;
      for (const MediaSegment& s : segs) tokens += s.tokens;
      Require(item.placeholder_tokens == tokens, ErrorCode::kInvalidArgument,
              what + ": grid (" + std::to_string(item.grid_thw[0]) + ", " +
                  std::to_string(item.grid_thw[1]) + ", " + std::to_string(item.grid_thw[2]) +
                  ") makes " + std::to_string(tokens) + " placeholder tokens but the item says " +
                  std::to_string(item.placeholder_tokens));
      Require(positions.size() - next >= static_cast<size_t>(tokens), ErrorCode::kInvalidArgument,
              what + " needs " + std::to_string(tokens) + " placeholder tokens (id " +
                  std::to_string(placeholder) + ") but the prompt has only " +
                  std::to_string(positions.size() - next) + " left for it");
      for (const MediaSegment& s : segs) {
        PlacedSegment ps;
        ps.item = static_cast<int32_t>(i);
        ps.segment = s;
        ps.key = SegmentKey(item, s);
        for (int64_t f = 0; f < s.tokens; ++f) {
          const int64_t pos = positions[next + static_cast<size_t>(s.token_offset + f)];
          if (!ps.runs.empty() && ps.runs.back().position + ps.runs.back().length == pos) {
            ++ps.runs.back().length;
          } else {
            ps.runs.push_back({pos, 1, f});
          }
          keys_[pos] = HashCombine(ps.key, static_cast<uint64_t>(f));
        }
        segments_.push_back(std::move(ps));
      }
      next += static_cast<size_t>(tokens);
    }
    Require(next == positions.size(), ErrorCode::kInvalidArgument,
            "the prompt has " + std::to_string(positions.size()) + " " + kind +
                " placeholder tokens (id " + std::to_string(placeholder) + ") but the " + kind +
                " items fill " + std::to_string(next));
  }
  // Encode and prefill walk segments in position order.
  std::sort(segments_.begin(), segments_.end(), [](const PlacedSegment& a, const PlacedSegment& b) {
    return a.first_position() < b.first_position();
  });
  features.resize(segments_.size());
}

void Sequence::AppendToken(int32_t token) {
  tokens_.push_back(token);
  keys_.push_back(kTextKeyTag | static_cast<uint32_t>(token));
}

const std::vector<uint64_t>& Sequence::PageHashes(int64_t page_size) {
  const size_t full = tokens_.size() / static_cast<size_t>(page_size);
  while (page_hashes_.size() < full) {
    uint64_t h = page_hashes_.empty() ? 0x6d33736572766531ULL : page_hashes_.back();
    const size_t begin = page_hashes_.size() * static_cast<size_t>(page_size);
    for (size_t i = begin; i < begin + static_cast<size_t>(page_size); ++i)
      h = HashCombine(h, keys_[i]);
    page_hashes_.push_back(h);
  }
  return page_hashes_;
}

}  // namespace m3::engine
