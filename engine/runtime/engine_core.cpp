// EngineCore: request intake, the engine thread's step loop, finishing and stats.
#include "engine/runtime/engine_core.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/make_device.h"
#include "engine/runtime/content_hash.h"
#include "engine/runtime/request_validation.h"
#include "engine/runtime/scheduled_encodes.h"
#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine {
namespace {

int64_t DefaultPageSize(const RunnerInfo& info) {
  return info.msa_block_size > 0 ? info.msa_block_size : 16;
}

// fraction * total minus what is in use now (the weights, the step workspace of a one-page
// probe, the CUDA context and cuBLAS, other processes), less a margin for the workspace's growth
// with the block tables' width; the complement of the fraction is left for what comes later
// (recorded decode graphs, op scratch, collectives' buffers).
int64_t GpuKvBudget(const std::string& device, double fraction) {
  constexpr int64_t kMargin = int64_t{32} << 20;
  Require(fraction <= 1, ErrorCode::kInvalidArgument, "the GPU memory fraction must be <= 1");
  const backend::DeviceMemory m = backend::QueryDeviceMemory(device);
  Require(m.total_bytes > 0, ErrorCode::kInvalidArgument,
          "a GPU memory fraction was given for device " + device + ", which is no GPU");
  const int64_t used = m.total_bytes - m.free_bytes;
  const int64_t budget =
      static_cast<int64_t>(fraction * static_cast<double>(m.total_bytes)) - used - kMargin;
  Log(LogLevel::kInfo, "engine: ", device, " has ", m.total_bytes >> 20, " MiB, ", used >> 20,
      " MiB in use after loading the weights and reserving the step workspace; GPU memory "
      "fraction ",
      fraction, " leaves ", std::max<int64_t>(budget, 0) >> 20, " MiB for the KV cache");
  Require(budget > 0, ErrorCode::kResourceExhausted,
          "GPU memory fraction " + std::to_string(fraction) + " of " + device + "'s " +
              std::to_string(m.total_bytes >> 20) +
              " MiB leaves no room for the KV cache: " + std::to_string(used >> 20) +
              " MiB are in use after loading the weights and reserving the step workspace");
  return budget;
}

// The devices holding the model: each rank's (a parallel runner), else the runner's one.
std::vector<std::string> ModelDevices(const RunnerInfo& info) {
  std::vector<std::string> d;
  for (const RunnerInfo::DeviceWeights& r : info.ranks) d.push_back(r.device);
  if (d.empty()) d.push_back(info.device);
  return d;
}

std::string GiB(int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return b;
}

}  // namespace

EngineCore::EngineCore(std::unique_ptr<ModelRunner> runner, const EngineConfig& config)
    : runner_(std::move(runner)), config_(config), info_(runner_->info()) {
  std::random_device rd;
  seed_state_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (config_.page_size <= 0) config_.page_size = DefaultPageSize(info_);
  Require(info_.msa_block_size <= 0 || info_.msa_block_size % config_.page_size == 0,
          ErrorCode::kInvalidArgument,
          "the KV page size " + std::to_string(config_.page_size) +
              " must divide the MSA block size " + std::to_string(info_.msa_block_size));
  if (config_.kv_pages <= 0 && config_.kv_memory_bytes <= 0 && config_.gpu_memory_fraction > 0) {
    // A one-page cache first: the step workspace it reserves is then counted as in use, so
    // the KV pages leave room for it. The smallest device's budget holds on every rank.
    runner_->AllocateKvCache(1, config_.page_size);
    int64_t budget = -1;
    for (const std::string& d : ModelDevices(info_)) {
      const int64_t b = GpuKvBudget(d, config_.gpu_memory_fraction);
      budget = budget < 0 ? b : std::min(budget, b);
    }
    config_.kv_memory_bytes = budget;
  }
  if (config_.kv_pages <= 0) {
    const int64_t per_page = runner_->KvBytesPerPage(config_.page_size);
    Require(per_page > 0, ErrorCode::kInternal, "the runner reports 0 bytes per KV page");
    int64_t budget = config_.kv_memory_bytes > 0 ? config_.kv_memory_bytes : int64_t{1} << 30;
    int64_t pages = budget / per_page;
    if (config_.kv_memory_bytes <= 0) {
      const int64_t full = config_.scheduler.max_num_seqs *
                           ((info_.max_model_len + config_.page_size - 1) / config_.page_size);
      pages = std::min(pages, full);
    }
    Require(pages > 0, ErrorCode::kInvalidArgument,
            "the KV memory budget holds no page (one page takes " + std::to_string(per_page) +
                " bytes)");
    config_.kv_pages = pages;
  }
  runner_->AllocateKvCache(config_.kv_pages, config_.page_size);
  kv_ =
      std::make_unique<KvCacheManager>(config_.kv_pages, config_.page_size, config_.prefix_caching);
  encoder_cache_ = std::make_unique<EncoderCache>(config_.encoder_cache_bytes);
  scheduler_ = std::make_unique<Scheduler>(config_.scheduler, *kv_, *encoder_cache_);
  if (config_.speculative.enabled()) {
    spec_ = std::make_unique<SpeculativeDecoder>(
        config_.speculative,
        spec::MakeDraftProposer(config_.speculative, info_.num_layers, info_.hidden_size,
                                info_.vocab_size),
        config_.speculative.backoff_free_rows, info_.max_model_len);
    if (const CaptureRequest c = spec_->capture(); c.out) runner_->SetCapture(c);
  }
  // What each device holds, once: weights, the KV cache, and what is left.
  const int64_t kv_bytes = config_.kv_pages * runner_->KvBytesPerPage(config_.page_size);
  for (const RunnerInfo::DeviceWeights& r : info_.ranks) {
    const backend::DeviceMemory m = backend::QueryDeviceMemory(r.device);
    if (m.total_bytes <= 0) continue;
    Log(LogLevel::kInfo, "engine: memory on ", r.device, ": weights ", GiB(r.weight_bytes),
        ", KV cache ", GiB(kv_bytes), " (", config_.kv_pages,
        " pages = ", config_.kv_pages * config_.page_size, " tokens), ",
        GiB(m.total_bytes - m.free_bytes), " in use, ", GiB(m.free_bytes), " free of ",
        GiB(m.total_bytes));
  }
  Log(LogLevel::kInfo, "engine: ", info_.architecture, " on ", info_.device, ", KV ",
      config_.kv_pages, " pages of ", config_.page_size, " tokens in ",
      info_.kv_cache_dtype.empty() ? info_.dtype : info_.kv_cache_dtype, " (",
      (config_.kv_pages * runner_->KvBytesPerPage(config_.page_size)) >> 20, " MiB), max ",
      config_.scheduler.max_num_seqs, " sequences, ", config_.scheduler.max_batched_tokens,
      " tokens per step");
  PublishStats();
  thread_ = std::thread([this] { Loop(); });
}

