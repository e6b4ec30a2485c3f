// Scheduler: step planning (decodes, prefill chunks, admissions, preemption, the media to
// encode) and the ForwardBatch laid out from the plan.
#include "engine/runtime/scheduler.h"

#include <algorithm>

#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine {

void ScheduledStep::Unschedule(const Sequence* seq) {
  auto it = std::find(seqs.begin(), seqs.end(), seq);
  if (it != seqs.end()) {
    const auto i = it - seqs.begin();
    if (i < num_decodes) {
      --num_decodes;
    } else if (i < num_decodes + num_verifies) {
      --num_verifies;
    }
    seqs.erase(it);
    rows.erase(rows.begin() + i);
  }
  std::erase(out_of_capacity, seq);
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv, EncoderCache& encoder_cache)
    : config_(config), kv_(kv), encoder_cache_(encoder_cache) {
  Require(config_.max_num_seqs > 0, ErrorCode::kInvalidArgument, "max_num_seqs must be > 0");
  Require(config_.max_batched_tokens >= config_.max_num_seqs, ErrorCode::kInvalidArgument,
          "max_batched_tokens must be at least max_num_seqs (every decode takes a row)");
  if (config_.encoder_budget_tokens <= 0)
    config_.encoder_budget_tokens = config_.max_batched_tokens;
}

void Scheduler::Add(std::unique_ptr<Sequence>&& seq) {
  Require(num_waiting() < config_.max_waiting, ErrorCode::kResourceExhausted,
          "the engine's waiting queue is full (" + std::to_string(config_.max_waiting) +
              " requests); retry later");
  Require(!all_.count(seq->id()), ErrorCode::kInvalidArgument,
          "request id '" + seq->id() + "' is already in use");
  waiting_.push_back(seq.get());
  all_.emplace(seq->id(), std::move(seq));
}

std::vector<std::string> Scheduler::Ids() const {
  std::vector<std::string> ids;
  for (const auto& [id, seq] : all_) ids.push_back(id);
  return ids;
}

Sequence* Scheduler::Find(const std::string& id) {
  auto it = all_.find(id);
  return it == all_.end() ? nullptr : it->second.get();
}

std::unique_ptr<Sequence> Scheduler::Remove(const std::string& id) {
  auto it = all_.find(id);
  if (it == all_.end()) return nullptr;
  std::unique_ptr<Sequence> seq = std::move(it->second);
  all_.erase(it);
  if (seq->running) {
    running_.erase(std::find(running_.begin(), running_.end(), seq.get()));
  } else {
    auto w = std::find(waiting_.begin(), waiting_.end(), seq.get());
    if (w != waiting_.end()) waiting_.erase(w);
  }
  kv_.Free(seq->block_table);
  seq->running = false;
  for (auto& f : seq->features) f.reset();
  return seq;
}

void Scheduler::Preempt(Sequence* seq, ScheduledStep& step) {
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  kv_.Free(seq->block_table);
  seq->num_computed = 0;
  seq->num_registered_pages = 0;
  seq->drafts.clear();
  for (auto& f : seq->features) f.reset();
  for (ScheduledEncode& e : step.encodes) {
    if (e.source.seq == seq) e.source.preempted = true;
    for (SegmentSlot& s : e.sharers)
      if (s.seq == seq) s.preempted = true;
  }
  seq->running = false;
  ++seq->num_preemptions;
  ++total_preemptions_;
  waiting_.push_front(seq);
  Log(LogLevel::kDebug, "preempted ", seq->id(), " (", seq->tokens().size(), " tokens)");
}

bool Scheduler::IsScheduled(const Sequence* seq, const ScheduledStep& step) const {
  return std::find(step.seqs.begin(), step.seqs.end(), seq) != step.seqs.end();
}

bool Scheduler::EnsurePages(Sequence* seq, int64_t tokens, ScheduledStep& step) {
  if (kv_.PagesFor(tokens) > kv_.num_pages()) {
    step.out_of_capacity.push_back(seq);
    return false;
  }
  while (!kv_.Allocate(seq->block_table, tokens)) {
    Sequence* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      if (!IsScheduled(*it, step)) {
        victim = *it;
        break;
      }
    }
    if (victim == nullptr) return false;  // everyone newer already runs this step: wait
    Preempt(victim, step);
    ++step.preempted;
    if (victim == seq) return false;
  }
  return true;
}

