// EngineCore: the serving engine without its front end. Requests come in from any thread
// (Submit / Abort); one engine thread runs the loop: take new requests and aborts, plan a step
// (Scheduler), run the media encodes it planned (RunScheduledEncodes), run and sample it
// (ModelRunner::ExecuteAndSample), stream each sequence's new tokens to its OutputSink, finish
// and free what is done. gRPC (engine/server/), benchmarks and tests drive it the same way.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/runtime/encoder_cache.h"
#include "engine/runtime/engine_request.h"
#include "engine/runtime/grammar_rows.h"
#include "engine/runtime/kv_cache_manager.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/speculative_decoder.h"
#include "engine/spec/speculative_config.h"
#include "engine/step/batch_sampler.h"
#include "engine/step/model_runner.h"
#include "shared/generation_config.h"

namespace m3::engine {

struct EngineConfig {
  SchedulerConfig scheduler;
  int64_t page_size = 0;        // 0: the MSA block size (16 without MSA layers)
  int64_t kv_pages = 0;         // 0: from kv_memory_bytes
  int64_t kv_memory_bytes = 0;  // 0: 1 GiB, capped at what max_num_seqs full contexts need
  // > 0 (GPU runners, kv_pages and kv_memory_bytes 0): the KV cache takes this share of the
  // device's memory less what is in use once the weights are loaded (kResourceExhausted when
  // nothing is left).
  double gpu_memory_fraction = 0;
  bool prefix_caching = true;
  int64_t encoder_cache_bytes = int64_t{512} << 20;
  GenerationConfig generation;          // defaults for requests (generation_config.json)
  spec::SpeculativeConfig speculative;  // off unless a method is set
};

struct EngineStats {
  bool accepting = true;
  int64_t running = 0, waiting = 0;
  int64_t kv_pages = 0, kv_pages_used = 0, kv_pages_cached = 0, page_size = 0;
  double kv_usage = 0;
  int64_t steps = 0, preemptions = 0, generated_tokens = 0, prefix_hit_tokens = 0;
  int64_t encoder_cache_hits = 0, encoder_cache_misses = 0;
  // Speculative decoding: drafts verified, drafts accepted, verified sequence-steps.
  int64_t spec_proposed = 0, spec_accepted = 0, spec_steps = 0;
};

class EngineCore {
 public:
  EngineCore(std::unique_ptr<ModelRunner> runner, const EngineConfig& config);
  ~EngineCore();  // stops the loop; sequences left get a final kAbort

  const RunnerInfo& info() const { return info_; }
  const EngineConfig& config() const { return config_; }
  int64_t max_prompt_tokens() const;  // longest prompt the engine takes (context and KV bounds)

  // Checks `request` (ids, context, media shapes and values, placeholder counts) and queues
  // it. Throws kInvalidArgument (bad request), kResourceExhausted (waiting queue full) or
  // kUnavailable (shutting down). After it returns, `sink` gets the outputs, the last with a
  // finish reason, on the engine thread.
  void Submit(EngineRequest request, OutputSink sink);
  // Submit for several requests at once, all or none: the scheduler sees them together.
  void SubmitAll(std::vector<std::pair<EngineRequest, OutputSink>> requests);
  // Ends a request now (its pages return before the next step); its sink gets kAbort. False
  // when the id is unknown or already finished.
  bool Abort(const std::string& id);
  // A random seed for a request that brought none (ResolveSamplingParams).
  uint64_t FreshSeed();

  EngineStats Stats() const;
  // Graceful shutdown: refuse new requests (kUnavailable), let the others finish.
  void StopAdmission();
  bool Idle() const;  // nothing queued, waiting or running

 private:
  void Loop();
  void Step();
  void Finish(Sequence* seq, FinishReason reason, const std::string& error = "",
              ErrorCode code = ErrorCode::kInternal);
  void Emit(Sequence* seq, RequestOutput&& out);
  // The last output of a request: releases its id first (see engine_core.cpp).
  void EmitFinal(Sequence* seq, RequestOutput&& out);
  void PublishStats();

  std::unique_ptr<ModelRunner> runner_;
  EngineConfig config_;
  RunnerInfo info_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<EncoderCache> encoder_cache_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<SampledToken> sampled_;
  std::unique_ptr<SpeculativeDecoder> spec_;  // null: no speculation
  std::vector<std::vector<SampledToken>> emitted_;
  GrammarRows grammar_rows_;  // structured outputs' masks of the step
  uint64_t next_arrival_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Sequence>> inbox_;
  std::vector<std::string> aborts_;
  std::unordered_set<std::string> active_ids_;
  int64_t finishing_ = 0;  // final outputs being emitted (ids already released): not Idle()
  EngineStats stats_;
  bool stop_ = false;
  std::atomic<bool> accepting_{true};
  std::atomic<uint64_t> seed_state_;
  int64_t generated_tokens_ = 0, steps_ = 0;
  std::thread thread_;
};

}  // namespace m3::engine