EngineCore::~EngineCore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t EngineCore::max_prompt_tokens() const {
  return std::min(info_.max_model_len - 1, config_.kv_pages * config_.page_size - 1);
}

uint64_t EngineCore::FreshSeed() {
  return Mix64(seed_state_.fetch_add(0x9e3779b97f4a7c15ULL));
}

void EngineCore::Submit(EngineRequest request, OutputSink sink) {
  std::vector<std::pair<EngineRequest, OutputSink>> one;
  one.emplace_back(std::move(request), std::move(sink));
  SubmitAll(std::move(one));
}

void EngineCore::SubmitAll(std::vector<std::pair<EngineRequest, OutputSink>> requests) {
  Require(accepting_.load(), ErrorCode::kUnavailable, "the engine is shutting down");
  // Placement and content hashing happen here, on the caller's thread, for every request
  // before any is queued: all or none.
  std::vector<std::unique_ptr<Sequence>> seqs;
  seqs.reserve(requests.size());
  for (auto& [request, sink] : requests) {
    ValidateRequest(request, info_, max_prompt_tokens());
    seqs.push_back(std::make_unique<Sequence>(std::move(request), std::move(sink), *runner_, 0));
  }
  std::lock_guard<std::mutex> lock(mu_);
  Require(!stop_ && accepting_.load(), ErrorCode::kUnavailable, "the engine is shutting down");
  Require(static_cast<int64_t>(inbox_.size() + seqs.size()) + stats_.waiting <=
              config_.scheduler.max_waiting,
          ErrorCode::kResourceExhausted,
          "the engine's waiting queue is full (" + std::to_string(config_.scheduler.max_waiting) +
              " requests); retry later");
  std::unordered_set<std::string> ids;
  for (const auto& seq : seqs)
    Require(!active_ids_.count(seq->id()) && ids.insert(seq->id()).second,
            ErrorCode::kInvalidArgument, "request id '" + seq->id() + "' is already in use");
  for (auto& seq : seqs) {
    active_ids_.insert(seq->id());
    inbox_.push_back(std::move(seq));
  }
  cv_.notify_all();
}

bool EngineCore::Abort(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_ids_.count(id)) return false;
  aborts_.push_back(id);
  cv_.notify_all();
  return true;
}

EngineStats EngineCore::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = stats_;
  s.accepting = accepting_.load();
  s.waiting += static_cast<int64_t>(inbox_.size());
  return s;
}

void EngineCore::StopAdmission() {
  accepting_ = false;
  cv_.notify_all();
}

bool EngineCore::Idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_ids_.empty() && finishing_ == 0;
}

