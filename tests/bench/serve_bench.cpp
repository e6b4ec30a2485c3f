// m3-bench-serve: end-to-end serving throughput of a running `m3-engine serve` over gRPC (the
// engine takes token ids, so any checkpoint works, e.g. m3-make-random-checkpoint's). For each
// concurrency C, C requests with distinct random prompts of --prompt tokens are sent at once
// (one client thread each), decoded greedily with ignore_eos for --output tokens. Reported per
// C: output tokens/s (all output tokens over the wall time from the first submit to the last
// token, prefill included), time per output token (per request: last token - first token over
// output - 1; median over requests), TTFT (median), and decode tokens/s (C / median TPOT: the
// rate while every request decodes), and the steady decode rate: tokens per second and step time
// over the window from the last request's first token to the first request's end, when every
// request decodes and none waits for prefill. Median of --runs runs. One JSON line per C on
// stdout, with a hash of each run's output tokens (the same --seed sends the same prompts, so
// runs against engines that should agree, e.g. CUDA graphs on and off, can be compared).
//   m3-bench-serve --address HOST:PORT [--prompt N] [--output N] [--conc 1,8,32,64]
//       [--runs N] [--label TEXT] [--seed S]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine.grpc.pb.h"

namespace {

namespace v1 = m3::engine::v1;
using Clock = std::chrono::steady_clock;

struct Result {
  Clock::time_point submit, first, done;
  int64_t tokens = 0;
  std::vector<Clock::time_point> arrivals;  // one per token
  uint64_t hash = 1469598103934665603ULL;   // FNV-1a of the output tokens
  std::string error;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "m3-bench-serve: %s\nusage: m3-bench-serve --address HOST:PORT [--prompt N] "
               "[--output N] [--conc 1,8,32,64] [--runs N] [--label TEXT] [--seed S]\n",
               why.c_str());
  std::exit(2);
}

int64_t Positive(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const long long n = std::stoll(v, &used);
    if (used == v.size() && n > 0) return n;
  } catch (const std::exception&) {
  }
  Usage(flag + " must be a positive integer, not '" + v + "'");
}

struct RunStats {
  double tok_s, tpot_ms, ttft_ms, decode_tok_s, wall_s;
  double steady_tok_s, steady_step_ms;  // while every request decodes (0: no such window)
  uint64_t tokens_hash;                 // of every request's output, in request order
};

RunStats RunOnce(v1::Engine::Stub& stub, int64_t conc, int64_t prompt, int64_t output,
                 const v1::ModelInfoResponse& info, std::mt19937_64& rng) {
  const int64_t vocab = info.vocab_size();
  std::vector<v1::GenerateRequest> reqs(conc);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 17));
  for (int64_t i = 0; i < conc; ++i) {
    v1::GenerateRequest& r = reqs[i];
    r.set_request_id("bench-" + std::to_string(rng()));
    for (int64_t j = 0; j < prompt; ++j) {
      int32_t t = tok(rng);
      // Not the image / video placeholders (a prompt without media must not hold them).
      while (t == info.image_token_id() || t == info.video_token_id()) t = tok(rng);
      r.add_token_ids(t);
    }
    v1::SamplingParams* s = r.mutable_sampling();
    s->set_temperature(0);
    s->set_max_tokens(static_cast<int32_t>(output));
    s->set_ignore_eos(true);
  }
  std::vector<Result> res(conc);
  std::vector<std::thread> threads;
  for (int64_t i = 0; i < conc; ++i)
    threads.emplace_back([&, i] {
      Result& out = res[i];
      grpc::ClientContext ctx;
      v1::GenerateResponse msg;
      out.submit = Clock::now();
      auto reader = stub.Generate(&ctx, reqs[i]);
      while (reader->Read(&msg)) {
        const Clock::time_point now = Clock::now();
        if (out.tokens == 0 && msg.token_ids_size() > 0) out.first = now;
        out.tokens += msg.token_ids_size();
        out.arrivals.insert(out.arrivals.end(), msg.token_ids_size(), now);
        for (int32_t t : msg.token_ids())
          out.hash = (out.hash ^ static_cast<uint32_t>(t)) * 1099511628211ULL;
      }
      out.done = Clock::now();
      const grpc::Status st = reader->Finish();
      if (!st.ok()) out.error = st.error_message();
    });
  for (auto& t : threads) t.join();
  Clock::time_point begin = res[0].submit, end = res[0].done;
  std::vector<double> tpot, ttft;
  int64_t tokens = 0;
  for (const Result& r : res) {
    if (!r.error.empty()) Usage("a request failed: " + r.error);
    if (r.tokens != output)
      Usage("a request returned " + std::to_string(r.tokens) + " tokens, not " +
            std::to_string(output));
    begin = std::min(begin, r.submit);
    end = std::max(end, r.done);
    tokens += r.tokens;
    ttft.push_back(Seconds(r.first - r.submit) * 1e3);
    if (output > 1)
      tpot.push_back(Seconds(r.done - r.first) * 1e3 / static_cast<double>(output - 1));
  }
  const double wall = Seconds(end - begin), tp = Median(tpot);
  // The steady decode window: from the last request's first token to the first request's
  // end, every request decodes (no prefill pending): tokens in it over its length.
  Clock::time_point lo = res[0].first, hi = res[0].done;
  for (const Result& r : res) {
    lo = std::max(lo, r.first);
    hi = std::min(hi, r.done);
  }
  double steady_tok_s = 0, steady_step_ms = 0;
  int64_t in_window = 0;
  for (const Result& r : res)
    for (const Clock::time_point& t : r.arrivals) in_window += t > lo && t <= hi ? 1 : 0;
  if (hi > lo && in_window >= 4 * conc) {
    steady_tok_s = static_cast<double>(in_window) / Seconds(hi - lo);
    steady_step_ms = Seconds(hi - lo) * 1e3 / (static_cast<double>(in_window) / conc);
  }
  uint64_t all = 1469598103934665603ULL;
  for (const Result& r : res) all = (all ^ r.hash) * 1099511628211ULL;
  return {static_cast<double>(tokens) / wall,
          tp,
          Median(ttft),
          tp > 0 ? static_cast<double>(conc) * 1e3 / tp : 0,
          wall,
          steady_tok_s,
          steady_step_ms,
          all};
}

}  // namespace

