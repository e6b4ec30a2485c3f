// Scheduler: continuous batching, one step at a time. Each step takes the running decodes
// first (one row each), then prefill chunks (partially prefilled running sequences, then new
// admissions in arrival order) under a per-step token budget, and builds that step's
// ForwardBatch once. When pages run out it preempts the newest running sequence (its pages go
// back, it recomputes later from the front of the waiting queue) instead of failing. Media
// segments are encoded when their first placeholder row is scheduled, under a per-step encoder
// budget, through the EncoderCache.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/runtime/encoder_cache.h"
#include "engine/runtime/forward_batch.h"
#include "engine/runtime/kv_cache_manager.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/sequence.h"

namespace m3::engine {

struct SchedulerConfig {
  int64_t max_num_seqs = 64;          // running sequences
  int64_t max_batched_tokens = 2048;  // rows per step
  int64_t max_prefill_chunk = 0;      // rows of one prefill chunk; 0: the step budget
  int64_t max_waiting = 1024;         // admission queue bound
  int64_t encoder_budget_tokens = 0;  // encoded feature rows per step; 0: max_batched_tokens
};

struct ScheduledStep {
  ForwardBatch batch;
  std::vector<Sequence*> seqs;     // batch order (decodes first)
  std::vector<int64_t> rows;       // rows of each in this step
  std::vector<Sequence*> sampled;  // sequences whose logits come back, in logits_rows order
  // Sequences that cannot go on: an encode failed (error) or the KV pool can never hold them.
  std::vector<std::pair<Sequence*, Error>> failed;
  std::vector<Sequence*> out_of_capacity;
  int32_t num_decodes = 0;
  int64_t preempted = 0;
  int64_t encoded_tokens = 0;
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, ModelRunner& runner, KvCacheManager& kv,
            EncoderCache& encoder_cache);

  // Queues a new sequence (FCFS). Throws kResourceExhausted when the waiting queue is full and
  // kInvalidArgument when its id is in use; `seq` is taken only on success, so the caller can
  // still answer a refused sequence's client.
  void Add(std::unique_ptr<Sequence>&& seq);
  // Takes a sequence out (abort, finish, error), freeing its pages at once; null if unknown.
  std::unique_ptr<Sequence> Remove(const std::string& id);
  Sequence* Find(const std::string& id);

  // Plans the next step (may preempt, encode media). Empty when there is nothing to run.
  ScheduledStep Schedule();
  // After the step ran: advances num_computed, offers newly full pages to the prefix cache and
  // drops media features no longer needed.
  void Commit(const ScheduledStep& step);

  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  int64_t total_preemptions() const { return total_preemptions_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }
  std::vector<std::string> Ids() const;
  const SchedulerConfig& config() const { return config_; }

 private:
  void Preempt(Sequence* seq);
  // Grows seq's pages to cover `tokens`, preempting newer unscheduled sequences as needed.
  // False when seq itself had to be preempted or must wait.
  bool EnsurePages(Sequence* seq, int64_t tokens, ScheduledStep& step);
  // Rows of seq's next prefill chunk (at most `rows`) after encoding the media it reaches.
  int64_t PlanMedia(Sequence* seq, int64_t rows, ScheduledStep& step);
  void BuildBatch(ScheduledStep& step);
  bool IsScheduled(const Sequence* seq, const ScheduledStep& step) const;

  SchedulerConfig config_;
  ModelRunner& runner_;
  KvCacheManager& kv_;
  EncoderCache& encoder_cache_;
  std::unordered_map<std::string, std::unique_ptr<Sequence>> all_;
  std::vector<Sequence*> running_;  // admission order: the back is the newest
  std::deque<Sequence*> waiting_;   // preempted sequences go to the front
  int64_t total_preemptions_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace m3::engine
