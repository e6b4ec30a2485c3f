// Helpers for the engine-core tests: an output collector for OutputSinks, and random request
// mixes (text, images, multi-segment videos with text between their runs, shared prefixes)
// for the ToyRunner.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "engine/runtime/engine_core.h"

namespace m3::test {

struct Collected {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  engine::FinishReason finish = engine::FinishReason::kNone;
  std::string error;
  int64_t cached_prompt_tokens = 0;
  int64_t completion_tokens = 0;
  uint64_t seed = 0;
  int outputs = 0;
};

class Collector {
 public:
  engine::OutputSink Sink(const std::string& id) {
    return [this, id](engine::RequestOutput&& o) {
      std::lock_guard<std::mutex> lock(mu_);
      Collected& c = got_[id];
      ++c.outputs;
      c.tokens.insert(c.tokens.end(), o.tokens.begin(), o.tokens.end());
      for (const auto& l : o.logprobs) c.logprobs.push_back(l.logprob);
      if (o.finish != engine::FinishReason::kNone) {
        c.finish = o.finish;
        c.error = o.error;
        c.cached_prompt_tokens = o.cached_prompt_tokens;
        c.completion_tokens = o.completion_tokens;
        c.seed = o.seed;
      }
      cv_.notify_all();
    };
  }
  // Waits until `id` has finished (or has at least `min_tokens` tokens when > 0).
  Collected Wait(const std::string& id, int64_t min_tokens = 0) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] {
      auto it = got_.find(id);
      if (it == got_.end()) return false;
      if (min_tokens > 0 && static_cast<int64_t>(it->second.tokens.size()) >= min_tokens)
        return true;
      return it->second.finish != engine::FinishReason::kNone;
    });
    return got_[id];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Collected> got_;
};

// A random request for the ToyRunner (vocabulary 64, placeholders 60 / 61, eos 63).
engine::EngineRequest RandomToyRequest(std::mt19937_64& rng, const std::string& id,
                                       const std::vector<int32_t>& shared_prefix,
                                       const std::vector<engine::MediaItem>& shared_media);

}  // namespace m3::test
