// The real `m3-engine serve` process over gRPC from a C++ client: the goldens reproduced
// through the server, streaming, abort mid-stream, a client that disconnects (pages back,
// watched through Health), 64 concurrent streams equal to each request alone (with a tight
// page budget forcing preemption and shared prefixes hitting the prefix cache), the waiting
// queue bound, ModelInfo, and SIGTERM draining running streams.
#include <doctest/doctest.h>
#include <signal.h>

#include <atomic>
#include <cmath>
#include <map>
#include <random>
#include <thread>

#include "tests/engine_server/grpc_test_client.h"
#include "tests/engine_server/server_process.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

const char* const kCases[] = {"text", "image", "image2", "video"};

const SafetensorsFile& Cases(const std::string& set) {
  static std::map<std::string, SafetensorsFile> files;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = files.find(set);
  if (it == files.end())
    it =
        files.emplace(set, SafetensorsFile::Open(DataPath(set + "/model_cases.safetensors"))).first;
  return it->second;
}

v1::GenerateRequest LongText(const std::string& id, int max_tokens) {
  v1::GenerateRequest r = GoldenRequest(Cases("m3-tiny"), "text");
  r.set_request_id(id);
  r.mutable_sampling()->set_max_tokens(max_tokens);
  return r;
}

TEST_CASE("the goldens' greedy tokens through the server (m3-tiny, m3-alt), alone and together") {
  for (const char* set : {"m3-tiny", "m3-alt"}) {
    ServerProcess server(std::string(set) + "/model", {"--kv-pages", "128"});
    auto stub = server.Stub();
    for (const char* c : kCases) {
      CAPTURE(set);
      CAPTURE(c);
      const v1::GenerateRequest req = GoldenRequest(Cases(set), c);
      StreamResult r = RunStream(*stub, req);
      REQUIRE_MESSAGE(r.status.ok(), r.status.error_message());
      CHECK(r.tokens == GoldenTokens(Cases(set), c));
      CHECK(r.last.finish_reason() == v1::GenerateResponse::FINISH_REASON_LENGTH);
      CHECK(r.last.prompt_tokens() == req.token_ids_size());
      CHECK(r.last.completion_tokens() == static_cast<int>(r.tokens.size()));
    }
    // All four at once, twice each (the second copy hits the prefix and encoder caches).
    std::vector<std::thread> threads;
    std::vector<StreamResult> results(8);
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        v1::GenerateRequest req = GoldenRequest(Cases(set), kCases[i % 4]);
        req.set_request_id(req.request_id() + std::to_string(i));
        results[i] = RunStream(*stub, req);
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < 8; ++i) {
      CAPTURE(i);
      CHECK(results[i].status.ok());
      CHECK(results[i].tokens == GoldenTokens(Cases(set), kCases[i % 4]));
    }
    CHECK(WaitPagesFree(*stub, 5000));
    CHECK(Health(*stub).prefix_cache_hit_tokens() > 0);
  }
}

TEST_CASE("ModelInfo describes the model; BF16 pixels are accepted") {
  ServerProcess server("m3-tiny/model", {"--kv-pages", "64"});
  auto stub = server.Stub();
  grpc::ClientContext ctx;
  v1::ModelInfoResponse info;
  REQUIRE(stub->ModelInfo(&ctx, v1::ModelInfoRequest(), &info).ok());
  CHECK(info.architecture() == "minimax_m3_vl");
  CHECK(info.vocab_size() == 512);
  CHECK(info.max_model_len() == 4096);
  CHECK(info.image_token_id() == 500);
  CHECK(info.video_token_id() == 501);
  CHECK(info.spatial_merge_size() == 2);
  CHECK(info.patch_size() == 14);
  CHECK(info.patch_dim() == 1176);
  CHECK(info.eos_token_ids_size() == 1);
  CHECK(info.kv_pages() == 64);
  CHECK(info.kv_page_size() == 8);
  StreamResult r = RunStream(*stub, GoldenRequest(Cases("m3-tiny"), "image", /*bf16=*/true));
  CHECK(r.status.ok());
  CHECK(r.tokens.size() == GoldenTokens(Cases("m3-tiny"), "image").size());
}

