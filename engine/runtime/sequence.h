// Sequence: the engine's state for one request while it lives in the scheduler. The only
// progress state is num_computed (tokens whose KV is in the cache); everything else is either
// the request (prompt, media, sampling), its outputs so far, or derived from the two (where
// each media segment's placeholder rows lie, the page hash chain).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/runtime/engine_request.h"
#include "engine/step/model_runner.h"

namespace m3::engine {

// One independently encoded segment of a media item and the sequence positions it fills.
struct PlacedSegment {
  int32_t item = 0;
  MediaSegment segment;
  uint64_t key = 0;  // content hash (encoder cache key, prefix-cache token keys)
  struct Run {
    int64_t position = 0;  // first sequence position of a contiguous placeholder run
    int64_t length = 0;
    int64_t feature_offset = 0;  // feature row of its first position
  };
  std::vector<Run> runs;  // in position order, covering the segment's feature rows in order
  int64_t first_position() const { return runs.front().position; }
  int64_t end_position() const { return runs.back().position + runs.back().length; }
};

class Sequence {
 public:
  // Places the media (throws kInvalidArgument on placeholder/grid mismatches) and computes the
  // token keys of the prompt.
  Sequence(EngineRequest request, OutputSink sink, const ModelRunner& runner, uint64_t arrival);

  const std::string& id() const { return request_.id; }
  const EngineRequest& request() const { return request_; }
  const SamplingParams& sampling() const { return request_.sampling; }
  uint64_t arrival() const { return arrival_; }

  const std::vector<int32_t>& tokens() const { return tokens_; }  // prompt + generated
  int64_t prompt_len() const { return prompt_len_; }
  int64_t num_generated() const { return static_cast<int64_t>(tokens_.size()) - prompt_len_; }
  std::span<const int32_t> prompt() const { return {tokens_.data(), size_t(prompt_len_)}; }
  std::span<const int32_t> output() const {
    return {tokens_.data() + prompt_len_, size_t(num_generated())};
  }
  void AppendToken(int32_t token);

  // Chain hashes of the full pages of the known tokens (extended lazily).
  const std::vector<uint64_t>& PageHashes(int64_t page_size);

  std::vector<PlacedSegment>& segments() { return segments_; }
  const std::vector<PlacedSegment>& segments() const { return segments_; }

  // Runtime state owned by the scheduler.
  int64_t num_computed = 0;
  std::vector<int32_t> block_table;
  int64_t num_registered_pages = 0;   // leading pages already offered to the prefix cache
  int64_t cached_prompt_tokens = -1;  // from the prefix cache at first admission; -1: not yet
  std::vector<std::shared_ptr<const EncoderOutput>> features;  // per segment, while needed
  bool running = false;
  int64_t num_preemptions = 0;
  // Speculative decoding: draft tokens to verify after the last token this step (never part of
  // tokens(); engine/runtime/speculative_decoder.h).
  std::vector<int32_t> drafts;
  // Structured output: the grammar's state over the generated tokens (grammar_rows.h); null
  // when the request has no grammar. Generated tokens survive preemption, and so does it.
  std::unique_ptr<grammar::GrammarMatcher> grammar;
  bool grammar_active = true;  // false until request().grammar_start_after is generated

  OutputSink sink;

 private:
  EngineRequest request_;
  uint64_t arrival_;
  int64_t prompt_len_;
  std::vector<int32_t> tokens_;
  std::vector<uint64_t> keys_;  // per token: its id, or (segment key, feature row) for media
  std::vector<PlacedSegment> segments_;
  std::vector<uint64_t> page_hashes_;
};

}  // namespace m3::engine