void EngineCore::PublishStats() {
  EngineStats s;
  s.running = scheduler_->num_running();
  s.waiting = scheduler_->num_waiting();
  s.kv_pages = kv_->num_pages();
  s.kv_pages_used = kv_->num_used_pages();
  s.kv_pages_cached = kv_->num_cached_pages();
  s.page_size = kv_->page_size();
  s.kv_usage = kv_->usage();
  s.steps = steps_;
  s.preemptions = scheduler_->total_preemptions();
  s.generated_tokens = generated_tokens_;
  s.prefix_hit_tokens = scheduler_->prefix_hit_tokens();
  s.encoder_cache_hits = encoder_cache_->hits();
  s.encoder_cache_misses = encoder_cache_->misses();
  if (spec_) {
    s.spec_proposed = spec_->stats().proposed;
    s.spec_accepted = spec_->stats().accepted;
    s.spec_steps = spec_->stats().steps;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = s;
}

void EngineCore::Emit(Sequence* seq, RequestOutput&& out) {
  try {
    seq->sink(std::move(out));
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "engine: output sink of ", seq->id(), " threw: ", e.what());
  }
}

void EngineCore::EmitFinal(Sequence* seq, RequestOutput&& out) {
  // The id is free again before the client can see the end of its stream: a client that
  // resubmits the same id as soon as it has the final output (a seeded re-run) must not race
  // this thread and be refused with "already in use".
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_ids_.erase(seq->id());
    ++finishing_;
  }
  Emit(seq, std::move(out));
  std::lock_guard<std::mutex> lock(mu_);
  --finishing_;
}

void EngineCore::Finish(Sequence* seq, FinishReason reason, const std::string& error,
                        ErrorCode code) {
  std::unique_ptr<Sequence> owned = scheduler_->Remove(seq->id());
  RequestOutput out;
  out.finish = reason;
  out.error = error;
  out.error_code = code;
  out.prompt_tokens = seq->prompt_len();
  out.completion_tokens = seq->num_generated();
  out.cached_prompt_tokens = std::max<int64_t>(seq->cached_prompt_tokens, 0);
  out.seed = seq->sampling().seed;
  EmitFinal(seq, std::move(out));
}

void EngineCore::Loop() {
  for (;;) {
    std::deque<std::unique_ptr<Sequence>> incoming;
    std::vector<std::string> aborts;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stop_ || !inbox_.empty() || !aborts_.empty() || scheduler_->has_work();
      });
      if (stop_) break;
      incoming.swap(inbox_);
      aborts.swap(aborts_);
    }
    for (const std::string& id : aborts) {
      if (Sequence* s = scheduler_->Find(id)) {
        Finish(s, FinishReason::kAbort);
        continue;
      }
      // Still in this batch of arrivals: never admitted.
      for (auto& in : incoming) {
        if (in && in->id() == id) {
          RequestOutput out;
          out.finish = FinishReason::kAbort;
          out.prompt_tokens = in->prompt_len();
          out.seed = in->sampling().seed;
          EmitFinal(in.get(), std::move(out));
          in.reset();
        }
      }
    }
    for (auto& in : incoming) {
      if (!in) continue;
      try {
        scheduler_->Add(std::move(in));
      } catch (const Error& e) {
        // Refused (e.g. the waiting queue filled since Submit checked it): `in` still owns the
        // sequence, whose sink answers its client.
        RequestOutput out;
        out.finish = FinishReason::kError;
        out.error = e.what();
        out.error_code = e.code();
        EmitFinal(in.get(), std::move(out));
      }
    }
    try {
      if (scheduler_->has_work()) Step();
    } catch (const std::exception& e) {
      // A bug outside Execute (scheduling, sampling): fail what is in flight rather than take
      // the process down, so the server keeps answering.
      Log(LogLevel::kError, "engine: step failed outside the model: ", e.what());
      for (const std::string& id : scheduler_->Ids())
        Finish(scheduler_->Find(id), FinishReason::kError, e.what());
    }
    PublishStats();
  }
  // Shutdown: whatever is left ends as aborted so no stream waits forever.
  for (const std::string& id : scheduler_->Ids())
    Finish(scheduler_->Find(id), FinishReason::kAbort);
  for (auto& in : inbox_) {
    RequestOutput out;
    out.finish = FinishReason::kAbort;
    Emit(in.get(), std::move(out));
  }
  inbox_.clear();
}