TEST_CASE("streaming, abort mid-stream, a client that disconnects, the seed comes back") {
  // No prefix cache: the seeded re-run must compute its logits in the same chunks as the first
  // run (a cache hit changes the GEMM shapes, and with them the last bits of the logits, which
  // a temperature-1 draw can notice).
  ServerProcess server("m3-tiny/model", {"--kv-pages", "256", "--no-prefix-caching"});
  auto stub = server.Stub();

  v1::GenerateRequest req = LongText("stream", 64);
  req.mutable_sampling()->clear_temperature();  // generation_config defaults: sampled
  StreamResult r = RunStream(*stub, req);
  REQUIRE(r.status.ok());
  CHECK(r.messages > 1);
  CHECK(r.tokens.size() == 64);
  const uint64_t seed = r.last.seed();
  // Re-running with the returned seed reproduces the tokens.
  req.mutable_sampling()->set_seed(seed);
  CHECK(RunStream(*stub, req).tokens == r.tokens);

  // Abort mid-stream through the Abort RPC.
  {
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, LongText("to-abort", 3000));
    v1::GenerateResponse msg;
    int tokens = 0;
    while (tokens < 5 && reader->Read(&msg)) tokens += msg.token_ids_size();
    CHECK(Health(*stub).kv_pages_used() > 0);
    grpc::ClientContext actx;
    v1::AbortRequest areq;
    areq.set_request_id("to-abort");
    v1::AbortResponse ares;
    REQUIRE(stub->Abort(&actx, areq, &ares).ok());
    CHECK(ares.found());
    v1::GenerateResponse last;
    while (reader->Read(&msg)) last = msg;
    CHECK(reader->Finish().ok());
    CHECK(last.finish_reason() == v1::GenerateResponse::FINISH_REASON_ABORT);
    CHECK(WaitPagesFree(*stub, 2000));
  }

  // A client that goes away: its pages come back without any Abort call.
  {
    auto ctx = std::make_unique<grpc::ClientContext>();
    auto reader = stub->Generate(ctx.get(), LongText("leaver", 3000));
    v1::GenerateResponse msg;
    int tokens = 0;
    while (tokens < 5 && reader->Read(&msg)) tokens += msg.token_ids_size();
    CHECK(Health(*stub).kv_pages_used() > 0);
    ctx->TryCancel();
    reader->Finish();
    CHECK(WaitPagesFree(*stub, 2000));
  }
  // And the server goes on serving.
  CHECK(RunStream(*stub, GoldenRequest(Cases("m3-tiny"), "text")).tokens ==
        GoldenTokens(Cases("m3-tiny"), "text"));
}

// A mix of requests from the golden prompts of `set`: text prefixes of many lengths (shared
// prefixes), images, two-image prompts, videos; greedy with logprobs.
std::vector<v1::GenerateRequest> Mix(const std::string& set, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<v1::GenerateRequest> out;
  const v1::GenerateRequest text = GoldenRequest(Cases(set), "text");
  for (int i = 0; i < n; ++i) {
    v1::GenerateRequest r;
    const int kind = static_cast<int>(rng() % 6);
    if (kind < 3) {
      r = text;
      const int len =
          8 + static_cast<int>(rng() % static_cast<uint64_t>(text.token_ids_size() - 8));
      r.mutable_token_ids()->Truncate(len);
    } else {
      r = GoldenRequest(Cases(set), kCases[kind - 2]);
    }
    r.set_request_id("mix" + std::to_string(i));
    r.mutable_sampling()->set_max_tokens(1 + static_cast<int>(rng() % 16));
    r.mutable_sampling()->set_return_logprobs(true);
    out.push_back(std::move(r));
  }
  return out;
}

struct MixConfig {
  std::vector<std::string> args;
  bool expect_preemption;
};

