// m3-engine: the offline runner of the engine (the acceptance contract of the CPU backend).
//   m3-engine logits   --model DIR --inputs IN.safetensors --output OUT.safetensors [--capture]
//   m3-engine generate --model DIR --inputs IN.safetensors --max-new-tokens N
//                      [--temperature T --top-p P --top-k K --seed S --ignore-eos]
// Errors print one line on stderr and exit 2; usage errors exit 64.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "engine/cli/arg_parser.h"
#include "engine/cli/cache_options.h"
#include "engine/cli/engine_generate.h"
#include "engine/cli/quantize_command.h"
#include "engine/cli/speculative_options.h"
#ifdef M3_ENGINE_SERVER
#include "engine/cli/serve_command.h"
#endif
#include "engine/generate.h"
#include "engine/model_inputs.h"
#include "engine/model_registry.h"
#include "shared/error.h"
#include "shared/generation_config.h"
#include "shared/safetensors.h"

namespace m3::engine::cli {
namespace {

constexpr const char* kUsage =
    "usage:\n"
    "  m3-engine logits --model DIR --inputs IN.safetensors --output OUT.safetensors [--capture]\n"
    "      [--device cpu|cuda|cuda:N] [--index-key-cache bf16|fp8] [--load-format F]\n"
    "      [--kv-cache-dtype auto|bf16|fp8|fp8_e4m3]\n"
    "      writes logits F32 [T, V]; --capture adds hidden_states.i, block_indices.layerN,\n"
    "      image.* / video.* vision_tower_out and projector_out\n"
    "  m3-engine generate --model DIR --inputs IN.safetensors --max-new-tokens N [--device D]\n"
    "      [--temperature T] [--top-p P] [--top-k K] [--seed S] [--ignore-eos]\n"
    "      sampling defaults come from the model's generation_config.json (else greedy)\n"
    "      prints {\"tokens\":[...]} as the last stdout line\n"
    "      [--speculative-method eagle3|mtp|ngram|none] [--speculative-model DIR]\n"
    "      [--num-speculative-tokens K] [--ngram-min N] [--ngram-max N]\n"
    "      [--speculative-backoff on|off] (generate and serve): speculative decoding, k drafts\n"
    "      (default 3) per sequence verified in one target forward, exact (greedy output and\n"
    "      seeded draws as without it); ngram: prompt lookup of the last ngram-min..ngram-max\n"
    "      (default 1..4) tokens; generate then runs through the serving engine and prints\n"
    "      {\"tokens\":[...],\"speculative\":{\"proposed\":P,\"accepted\":A,\"steps\":S}};\n"
    "      the back-off (default on) lowers k per step from measured acceptance and batch\n"
    "      size; env M3_SPEC_FORCE_ACCEPTANCE=r (measuring only, breaks exactness): k drafts\n"
    "      every decode, each accepted with probability r whatever the target says\n"
    "  m3-engine serve --model DIR --port P [--host H] [--device cpu|cuda[:N]] [--max-num-seqs N]\n"
    "      [--max-batched-tokens N] [--kv-pages N | --kv-memory GiB | --gpu-memory-fraction F]\n"
    "      [--page-size N] [--cuda-graphs on|off] [--tensor-parallel N] [--expert-parallel N]\n"
    "      [--index-key-cache bf16|fp8] [--all-reduce auto|nccl|custom]\n"
    "      [--kv-cache-dtype auto|bf16|fp8|fp8_e4m3]\n"
    "      [--max-prefill-chunk N] [--max-waiting N] [--no-prefix-caching]\n"
    "      [--encoder-cache-mb N] [--max-message-mb N] [--served-model-name NAME]\n"
    "      [--api-key KEY]\n"
    "      listens on 127.0.0.1 unless --host (0.0.0.0: every interface), alone on its port (a\n"
    "      port another process holds: exit 2); --api-key KEY (or env M3_ENGINE_API_KEY, which\n"
    "      keeps it out of ps) makes every RPC need metadata 'authorization: Bearer KEY';\n"
    "      --max-message-mb (default: the model's largest legal request) caps a message;\n"
    "      gRPC engine server (proto/engine.proto); prints 'm3-engine: listening on port P';\n"
    "      SIGTERM stops admission, finishes running streams and exits; on a GPU the KV cache\n"
    "      takes F (default 0.9) of its memory less what is in use after the weights load;\n"
    "      --cuda-graphs (default on) replays decode-only steps as recorded CUDA graphs (off:\n"
    "      op by op at the same padded shapes, with the same results);\n"
    "      --tensor-parallel / --expert-parallel (each 1 or the same N) run the model on N\n"
    "      ranks (threads: cpu, or GPUs cuda:K..K+N-1 over NCCL), attention split by heads,\n"
    "      experts by expert (ep) or by their intermediate (tp only); --all-reduce (GPUs)\n"
    "      auto (default): decode-sized all-reduces on one-shot kernels over NVLink peer\n"
    "      access, fused with the next RMSNorm, NCCL for the rest and without peer access;\n"
    "      nccl: NCCL only; custom: as auto, an error without peer access;\n"
    "      --index-key-cache fp8 (any command) caches MSA index keys as e4m3 + a scale per key\n"
    "      --kv-cache-dtype fp8 (any command) stores K/V pages as e4m3 + a scale per (token,\n"
    "      kv head): about twice the KV pages in the same memory (auto/bf16: the device's dtype)\n"
    "  m3-engine quantize --model DIR --output DIR --format mxfp8|nvfp4|mixed [--dequantize]\n"
    "      [--max-shard-size 5GB] [--mlp-names keep|released|transformers]\n"
    "      writes the float checkpoint DIR in a released quantized layout (mxfp8: MiniMax's;\n"
    "      nvfp4: ModelOpt NVFP4 routed experts + down_proj; mixed: ModelOpt MXFP8 + NVFP4\n"
    "      experts), or with --dequantize those quantized values as float32, in shards\n"
    "  --load-format auto|safetensors|dummy (logits, generate, serve): dummy reads no weight\n"
    "      file: every tensor config.json (and its quantization config) describes is drawn\n"
    "      on the device (bf16 normal, std 0.02; quantized Linears in their formats)\n";

int RunLogits(const std::vector<std::string>& args) {
  ArgParser p;
  for (const char* o :
       {"model", "inputs", "output", "device", "index-key-cache", "load-format", "kv-cache-dtype"})
    p.AddOption(o);
  p.AddFlag("capture");
  p.Parse(args);
  const std::string model_dir = p.Required("model"), in_path = p.Required("inputs"),
                    out_path = p.Required("output");
  RunnerOptions device;
  device.device = p.Get("device").value_or("cpu");
  ApplyCacheOptions(p, device);
  device.dummy_weights =
      p.Choice("load-format", {"auto", "safetensors", "dummy"}, "auto") == "dummy";
  ModelInputs inputs = ReadModelInputs(in_path);
  auto model = LoadModel(model_dir, {}, device);
  CaptureOptions capture;
  capture.hidden_states = capture.block_indices = capture.vision = p.Has("capture");
  auto seq = model->NewSequence();
  PrefillResult r = model->Prefill(*seq, inputs, capture);
  NamedTensors out;
  out.emplace_back("logits", HostTensor::FromFloat({r.rows, model->vocab_size()}, r.logits));
  for (auto& t : r.captured) out.push_back(std::move(t));
  WriteSafetensors(out_path, out);
  return 0;
}

// generate's last stdout line: {"tokens":[...]} and, with speculation, its counters.
std::string TokensJson(const std::vector<int32_t>& tokens, const EngineStats* spec) {
  std::string line = "{\"tokens\":[";
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i) line += ',';
    line += std::to_string(tokens[i]);
  }
  line += "]";
  if (spec)
    line += ",\"speculative\":{\"proposed\":" + std::to_string(spec->spec_proposed) +
            ",\"accepted\":" + std::to_string(spec->spec_accepted) +
            ",\"steps\":" + std::to_string(spec->spec_steps) + "}";
  return line + "}";
}