int64_t Scheduler::PlanMedia(Sequence* seq, int64_t rows, ScheduledStep& step) {
  const int64_t start = seq->num_computed;
  auto& segs = seq->segments();
  for (size_t k = 0; k < segs.size(); ++k) {
    const PlacedSegment& ps = segs[k];
    if (ps.end_position() <= start) continue;
    if (ps.first_position() >= start + rows) break;
    if (seq->features[k]) continue;
    // Content this step already encodes: one encode serves both (through the cache).
    auto planned = std::find_if(step.encodes.begin(), step.encodes.end(),
                                [&](const ScheduledEncode& e) { return e.placed().key == ps.key; });
    if (planned != step.encodes.end()) {
      planned->sharers.push_back({seq, k});
      continue;
    }
    if (auto hit = encoder_cache_.Find(ps.key)) {
      seq->features[k] = std::move(hit);
      continue;
    }
    if (step.encoded_tokens > 0 &&
        step.encoded_tokens + ps.segment.tokens > config_.encoder_budget_tokens) {
      return std::max<int64_t>(ps.first_position(), start) - start;  // stop before it
    }
    step.encodes.push_back({.source = {seq, k}, .sharers = {}});
    step.encoded_tokens += ps.segment.tokens;
  }
  return rows;
}

ScheduledStep Scheduler::Schedule() {
  ScheduledStep step;
  int64_t budget = config_.max_batched_tokens;

  // Decodes first, oldest first; those with drafts to verify go after the plain ones.
  std::vector<Sequence*> verifies;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i];
    const int64_t remaining = static_cast<int64_t>(s->tokens().size()) - s->num_computed;
    if (remaining != 1) {
      ++i;
      continue;
    }
    // The last prompt row may be a placeholder whose segment is not encoded yet.
    const int64_t rows = s->segments().empty() ? 1 : PlanMedia(s, 1, step);
    if (rows == 0) {
      ++i;
      continue;
    }
    // Drafts take free pages and budget only: they never preempt anyone.
    if (static_cast<int64_t>(s->drafts.size()) >= budget)
      s->drafts.resize(static_cast<size_t>(budget - 1));
    if (!s->drafts.empty() &&
        !kv_.Allocate(s->block_table, s->num_computed + 1 + static_cast<int64_t>(s->drafts.size())))
      s->drafts.clear();
    const bool ok = EnsurePages(s, s->num_computed + 1, step);
    if (i < running_.size() && running_[i] != s) continue;  // s was preempted
    ++i;
    if (!ok) {
      s->drafts.clear();
      continue;
    }
    if (!s->drafts.empty()) {
      verifies.push_back(s);
    } else {
      step.seqs.push_back(s);
      step.rows.push_back(1);
    }
    budget -= 1 + static_cast<int64_t>(s->drafts.size());
  }
  step.num_decodes = static_cast<int32_t>(step.seqs.size());
  for (Sequence* s : verifies) {
    step.seqs.push_back(s);
    step.rows.push_back(1 + static_cast<int64_t>(s->drafts.size()));
  }
  step.num_verifies = static_cast<int32_t>(verifies.size());

  auto schedule_chunk = [&](Sequence* s, bool admitting) -> bool {
    const int64_t remaining = static_cast<int64_t>(s->tokens().size()) - s->num_computed;
    int64_t rows = std::min(remaining, budget);
    if (config_.max_prefill_chunk > 0) rows = std::min(rows, config_.max_prefill_chunk);
    rows = PlanMedia(s, rows, step);
    if (rows <= 0) return false;
    if (admitting) {
      if (kv_.PagesFor(s->num_computed + rows) > kv_.num_pages()) {
        step.out_of_capacity.push_back(s);
        return false;
      }
      if (!kv_.Allocate(s->block_table, s->num_computed + rows)) return false;
    } else if (!EnsurePages(s, s->num_computed + rows, step)) {
      return false;
    }
    step.seqs.push_back(s);
    step.rows.push_back(rows);
    budget -= rows;
    return true;
  };

  // Prefill chunks of running sequences.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i];
    const int64_t remaining = static_cast<int64_t>(s->tokens().size()) - s->num_computed;
    if (remaining <= 1 || IsScheduled(s, step)) {
      ++i;
      continue;
    }
    schedule_chunk(s, false);
    if (i < running_.size() && running_[i] != s) continue;
    ++i;
  }

  // Admissions, first come first served: the head blocks those behind it.
  while (budget > 0 && num_running() < config_.max_num_seqs && !waiting_.empty()) {
    Sequence* s = waiting_.front();
    if (s->block_table.empty() && kv_.prefix_caching()) {
      const auto& hashes = s->PageHashes(kv_.page_size());
      // At least the last token is computed, so the step yields its logits.
      const size_t usable = std::min(
          hashes.size(),
          static_cast<size_t>((static_cast<int64_t>(s->tokens().size()) - 1) / kv_.page_size()));
      std::vector<uint64_t> prefix(hashes.begin(), hashes.begin() + static_cast<long>(usable));
      const int64_t hit = kv_.AcquireCachedPrefix(prefix, s->block_table);
      s->num_computed = hit * kv_.page_size();
      s->num_registered_pages = hit;
    }
    const size_t failed_before = step.out_of_capacity.size();
    if (!schedule_chunk(s, true)) {
      if (step.out_of_capacity.size() != failed_before) {
        waiting_.pop_front();  // the engine removes it; it must not block the queue behind it
        continue;
      }
      kv_.Free(s->block_table);  // the prefix hit is taken again next time
      s->num_computed = 0;
      s->num_registered_pages = 0;
      break;
    }
    waiting_.pop_front();
    s->running = true;
    running_.push_back(s);
    prefix_hit_tokens_ += s->num_computed;
    if (s->cached_prompt_tokens < 0)
      s->cached_prompt_tokens = std::min(s->num_computed, s->prompt_len());
  }

  return step;
}