// Runs `mix` alone (each distinct prompt once, with the longest max_tokens: greedy decoding
// makes a shorter request's answer a prefix of it), then all at once with staggered arrivals on
// a server per config, and checks every request's tokens and logprobs against alone.
void CheckMix(const std::string& set, const std::vector<v1::GenerateRequest>& mix,
              const std::vector<MixConfig>& configs) {
  std::vector<StreamResult> alone(mix.size());
  {
    ServerProcess server(set + "/model", {"--kv-pages", "128", "--no-prefix-caching"});
    auto stub = server.Stub();
    std::map<std::string, StreamResult> by_prompt;
    for (size_t i = 0; i < mix.size(); ++i) {
      v1::GenerateRequest key = mix[i];
      key.clear_request_id();
      key.mutable_sampling()->set_max_tokens(16);
      std::string k;
      key.SerializeToString(&k);
      auto it = by_prompt.find(k);
      if (it == by_prompt.end()) it = by_prompt.emplace(k, RunStream(*stub, key)).first;
      alone[i] = it->second;
      const size_t n = static_cast<size_t>(mix[i].sampling().max_tokens());
      REQUIRE(alone[i].tokens.size() == 16);
      alone[i].tokens.resize(n);
      alone[i].logprobs.resize(n);
    }
  }
  for (const MixConfig& cfg : configs) {
    ServerProcess server(set + "/model", cfg.args);
    auto stub = server.Stub();
    std::vector<StreamResult> got(mix.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < mix.size(); ++i) {
      threads.emplace_back([&, i] {
        // Staggered arrivals.
        std::this_thread::sleep_for(std::chrono::milliseconds((i * 7) % 40));
        got[i] = RunStream(*stub, mix[i]);
      });
    }
    for (auto& t : threads) t.join();
    double worst = 0;
    for (size_t i = 0; i < mix.size(); ++i) {
      CAPTURE(set);
      CAPTURE(i);
      REQUIRE_MESSAGE(got[i].status.ok(), got[i].status.error_message());
      REQUIRE(alone[i].status.ok());
      CHECK(got[i].tokens == alone[i].tokens);
      REQUIRE(got[i].logprobs.size() == alone[i].logprobs.size());
      for (size_t k = 0; k < got[i].logprobs.size(); ++k) {
        const double a = got[i].logprobs[k].logprob(), b = alone[i].logprobs[k].logprob();
        worst = std::max(worst, std::abs(a - b) / std::max(1.0, std::abs(b)));
      }
    }
    MESSAGE(set << ": largest relative logprob difference, batched vs alone: " << worst);
    CHECK(worst < 1e-4);
    CHECK(WaitPagesFree(*stub, 5000));
    const v1::HealthResponse h = Health(*stub);
    if (cfg.expect_preemption) CHECK(h.preemptions() > 0);
    CHECK(h.prefix_cache_hit_tokens() > 0);
  }
}

TEST_CASE("64 concurrent streams equal each request alone, also under preemption (m3-tiny)") {
  CheckMix("m3-tiny", Mix("m3-tiny", 64, 7),
           {{{"--kv-pages", "512", "--max-num-seqs", "64"}, false},
            // Pages of 4 tokens, 60 pages for 64 streams, small chunks and steps: preemption.
            {{"--kv-pages", "60", "--page-size", "4", "--max-batched-tokens", "96",
              "--max-prefill-chunk", "40", "--max-num-seqs", "64"},
             true}});
}

TEST_CASE("a request mix equals each request alone under preemption (m3-alt)") {
  // m3-alt's MSA block is 4 tokens: pages of 2, 100 of them for 24 streams.
  CheckMix("m3-alt", Mix("m3-alt", 24, 11),
           {{{"--kv-pages", "100", "--page-size", "2", "--max-batched-tokens", "64",
              "--max-prefill-chunk", "24", "--max-num-seqs", "24"},
             true}});
}