int RunGenerate(const std::vector<std::string>& args) {
  ArgParser p;
  for (const char* o : {"model", "inputs", "max-new-tokens", "temperature", "top-p", "top-k",
                        "seed", "device", "index-key-cache", "load-format", "kv-cache-dtype"})
    p.AddOption(o);
  p.AddFlag("ignore-eos");
  AddSpeculativeOptions(p);
  p.Parse(args);
  const std::string model_dir = p.Required("model");
  const spec::SpeculativeConfig speculative = SpeculativeOptions(p);
  // generation_config.json's sampling values are the defaults; do_sample false means greedy.
  const GenerationConfig gen = LoadGenerationConfig(model_dir);
  const bool sample = gen.do_sample.value_or(true);
  GenerateOptions opt;
  opt.max_new_tokens = p.Int("max-new-tokens", 16);
  opt.ignore_eos = p.Has("ignore-eos");
  opt.sampling.temperature =
      static_cast<float>(p.Double("temperature", sample ? gen.temperature.value_or(0.0) : 0.0));
  opt.sampling.top_p = static_cast<float>(p.Double("top-p", gen.top_p.value_or(1.0)));
  opt.sampling.top_k = p.Int("top-k", std::max<int64_t>(0, gen.top_k.value_or(0)));
  int64_t seed = p.Int("seed", 0);
  Require(opt.max_new_tokens >= 0, ErrorCode::kInvalidArgument, "--max-new-tokens must be >= 0");
  Require(opt.sampling.temperature >= 0, ErrorCode::kInvalidArgument, "--temperature must be >= 0");
  Require(opt.sampling.top_p > 0 && opt.sampling.top_p <= 1, ErrorCode::kInvalidArgument,
          "--top-p must be in (0, 1]");
  Require(opt.sampling.top_k >= 0, ErrorCode::kInvalidArgument, "--top-k must be >= 0");
  Require(seed >= 0, ErrorCode::kInvalidArgument, "--seed must be >= 0");
  opt.sampling.seed = static_cast<uint64_t>(seed);
  RunnerOptions device;
  device.device = p.Get("device").value_or("cpu");
  ApplyCacheOptions(p, device);
  device.dummy_weights =
      p.Choice("load-format", {"auto", "safetensors", "dummy"}, "auto") == "dummy";
  ModelInputs inputs = ReadModelInputs(p.Required("inputs"));
  if (speculative.enabled()) {
    // Through the serving engine, where speculation runs: the whole prompt and its drafts'
    // verify steps in one KV cache sized for this request.
    EngineConfig cfg;
    cfg.speculative = speculative;
    cfg.speculative.target_model_dir = model_dir;
    cfg.speculative.uniform_drafts = device.device != "cpu";
    if (device.device == "cpu") cfg.speculative.backoff_free_rows = 2;  // as serve's
    cfg.scheduler.max_num_seqs = 1;  // the KV cache then holds one full context
    device.max_num_seqs = 1;
    device.max_logits_per_seq = 1 + speculative.num_speculative_tokens;
    if (speculative.method == spec::SpeculativeMethod::kEagle3) device.draft_hidden_layers = 3;
    SamplingRequest req;
    req.temperature = opt.sampling.temperature;
    req.top_p = opt.sampling.top_p;
    req.top_k = opt.sampling.top_k;
    req.seed = opt.sampling.seed;
    req.max_tokens = std::max<int64_t>(opt.max_new_tokens, 1);
    req.ignore_eos = opt.ignore_eos;
    EngineGenerateResult r = EngineGenerate(model_dir, device, cfg, inputs, req);
    if (opt.max_new_tokens == 0) r.tokens.clear();
    std::cout << TokensJson(r.tokens, &r.stats) << std::endl;
    return 0;
  }
  auto model = LoadModel(model_dir, {}, device);
  std::vector<int64_t> tokens = Generate(*model, inputs, opt);
  std::cout << TokensJson(std::vector<int32_t>(tokens.begin(), tokens.end()), nullptr) << std::endl;
  return 0;
}

int Main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 64 : 0;
  }
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "logits") return RunLogits(args);
    if (cmd == "generate") return RunGenerate(args);
    if (cmd == "quantize") return RunQuantize(args);
    if (cmd == "serve") {
#ifdef M3_ENGINE_SERVER
      return RunServe(args);
#else
      throw Error(ErrorCode::kUnsupported, "this m3-engine was built without gRPC: no serve");
#endif
    }
    std::cerr << "m3-engine: unknown command '" << cmd << "'\n" << kUsage;
    return 64;
  } catch (const Error& e) {
    std::cerr << "m3-engine: error (" << ErrorCodeName(e.code()) << "): " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "m3-engine: error: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace
}  // namespace m3::engine::cli

int main(int argc, char** argv) {
  return m3::engine::cli::Main(argc, argv);
}