void Scheduler::BuildBatch(ScheduledStep& step) const {
  step.batch = ForwardBatch{};
  step.sampled.clear();
  ForwardBatch& b = step.batch;
  const int64_t ps = kv_.page_size();
  int64_t total = 0, max_pages = 0;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    total += step.rows[i];
    max_pages = std::max(max_pages, kv_.PagesFor(step.seqs[i]->num_computed + step.rows[i]));
  }
  b.token_ids.reserve(static_cast<size_t>(total));
  b.positions.reserve(static_cast<size_t>(total));
  b.slot_mapping.reserve(static_cast<size_t>(total));
  b.max_pages_per_seq = static_cast<int32_t>(max_pages);
  b.block_tables.assign(step.seqs.size() * static_cast<size_t>(max_pages), -1);
  b.query_start.push_back(0);
  b.num_decodes = step.num_decodes;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    Sequence* s = step.seqs[i];
    const int64_t start = s->num_computed, end = start + step.rows[i];
    const int64_t first_row = static_cast<int64_t>(b.token_ids.size());
    b.context_lens.push_back(static_cast<int32_t>(start));
    const int64_t pages = kv_.PagesFor(end);
    std::copy(s->block_table.begin(), s->block_table.begin() + pages,
              b.block_tables.begin() + static_cast<int64_t>(i) * max_pages);
    const int64_t known = static_cast<int64_t>(s->tokens().size());
    for (int64_t pos = start; pos < end; ++pos) {
      b.token_ids.push_back(pos < known ? s->tokens()[static_cast<size_t>(pos)]
                                        : s->drafts[static_cast<size_t>(pos - known)]);
      b.positions.push_back(static_cast<int32_t>(pos));
      b.slot_mapping.push_back(static_cast<int64_t>(s->block_table[pos / ps]) * ps + pos % ps);
    }
    b.query_start.push_back(static_cast<int32_t>(b.token_ids.size()));
    if (end >= known) {
      // A verified sequence wants the logits of its last token's row and of every draft's.
      for (int64_t r = first_row + (known - 1 - start); r < first_row + (end - start); ++r)
        b.logits_rows.push_back(static_cast<int32_t>(r));
      step.sampled.push_back(s);
    }
    const auto& segs = s->segments();
    for (size_t k = 0; k < segs.size(); ++k) {
      if (segs[k].end_position() <= start) continue;
      if (segs[k].first_position() >= end) break;
      for (const PlacedSegment::Run& run : segs[k].runs) {
        const int64_t a = std::max(run.position, start);
        const int64_t z = std::min(run.position + run.length, end);
        if (a >= z) continue;
        MediaSpan span;
        span.row = first_row + (a - start);
        span.length = z - a;
        span.features = s->features[k];
        span.offset = run.feature_offset + (a - run.position);
        Require(span.features != nullptr, ErrorCode::kInternal, "media span without features");
        b.media.push_back(std::move(span));
      }
    }
  }
}

void Scheduler::Commit(const ScheduledStep& step) {
  const int64_t ps = kv_.page_size();
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    Sequence* s = step.seqs[i];
    s->num_computed += step.rows[i];
    if (static_cast<int64_t>(i) >= step.num_decodes &&
        static_cast<int64_t>(i) < step.num_decodes + step.num_verifies) {
      s->drafts.clear();
      kv_.Truncate(s->block_table, s->num_computed + 1);
    }
    if (kv_.prefix_caching()) {
      const int64_t full = s->num_computed / ps;
      if (full > s->num_registered_pages) {
        const auto& hashes = s->PageHashes(ps);
        for (int64_t j = s->num_registered_pages; j < full; ++j)
          kv_.Register(s->block_table[static_cast<size_t>(j)], hashes[static_cast<size_t>(j)]);
        s->num_registered_pages = full;
      }
    }
    auto& segs = s->segments();
    for (size_t k = 0; k < segs.size(); ++k)
      if (s->features[k] && segs[k].end_position() <= s->num_computed) s->features[k].reset();
  }
}

}  // namespace m3::engine
