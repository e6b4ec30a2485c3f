// Scheduler: continuous batching, one step at a time. Each step takes the running decodes
// first (one row each; with speculative decoding, those carrying drafts as one verify chunk of
// 1 + drafts rows after the plain ones, their drafts taking only free pages), then prefill chunks
// (partially prefilled running sequences, then new admissions in arrival order) under a per-step
// token budget, and lays out that step's ForwardBatch once. When pages run out it preempts the
// newest running sequence (its pages go back, it recomputes later from the front of the waiting
// queue) instead of failing.
//
// The scheduler decides and runs no model: the media segments a step reaches that are neither
// in the EncoderCache nor already held by their sequence are planned as step.encodes, under a
// per-step encoder budget, and the engine runs them (RunScheduledEncodes) before the forward;
// only then is the step's ForwardBatch laid out (BuildBatch), since its media spans carry the
// features.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/runtime/encoder_cache.h"
#include "engine/runtime/kv_cache_manager.h"
#include "engine/runtime/sequence.h"
#include "engine/step/forward_batch.h"

namespace m3::engine {

struct SchedulerConfig {
  int64_t max_num_seqs = 64;          // running sequences
  int64_t max_batched_tokens = 2048;  // rows per step
  int64_t max_prefill_chunk = 0;      // rows of one prefill chunk; 0: the step budget
  int64_t max_waiting = 1024;         // admission queue bound
  int64_t encoder_budget_tokens = 0;  // encoded feature rows per step; 0: max_batched_tokens
};

// Where one media segment's features go: seq->features[segment].
struct SegmentSlot {
  Sequence* seq = nullptr;
  size_t segment = 0;
  // The sequence was preempted later in the same planning, which dropped its features: the
  // encode still runs (its budget was spent) but only fills the encoder cache for it.
  bool preempted = false;
};

// One media segment a step must encode before its forward, in planning order.
struct ScheduledEncode {
  SegmentSlot source;  // the sequence whose patches are encoded (its cache lookup missed)
  // Sequences planned after it in the same step that need the same content (same key): they
  // take the output from the cache once the encode filled it, as a cache hit.
  std::vector<SegmentSlot> sharers;
  const PlacedSegment& placed() const { return source.seq->segments()[source.segment]; }
};

struct ScheduledStep {
  std::vector<Sequence*> seqs;  // batch order (decodes first)
  std::vector<int64_t> rows;    // rows of each in this step
  int32_t num_decodes = 0;
  // Speculative decodes, right after the plain ones: seqs[num_decodes, + num_verifies) run
  // their last token and seq->drafts (1 + drafts rows, logits for each). The engine sets their
  // rows to the tokens it kept before Commit.
  int32_t num_verifies = 0;
  // Run before the forward (RunScheduledEncodes). An encode may be planned for a sequence that
  // then got no pages this step: its features wait in the sequence for the next one.
  std::vector<ScheduledEncode> encodes;
  int64_t encoded_tokens = 0;  // feature rows of `encodes` (the encoder budget they took)
  // Sequences that cannot go on: an encode failed (error; RunScheduledEncodes took them out of
  // seqs) or the KV pool can never hold them.
  std::vector<std::pair<Sequence*, Error>> failed;
  std::vector<Sequence*> out_of_capacity;
  int64_t preempted = 0;
  // Laid out by Scheduler::BuildBatch once the encodes ran.
  ForwardBatch batch;
  std::vector<Sequence*> sampled;  // sequences whose logits come back, in logits_rows order

  bool empty() const { return seqs.empty(); }
  // Takes `seq` out of the step (its encode failed): it runs no rows and is not finished for
  // capacity. Before BuildBatch.
  void Unschedule(const Sequence* seq);
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv, EncoderCache& encoder_cache);

  // Queues a new sequence (FCFS). Throws kResourceExhausted when the waiting queue is full and
  // kInvalidArgument when its id is in use; `seq` is taken only on success, so the caller can
  // still answer a refused sequence's client.
  void Add(std::unique_ptr<Sequence>&& seq);
  // Takes a sequence out (abort, finish, error), freeing its pages at once; null if unknown.
  std::unique_ptr<Sequence> Remove(const std::string& id);
  Sequence* Find(const std::string& id);

  // Plans the next step: the rows of each sequence (may preempt) and the media to encode first.
  // Empty when there is nothing to run. Runs no model: see the top of this file.
  ScheduledStep Schedule();
  // Lays out step.batch and step.sampled from the plan once step.encodes ran (every media span
  // the step reaches needs its features by then).
  void BuildBatch(ScheduledStep& step) const;
  // After the step ran: advances num_computed, offers newly full pages to the prefix cache and
  // drops media features no longer needed; verified sequences give back their rejected drafts'
  // pages.
  void Commit(const ScheduledStep& step);

  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  const std::vector<Sequence*>& running() const { return running_; }
  int64_t total_preemptions() const { return total_preemptions_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }
  std::vector<std::string> Ids() const;
  const SchedulerConfig& config() const { return config_; }

 private:
  void Preempt(Sequence* seq, ScheduledStep& step);
  // Grows seq's pages to cover `tokens`, preempting newer unscheduled sequences as needed.
  // False when seq itself had to be preempted or must wait.
  bool EnsurePages(Sequence* seq, int64_t tokens, ScheduledStep& step);
  // Rows of seq's next prefill chunk (at most `rows`): the media it reaches are taken from the
  // encoder cache or planned as encodes, stopping before a segment over the encoder budget.
  int64_t PlanMedia(Sequence* seq, int64_t rows, ScheduledStep& step);
  bool IsScheduled(const Sequence* seq, const ScheduledStep& step) const;

  SchedulerConfig config_;
  KvCacheManager& kv_;
  EncoderCache& encoder_cache_;
  std::unordered_map<std::string, std::unique_ptr<Sequence>> all_;
  std::vector<Sequence*> running_;  // admission order: the back is the newest
  std::deque<Sequence*> waiting_;   // preempted sequences go to the front
  int64_t total_preemptions_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace m3::engine