void EngineCore::Step() {
  if (spec_) spec_->Propose(scheduler_->running());
  ScheduledStep step = scheduler_->Schedule();
  RunScheduledEncodes(step, *runner_, *encoder_cache_);
  scheduler_->BuildBatch(step);
  for (auto& [seq, err] : step.failed) Finish(seq, FinishReason::kError, err.what(), err.code());
  for (Sequence* seq : step.out_of_capacity) {
    if (scheduler_->Find(seq->id()) != seq) continue;
    Log(LogLevel::kWarn, "engine: ", seq->id(), " outgrew the KV cache (", seq->tokens().size(),
        " tokens); finished with length");
    Finish(seq, FinishReason::kLength);
  }
  if (step.empty()) {
    // Nothing could run (all blocked on pages held by finished-in-this-step sequences): let
    // the next iteration retry without spinning hot.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    return;
  }
  // Sampled where the runner's logits are (on a GPU runner only tokens and logprobs come back).
  std::vector<SampleRow> rows(step.sampled.size());
  if (spec_) {
    spec_->SampleRows(step, rows);
  } else {
    for (size_t i = 0; i < step.sampled.size(); ++i)
      rows[i] = {&step.sampled[i]->sampling(), step.sampled[i]->prompt(),
                 step.sampled[i]->output()};
  }
  // A sequence with a grammar never carries drafts (SpeculativeDecoder::Propose): its one row is
  // where its rows start.
  grammar_rows_.Prepare(
      step.sampled, rows, info_.vocab_size,
      spec_ ? std::span<const size_t>(spec_->first_rows()) : std::span<const size_t>());
  try {
    runner_->ExecuteAndSample(step.batch, rows, sampled_);
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "engine: step failed: ", e.what());
    for (Sequence* seq : step.seqs) Finish(seq, FinishReason::kError, e.what());
    return;
  }
  ++steps_;
  // The tokens each sampled sequence emits: one, or a verified sequence's accepted drafts and
  // the target's pick after them, cut at the first that finishes it. They join the sequence
  // before Commit, which counts a verified sequence's kept tokens as its computed rows.
  emitted_.resize(step.sampled.size());
  if (spec_) {
    spec_->Accept(step, sampled_, emitted_);
  } else {
    for (size_t i = 0; i < step.sampled.size(); ++i) emitted_[i].assign(1, std::move(sampled_[i]));
  }
  std::vector<FinishReason> reasons(step.sampled.size(), FinishReason::kNone);
  for (size_t i = 0; i < step.sampled.size(); ++i) {
    Sequence* s = step.sampled[i];
    const SamplingParams& p = s->sampling();
    size_t kept = 0;
    while (kept < emitted_[i].size() && reasons[i] == FinishReason::kNone) {
      const int32_t token = emitted_[i][kept].token;
      if (!GrammarRows::Accept(*s, token)) {
        Log(LogLevel::kError, "engine: ", s->id(),
            ": the structured-output grammar allows no token after ", s->num_generated(),
            " generated (drew ", token, "); finished with length");
        reasons[i] = FinishReason::kLength;
        break;
      }
      ++kept;
      s->AppendToken(token);
      auto in = [&](const std::vector<int32_t>& ids) {
        return std::find(ids.begin(), ids.end(), token) != ids.end();
      };
      if (in(p.stop_token_ids) || (!p.ignore_eos && in(p.eos_token_ids))) {
        reasons[i] = FinishReason::kStop;
      } else if (s->num_generated() >= p.max_tokens ||
                 static_cast<int64_t>(s->tokens().size()) >= info_.max_model_len) {
        reasons[i] = FinishReason::kLength;
      }
    }
    emitted_[i].resize(kept);
    generated_tokens_ += static_cast<int64_t>(kept);
    const auto at = std::find(step.seqs.begin(), step.seqs.end(), s) - step.seqs.begin();
    if (at >= step.num_decodes && at < step.num_decodes + step.num_verifies)
      step.rows[static_cast<size_t>(at)] = static_cast<int64_t>(kept);
  }
  scheduler_->Commit(step);
  if (spec_) spec_->Observe(step);
  // Before any output of this step goes out, so a client that saw a token sees its pages.
  PublishStats();

  for (size_t i = 0; i < step.sampled.size(); ++i) {
    Sequence* s = step.sampled[i];
    const SamplingParams& p = s->sampling();
    RequestOutput out;
    for (SampledToken& t : emitted_[i]) {
      out.tokens.push_back(t.token);
      if (p.return_logprobs) out.logprobs.push_back(std::move(t));
    }
    const FinishReason reason = reasons[i];
    if (reason == FinishReason::kNone) {
      Emit(s, std::move(out));
      continue;
    }
    // The last token rides on the final message with the counts.
    std::unique_ptr<Sequence> owned = scheduler_->Remove(s->id());
    out.finish = reason;
    out.prompt_tokens = s->prompt_len();
    out.completion_tokens = s->num_generated();
    out.cached_prompt_tokens = std::max<int64_t>(s->cached_prompt_tokens, 0);
    out.seed = p.seed;
    EmitFinal(s, std::move(out));
  }
}

}  // namespace m3::engine
