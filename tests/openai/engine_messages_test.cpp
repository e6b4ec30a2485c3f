// GenerateRequest assembly and GenerateResponse reading: sampling fields set explicitly, F32
// pixels sent as they are or rounded to BF16, logprobs regrouped per token, finish reasons.
#include <doctest/doctest.h>

#include <cstring>

#include "gateway/engine_client/engine_request.h"
#include "gateway/engine_client/engine_response.h"
#include "shared/dtype.h"

using namespace m3::engine_client;
namespace v1 = m3::engine::v1;

TEST_CASE("BuildGenerateRequest") {
  m3::openai::SamplingRequest s;
  s.temperature = 0.5;
  s.top_p = 0.9;
  s.top_k = 7;
  s.min_p = 0.05;
  s.repetition_penalty = 1.2;
  s.presence_penalty = 0.25;
  s.frequency_penalty = -0.5;
  s.seed = 11;
  s.stop_token_ids = {9};
  s.logprobs = true;
  s.top_logprobs = 2;
  s.min_tokens = 1;
  const m3::HostTensor pixels = m3::HostTensor::FromFloat({2, 2}, {1.0f, -2.5f, 3.140625f, 0.1f});
  const std::vector<int32_t> ids = {1, 5, 5, 2};
  const EngineMedia media[1] = {{false, &pixels, {1, 2, 2}, 1}};

  const v1::GenerateRequest f32 = BuildGenerateRequest("r1", ids, media, s, 20, "F32");
  CHECK(f32.request_id() == "r1");
  CHECK(std::vector<int32_t>(f32.token_ids().begin(), f32.token_ids().end()) == ids);
  const v1::SamplingParams& p = f32.sampling();
  CHECK(p.temperature() == 0.5f);
  CHECK(p.top_p() == doctest::Approx(0.9));
  CHECK(p.top_k() == 7);
  CHECK(p.min_p() == doctest::Approx(0.05));
  CHECK(p.repetition_penalty() == doctest::Approx(1.2));
  CHECK(p.presence_penalty() == 0.25f);
  CHECK(p.frequency_penalty() == -0.5f);
  CHECK(p.seed() == 11u);
  CHECK(p.max_tokens() == 20);
  CHECK(p.stop_token_ids_size() == 1);
  CHECK(p.logprobs() == 2);
  CHECK(p.return_logprobs());
  CHECK(p.min_tokens() == 1);
  REQUIRE(f32.media_size() == 1);
  CHECK(f32.media(0).kind() == v1::MultimodalItem::KIND_IMAGE);
  CHECK(f32.media(0).pixel_values().dtype() == "F32");
  CHECK(f32.media(0).pixel_values().data().size() == 16);
  CHECK(f32.media(0).grid_thw_size() == 3);
  CHECK(f32.media(0).placeholder_tokens() == 1);

  const v1::GenerateRequest bf16 = BuildGenerateRequest("r2", ids, media, s, 20, "BF16");
  const std::string& data = bf16.media(0).pixel_values().data();
  REQUIRE(data.size() == 8);
  uint16_t second;
  std::memcpy(&second, data.data() + 2, 2);
  CHECK(m3::BF16ToF32(second) == -2.5f);
  CHECK_THROWS_AS(BuildGenerateRequest("r3", ids, media, s, 20, "F16"), m3::Error);
  m3::openai::SamplingRequest no_seed;
  CHECK_FALSE(BuildGenerateRequest("r4", ids, {}, no_seed, 5, "F32").sampling().has_seed());
}

TEST_CASE("GenerateResponse reading") {
  v1::GenerateResponse r;
  r.add_token_ids(4);
  r.add_token_ids(8);
  for (auto [id, lp] : std::vector<std::pair<int, float>>{
           {4, -0.1f}, {4, -0.1f}, {6, -2.0f}, {8, -0.3f}, {1, -0.2f}, {8, -0.3f}}) {
    auto* e = r.add_logprobs();
    e->set_token_id(id);
    e->set_logprob(lp);
  }
  const auto lps = TokenLogprobs(r, 2);
  REQUIRE(lps.size() == 2);
  CHECK(lps[1].id == 8);
  CHECK(lps[1].logprob == -0.3f);
  REQUIRE(lps[1].top.size() == 2);
  CHECK(lps[1].top[0].first == 1);
  CHECK_THROWS_AS(TokenLogprobs(r, 1), m3::Error);  // 6 entries are not 2 x (1 + 1)
  CHECK_FALSE(FinishReasonOf(r).has_value());
  r.set_finish_reason(v1::GenerateResponse::FINISH_REASON_LENGTH);
  r.set_prompt_tokens(30);
  r.set_completion_tokens(2);
  r.set_cached_prompt_tokens(16);
  CHECK(FinishReasonOf(r) == m3::text::FinishReason::kLength);
  const auto u = UsageOf(r);
  CHECK(u.prompt_tokens == 30);
  CHECK(u.completion_tokens == 2);
  CHECK(u.cached_prompt_tokens == 16);
}
