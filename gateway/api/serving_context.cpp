// The state every handler shares (see serving_context.h).
#include "gateway/api/serving_context.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "gateway/template/chat_template.h"
#include "shared/error.h"
#include "shared/model_config_view.h"

namespace m3::api {

std::string ModelNameFromDir(const std::string& model_dir) {
  std::string dir = model_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.find_last_of('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

ServingContext::ServingContext(ApiOptions options, engine_client::EngineRouter& router,
                               std::shared_ptr<const preprocess::PreprocessService> media_service,
                               std::shared_ptr<const media::MediaPreprocessor> preprocessor,
                               preprocess::PreprocessPools pools)
    : options_(std::move(options)),
      builder_(text::PromptBuilder::FromModelDir(options_.model_dir)),
      chat_format_(options_.chat_format
                       ? *options_.chat_format
                       : text::DetectChatFormat(tmpl::LoadChatTemplateSource(options_.model_dir))),
      router_(router),
      media_service_(std::move(media_service)),
      preprocessor_(std::move(preprocessor)),
      pools_(std::move(pools)),
      metrics_(std::make_unique<ApiMetrics>()) {
  const ModelConfigView config = LoadModelConfigView(options_.model_dir);
  Require(options_.default_chat_template_kwargs.is_object(), ErrorCode::kInvalidArgument,
          "the default chat template kwargs must be a JSON object");
  model_.name = options_.served_model_name.empty() ? ModelNameFromDir(options_.model_dir)
                                                   : options_.served_model_name;
  Require(!model_.name.empty(), ErrorCode::kInvalidArgument, "the served model name is empty");
  model_.generation = config.generation;
  config_max_len_ = config.text.max_position_embeddings;
  eos_ = config.eos_token_ids();
  vocab_size_ = static_cast<int64_t>(builder_.tokenizer().VocabSize());
  metrics_->WatchEngines(router_);
  metrics_->WatchPools(pools_.workers, pools_.fetch);
}

int64_t ServingContext::max_model_len() const {
  int64_t len = 0;
  for (const auto& e : router_.endpoints()) {
    if (auto info = e->model_info(); info && info->max_model_len() > 0) {
      len = len == 0 ? info->max_model_len() : std::min<int64_t>(len, info->max_model_len());
    }
  }
  return len > 0 ? len : config_max_len_;
}

openai::ServedModel ServingContext::served_model() const {
  openai::ServedModel m = model_;
  m.max_model_len = max_model_len();
  m.vocab_size = vocab_size_;
  return m;
}

std::string ServingContext::NewId(const char* prefix) const {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kHex[rng() & 15];
  return id;
}

int64_t ServingContext::Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool ServingContext::Dispatch(size_t body_bytes, std::function<void()> work) const {
  if (body_bytes <= kInlineBodyBytes) {
    work();
    return true;
  }
  return pools_.fetch->TrySubmit(std::move(work));
}

bool ServingContext::TryAdmit() const {
  if (admitted_.fetch_add(1) >= options_.max_concurrent_requests) {
    admitted_.fetch_sub(1);
    return false;
  }
  metrics_->in_flight().Inc();
  return true;
}

void ServingContext::Release() const {
  admitted_.fetch_sub(1);
  metrics_->in_flight().Dec();
}

}  // namespace m3::api
