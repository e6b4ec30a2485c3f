// ServingContext: what every API handler shares for the life of the server: the served model
// (name, generation defaults, tokenizer and prompt builder, the reasoning and tool-call format
// of its output, the chat template variables every request starts from), the media
// preprocessing service and its pools, the engine router, the limits, the API keys and the
// metrics. Built once at start-up from the model directory; everything in it is immutable or
// thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/api/api_metrics.h"
#include "gateway/engine_client/engine_router.h"
#include "gateway/media/media_preprocessor.h"
#include "gateway/openai/served_model.h"
#include "gateway/preprocess/preprocess_pipeline.h"
#include "gateway/preprocess/preprocess_service.h"
#include "gateway/text/chat_format.h"
#include "gateway/text/prompt_builder.h"

namespace m3::api {

struct ApiOptions {
  std::string model_dir;
  std::string served_model_name;      // empty: the model directory's name
  std::vector<std::string> api_keys;  // empty: no authentication
  // /ready shows every caller the engines' addresses and errors (--ready-details); otherwise
  // only callers with a valid API key see them, the rest counts and states.
  bool ready_details = false;
  openai::ApiLimits limits;
  // Generation requests admitted at once (parsing, media, prompt, engine); more get 429.
  int64_t max_concurrent_requests = 1024;
  // The reasoning and tool-call format of the model's output (`serve` resolves it from the
  // template and its --reasoning-parser / --tool-call-parser flags); unset: detected from the
  // model directory's chat template.
  std::optional<text::ChatFormat> chat_format;
  // Chat template variables every chat request gets (--default-chat-template-kwargs); a
  // request's chat_template_kwargs override them key by key.
  nlohmann::ordered_json default_chat_template_kwargs = nlohmann::ordered_json::object();
};

class ServingContext {
 public:
  // Loads the tokenizer, chat template and generation config from options.model_dir. The
  // router, service and pools must be started by the caller and outlive the context.
  ServingContext(ApiOptions options, engine_client::EngineRouter& router,
                 std::shared_ptr<const preprocess::PreprocessService> media_service,
                 std::shared_ptr<const media::MediaPreprocessor> preprocessor,
                 preprocess::PreprocessPools pools);

  const ApiOptions& options() const { return options_; }
  const std::string& model_name() const { return model_.name; }
  // The served model with max_model_len from the engines (the smallest any reported), else
  // config.json's max_position_embeddings.
  openai::ServedModel served_model() const;
  int64_t max_model_len() const;
  const text::PromptBuilder& prompt_builder() const { return builder_; }
  const text::ChatFormat& chat_format() const { return chat_format_; }
  const tok::Tokenizer& tokenizer() const { return builder_.tokenizer(); }
  const std::vector<int64_t>& eos_token_ids() const { return eos_; }
  int64_t vocab_size() const { return vocab_size_; }
  engine_client::EngineRouter& router() const { return router_; }
  const preprocess::PreprocessService& media_service() const { return *media_service_; }
  std::shared_ptr<const preprocess::PreprocessService> media_service_ptr() const {
    return media_service_;
  }
  const media::MediaPreprocessor& preprocessor() const { return *preprocessor_; }
  const preprocess::PreprocessPools& pools() const { return pools_; }
  ApiMetrics& metrics() const { return *metrics_; }

  // A fresh response id: prefix + 24 random hex digits.
  std::string NewId(const char* prefix) const;
  // Seconds since the Unix epoch.
  static int64_t Now();

  // Runs `work` on the calling thread for bodies up to kInlineBodyBytes (parsing them takes
  // well under a millisecond), else on the fetch pool so a large body never stalls a network
  // thread. False when the pool's queue is full (the work does not run: answer 429).
  static constexpr size_t kInlineBodyBytes = 256 * 1024;
  bool Dispatch(size_t body_bytes, std::function<void()> work) const;

  // Admission of one generation request (TryAdmit false: answer 429). Released by Release.
  bool TryAdmit() const;
  void Release() const;
  // Whether TryAdmit would refuse now (a hint for refusing before the body is read).
  bool saturated() const { return admitted_.load() >= options_.max_concurrent_requests; }

 private:
  ApiOptions options_;
  openai::ServedModel model_;
  int64_t config_max_len_ = 0;
  int64_t vocab_size_ = 0;
  text::PromptBuilder builder_;
  text::ChatFormat chat_format_;
  std::vector<int64_t> eos_;
  engine_client::EngineRouter& router_;
  std::shared_ptr<const preprocess::PreprocessService> media_service_;
  std::shared_ptr<const media::MediaPreprocessor> preprocessor_;
  preprocess::PreprocessPools pools_;
  std::unique_ptr<ApiMetrics> metrics_;
  mutable std::atomic<int64_t> admitted_{0};
};

// The directory's last path component ("/models/m3-tiny/" -> "m3-tiny").
std::string ModelNameFromDir(const std::string& model_dir);

}  // namespace m3::api
