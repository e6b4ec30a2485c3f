// `m3-engine serve --device cuda` driven by a gRPC client: the demo prompts' greedy completions
// equal those of a CPU server (same binary, float32) and batched equals alone on the GPU server,
// the KV cache sized from the GPU memory left after the weights (--gpu-memory-fraction, in the
// log and ModelInfo), a request beyond the context refused with INVALID_ARGUMENT; the goldens
// (m3-tiny, chat-e2e) served on the GPU with their agreement with the references printed.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "shared/safetensors.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/engine_server/grpc_test_client.h"
#include "tests/engine_server/server_process.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

v1::GenerateRequest DemoRequest(const DemoPrompt& p) {
  v1::GenerateRequest req;
  req.set_request_id(p.name);
  for (int64_t t : p.inputs.input_ids) req.add_token_ids(static_cast<int32_t>(t));
  for (bool video : {false, true}) {
    const auto& v = video ? p.inputs.videos : p.inputs.images;
    if (!v) continue;
    int64_t row = 0;
    for (const auto& g : v->grids) {
      const int64_t rows = g[0] * g[1] * g[2];
      v1::MultimodalItem* m = req.add_media();
      m->set_kind(video ? v1::MultimodalItem::KIND_VIDEO : v1::MultimodalItem::KIND_IMAGE);
      for (int64_t x : g) m->add_grid_thw(x);
      auto* t = m->mutable_pixel_values();
      t->add_shape(rows);
      t->add_shape(v->patch_dim);
      t->set_dtype("F32");
      t->set_data(std::string(reinterpret_cast<const char*>(v->pixels.data() + row * v->patch_dim),
                              static_cast<size_t>(rows * v->patch_dim) * 4));
      row += rows;
    }
  }
  auto* s = req.mutable_sampling();
  s->set_temperature(0);
  s->set_max_tokens(16);
  s->set_return_logprobs(true);
  return req;
}

double WorstLogprobGap(const StreamResult& a, const StreamResult& b) {
  double worst = 0;
  for (size_t i = 0; i < std::min(a.logprobs.size(), b.logprobs.size()); ++i)
    worst = std::max(
        worst, static_cast<double>(std::abs(a.logprobs[i].logprob() - b.logprobs[i].logprob())));
  return worst;
}

size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

TEST_CASE("serve --device cuda over gRPC: demo completions equal the CPU server's") {
  ServerProcess gpu("demo-model/model", {"--device", "cuda", "--gpu-memory-fraction", "0.25"});
  ServerProcess cpu("demo-model/model", {"--kv-pages", "256"});
  auto gs = gpu.Stub();
  auto cs = cpu.Stub();

  grpc::ClientContext ctx;
  v1::ModelInfoResponse info;
  REQUIRE(gs->ModelInfo(&ctx, v1::ModelInfoRequest(), &info).ok());
  std::printf("  cuda serve: ModelInfo device %s dtype %s, %lld KV pages of %d tokens\n",
              info.device().c_str(), info.dtype().c_str(), static_cast<long long>(info.kv_pages()),
              info.kv_page_size());
  CHECK(info.device() == "cuda:0");
  CHECK(info.kv_pages() > 256);
  const std::string log = gpu.Log();
  const size_t at = log.find("GPU memory fraction 0.25 leaves");
  REQUIRE_MESSAGE(at != std::string::npos, log);
  std::printf(
      "  cuda serve log: %s\n",
      log.substr(log.rfind('\n', at) + 1, log.find('\n', at) - log.rfind('\n', at) - 1).c_str());

  const std::vector<DemoPrompt> prompts = DemoPrompts();
  std::vector<StreamResult> alone;
  double worst = 0;
  for (const DemoPrompt& p : prompts) {
    CAPTURE(p.name);
    const v1::GenerateRequest req = DemoRequest(p);
    StreamResult g = RunStream(*gs, req), c = RunStream(*cs, req);
    REQUIRE_MESSAGE(g.status.ok(), g.status.error_message());
    REQUIRE_MESSAGE(c.status.ok(), c.status.error_message());
    CHECK(g.tokens == c.tokens);
    worst = std::max(worst, WorstLogprobGap(g, c));
    alone.push_back(std::move(g));
  }
  std::printf(
      "  cuda serve: %zu demo completions equal to the CPU server's: worst chosen-token "
      "logprob gap %.3e\n",
      prompts.size(), worst);
  CHECK(worst <= 5e-2);

  // All at once on the GPU server: batched equals alone.
  std::vector<StreamResult> batched(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i)
    threads.emplace_back([&, i] { batched[i] = RunStream(*gs, DemoRequest(prompts[i])); });
  for (auto& t : threads) t.join();
  double worst_batched = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    CAPTURE(prompts[i].name);
    REQUIRE(batched[i].status.ok());
    CHECK(batched[i].tokens == alone[i].tokens);
    worst_batched = std::max(worst_batched, WorstLogprobGap(batched[i], alone[i]));
  }
  std::printf("  cuda serve: batched equals alone; worst chosen-token logprob gap %.3e\n",
              worst_batched);
  CHECK(worst_batched <= 5e-2);

  v1::GenerateRequest big = DemoRequest(prompts[0]);
  big.clear_token_ids();
  for (int i = 0; i < 9000; ++i) big.add_token_ids(94);
  const StreamResult refused = RunStream(*gs, big);
  CHECK(refused.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(gpu.Stop(SIGTERM) == 0);
}