int main(int argc, char** argv) {
  std::string address, label = "", conc_list = "1,8,32,64";
  int64_t prompt = 8192, output = 64, runs = 1, seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage("option " + a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--address")
      address = v;
    else if (a == "--label")
      label = v;
    else if (a == "--conc")
      conc_list = v;
    else if (a == "--prompt")
      prompt = Positive(a, v);
    else if (a == "--output")
      output = Positive(a, v);
    else if (a == "--runs")
      runs = Positive(a, v);
    else if (a == "--seed")
      seed = Positive(a, v);
    else
      Usage("unknown option " + a);
  }
  if (address.empty()) Usage("--address is required");
  std::vector<int64_t> concs;
  std::stringstream ss(conc_list);
  for (std::string item; std::getline(ss, item, ',');) concs.push_back(Positive("--conc", item));

  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(256 << 20);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Engine::NewStub(channel);
  v1::ModelInfoResponse info;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const grpc::Status st = stub->ModelInfo(&ctx, v1::ModelInfoRequest(), &info);
    if (!st.ok()) Usage("ModelInfo on " + address + " failed: " + st.error_message());
  }
  if (prompt + output > info.max_prompt_tokens())
    Usage("--prompt + --output exceed the engine's longest prompt (" +
          std::to_string(info.max_prompt_tokens()) + " tokens)");
  std::fprintf(stderr, "m3-bench-serve: %s on %s (%s), vocab %lld, KV %lld pages of %d\n",
               info.model().c_str(), info.device().c_str(), label.c_str(),
               static_cast<long long>(info.vocab_size()), static_cast<long long>(info.kv_pages()),
               info.kv_page_size());
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  // Warm-up: one short request (first-use costs: cuBLAS heuristics, allocator pools).
  RunOnce(*stub, 1, 16, 4, info, rng);
  for (int64_t c : concs) {
    std::vector<RunStats> all;
    for (int64_t r = 0; r < runs; ++r) all.push_back(RunOnce(*stub, c, prompt, output, info, rng));
    std::string hashes;  // per run: the same prompts (--seed) give the same greedy outputs
    for (const RunStats& st : all) {
      char h[24];
      std::snprintf(h, sizeof(h), "%s%016llx", hashes.empty() ? "" : ",",
                    static_cast<unsigned long long>(st.tokens_hash));
      hashes += h;
    }
    auto med = [&](double RunStats::*f) {
      std::vector<double> v;
      for (const RunStats& s : all) v.push_back(s.*f);
      return Median(v);
    };
    std::printf(
        "{\"label\": \"%s\", \"concurrency\": %lld, \"prompt\": %lld, \"output\": %lld, "
        "\"runs\": %lld, \"output_tok_s\": %.2f, \"tpot_ms\": %.3f, \"ttft_ms\": %.1f, "
        "\"decode_tok_s\": %.1f, \"wall_s\": %.2f, \"steady_tok_s\": %.1f, "
        "\"steady_step_ms\": %.3f, \"tokens_hash\": \"%s\"}\n",
        label.c_str(), static_cast<long long>(c), static_cast<long long>(prompt),
        static_cast<long long>(output), static_cast<long long>(runs), med(&RunStats::tok_s),
        med(&RunStats::tpot_ms), med(&RunStats::ttft_ms), med(&RunStats::decode_tok_s),
        med(&RunStats::wall_s), med(&RunStats::steady_tok_s), med(&RunStats::steady_step_ms),
        hashes.c_str());
    std::fflush(stdout);
  }
  return 0;
}