TEST_CASE("a full waiting queue answers RESOURCE_EXHAUSTED; the server keeps serving") {
  ServerProcess server("m3-tiny/model",
                       {"--kv-pages", "128", "--max-num-seqs", "1", "--max-waiting", "1"});
  auto stub = server.Stub();
  grpc::ClientContext c1, c2;
  auto r1 = stub->Generate(&c1, LongText("a", 3000));
  v1::GenerateResponse msg;
  REQUIRE(r1->Read(&msg));  // a runs
  auto r2 = stub->Generate(&c2, LongText("b", 3000));
  for (int i = 0; i < 400 && Health(*stub).waiting_requests() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  StreamResult r = RunStream(*stub, LongText("c", 4));
  CHECK(r.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(r.status.error_message().find("queue") != std::string::npos);
  c1.TryCancel();
  c2.TryCancel();
  r1->Finish();
  r2->Finish();
  CHECK(WaitPagesFree(*stub, 2000));
  CHECK(RunStream(*stub, LongText("d", 4)).status.ok());
}

TEST_CASE("SIGTERM: no new requests, running streams finish, the process exits 0") {
  ServerProcess server("m3-tiny/model", {"--kv-pages", "128"});
  auto stub = server.Stub();
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, LongText("drain", 400));
  v1::GenerateResponse msg;
  int tokens = 0;
  while (tokens < 3 && reader->Read(&msg)) tokens += msg.token_ids_size();
  kill(server.pid(), SIGTERM);
  for (int i = 0; i < 400 && Health(*stub).status() == v1::HealthResponse::STATUS_SERVING; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  StreamResult refused = RunStream(*stub, LongText("late", 4));
  CHECK_FALSE(refused.status.ok());
  v1::GenerateResponse last;
  while (reader->Read(&msg)) {
    tokens += msg.token_ids_size();
    last = msg;
  }
  CHECK(reader->Finish().ok());
  CHECK(tokens == 400);
  CHECK(last.finish_reason() == v1::GenerateResponse::FINISH_REASON_LENGTH);
  CHECK(server.WaitExit(30000) == 0);
}

}  // namespace
}  // namespace m3::test

namespace m3::test {
namespace {

// The pages of one memory budget as `m3-engine serve` reports them at startup ("KV N pages of P
// tokens in DTYPE (...)"), with float32 K/V and with --kv-cache-dtype fp8 (e4m3 codes and a
// float32 scale per K or V vector: head_dim 32 takes 36 bytes instead of 128).
TEST_CASE("m3-engine serve --kv-cache-dtype fp8: the startup line shows the larger pool") {
  auto pages_of = [](const std::string& log, const std::string& dtype) -> int64_t {
    const size_t at = log.find(" pages of 16 tokens in " + dtype + " (");
    const size_t kv = log.rfind("KV ", at);
    if (at == std::string::npos || kv == std::string::npos) return -1;
    return std::stoll(log.substr(kv + 3, at - kv - 3));
  };
  const std::vector<std::string> budget = {"--kv-memory", "0.0078125", "--page-size", "16"};
  std::vector<std::string> fp8_args = budget;
  fp8_args.insert(fp8_args.end(), {"--kv-cache-dtype", "fp8"});
  int64_t f32 = -1, fp8 = -1;
  {
    ServerProcess server("demo-model/model", budget);
    f32 = pages_of(server.Log(), "F32");
  }
  {
    ServerProcess server("demo-model/model", fp8_args);
    fp8 = pages_of(server.Log(), "F8_E4M3");
  }
  std::printf("  serve, 8 MiB of KV: %lld pages of 16 with f32 K/V, %lld with FP8\n",
              static_cast<long long>(f32), static_cast<long long>(fp8));
  REQUIRE(f32 > 0);
  REQUIRE(fp8 > 0);
  CHECK(fp8 * 10 >= f32 * 25);
}

TEST_CASE("m3-engine serve: bad flags end with a message and a non-zero exit") {
  const std::string model = DataPath("m3-tiny/model");
  const std::vector<std::vector<std::string>> bad = {
      {"serve", "--model", model},
      {"serve", "--model", model, "--port", "70000"},
      {"serve", "--model", model, "--port", "0", "--kv-pages", "4", "--kv-memory", "1"},
      {"serve", "--model", model, "--port", "0", "--page-size", "3"},
      {"serve", "--model", model, "--port", "0", "--max-num-seqs", "0"},
      {"serve", "--model", model, "--port", "0", "--kv-pages", "99999999999999999999"},
      {"serve", "--model", model, "--port", "0", "--kv-pages", "900000000000000000"},
      {"serve", "--model", model, "--port", "0", "--encoder-cache-mb", "-1"},
      {"serve", "--model", model, "--port", "0", "--kv-memory", "nan"},
      {"serve", "--model", model, "--port", "0", "--bogus", "1"},
      {"serve", "--model", model, "--port", "0", "--kv-cache-dtype", "fp16"},
      {"serve", "--model", "/nonexistent", "--port", "0"},
  };
  for (const auto& args : bad) {
    std::vector<std::string> argv = {BinPath("m3-engine")};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessResult r = RunProcess(argv);
    CAPTURE(args.back());
    CHECK(r.exit_code != 0);
    CHECK(r.err.find("m3-engine: error") != std::string::npos);
  }
}

}  // namespace
}  // namespace m3::test