TEST_CASE("serve --device cuda over gRPC: m3-tiny goldens and the chat-e2e text case") {
  ServerProcess gpu("m3-tiny/model", {"--device", "cuda", "--gpu-memory-fraction", "0.25"});
  auto gs = gpu.Stub();
  const SafetensorsFile cases = SafetensorsFile::Open(DataPath("m3-tiny/model_cases.safetensors"));
  for (const std::string prefix : {"text", "image", "image2", "video"}) {
    const StreamResult r = RunStream(*gs, GoldenRequest(cases, prefix, prefix == "image"));
    REQUIRE_MESSAGE(r.status.ok(), r.status.error_message());
    const std::vector<int32_t> want = GoldenTokens(cases, prefix);
    CHECK(r.tokens.size() == want.size());
    std::printf(
        "  cuda serve m3-tiny %-6s: greedy tokens equal to the reference for the first "
        "%zu of %zu (random weights: bf16 rounding flips near-ties)\n",
        prefix.c_str(), CommonPrefix(r.tokens, want), want.size());
  }
  CHECK(gpu.Stop(SIGTERM) == 0);

  ServerProcess chat("chat-e2e/model", {"--device", "cuda", "--gpu-memory-fraction", "0.25"});
  auto st = chat.Stub();
  for (const auto& c : nlohmann::json::parse(ReadFile(DataPath("chat-e2e/chat_cases.json")))) {
    if (c["name"] != "text") continue;  // the other cases carry pictures
    v1::GenerateRequest req;
    req.set_request_id(c["name"].get<std::string>());
    for (const auto& id : c["prompt_ids"]) req.add_token_ids(id.get<int32_t>());
    const auto want = c["completion_ids"].get<std::vector<int32_t>>();
    req.mutable_sampling()->set_temperature(0);
    req.mutable_sampling()->set_max_tokens(static_cast<int32_t>(want.size()));
    const StreamResult r = RunStream(*st, req);
    REQUIRE_MESSAGE(r.status.ok(), r.status.error_message());
    CHECK(!r.tokens.empty());
    std::printf(
        "  cuda serve chat-e2e %-10s: completion equal to the reference for the first %zu "
        "of %zu tokens\n",
        c["name"].get<std::string>().c_str(), CommonPrefix(r.tokens, want), want.size());
  }
  CHECK(chat.Stop(SIGTERM) == 0);
}

}  // namespace
}  // namespace m3::test
