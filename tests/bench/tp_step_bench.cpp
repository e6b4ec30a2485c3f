// m3-bench-tp-step: the decode step of a tensor-parallel MiniMax-M3 (ranks are threads, one GPU
// each, as in the engine: parallel/parallel_runner.h) with NCCL all-reduces against the peer
// all-reduce (engine/parallel/peer_all_reduce_communicator.h, fused with the RMSNorm after it),
// side by side in one run, on random checkpoints at the real widths (m3-make-random-checkpoint)
// of two depths, typically 4 and 8 layers: the difference of their step times divided by the
// difference of their layer counts is the cost of one MSA + MoE layer, free of the embedding, the
// LM head and the host's per-step overhead (the figure of issue 41). Per TP size (1, 2, 4: those
// this machine has GPUs for), checkpoint and all-reduce, the ranks' decoder graphs
// (M3DecoderGraph, weights loaded once per TP size and checkpoint and shared by the modes) run
// decode steps of B sequences with random --context-token KV contexts as recorded CUDA graphs,
// each step ended by a stream synchronization on every rank (as the engine's sampling does).
// Reported per step: the host's wall time (median), the GPU span of rank 0's step (CUDA events
// around it) and the rest, idle GPU time (launch, synchronization, the rank threads' handoff).
// --breakdown adds, per MoE layer, the GPU time of rank 0 inside its two collectives (events
// recorded inside the graph around each all-reduce; with NCCL the all-reduce and the AddRmsNorm
// after it, with the peer kernels their one fused kernel: the same work) and the rest of the
// layer (its kernels and the gaps between them), from a separate run with those events recorded
// (they cost time of their own). --sweep times the all-reduce alone, NCCL against the peer
// kernel, back to back at decode-like sizes up to 8 MiB, for the size limit
// (kPeerAllReduceMaxBytes): the crossover is printed.
//   m3-bench-tp-step --checkpoints DIR4,DIR8 [--tp 1,2,4] [--batch 1,4,16,64] [--context 1024]
//       [--steps 30] [--warmup 5] [--breakdown] [--sweep] [--json FILE]
// One JSON object per measured configuration on stdout lines starting with "json " (and in
// --json FILE). M3_PEER_ALL_REDUCE_MAX_BYTES sets the peer path's size limit for the decode
// steps (e.g. after --sweep found another crossover); graph operations per layer (the recorded
// step's nodes, 8 - 4 layers) count the kernels a layer launches under each all-reduce.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend/cuda/cuda_device.h"
#include "engine/backend/device.h"
#include "engine/backend/m3_ops.h"
#include "engine/backend/make_device.h"
#include "engine/backend/make_m3_ops.h"
#include "engine/minimax_m3/m3_config.h"
#include "engine/minimax_m3/m3_decoder_graph.h"
#include "engine/minimax_m3/m3_model_weights.h"
#include "engine/minimax_m3/m3_shard_plan.h"
#include "engine/parallel/nccl_communicator.h"
#include "engine/parallel/peer_all_reduce_communicator.h"
#include "engine/parallel/rank_threads.h"
#include "shared/error.h"
#include "shared/safetensors.h"
#include "tests/bench/cuda_bench_kernels.cuh"

namespace {

using m3::DType;
using m3::engine::ForwardBatch;
using m3::engine::backend::Device;
using m3::engine::backend::DeviceTensor;
using m3::engine::parallel::AllReduceMode;
using m3::engine::parallel::Communicator;
using m3::engine::parallel::NcclGroup;
namespace be = m3::engine::backend;
namespace mm = m3::engine::minimax_m3;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> checkpoints;
  std::vector<int> tp = {1, 2, 4};
  std::vector<int64_t> batches = {1, 4, 16, 64};
  int64_t context = 1024;
  int steps = 30, warmup = 5;
  bool breakdown = false, sweep = false;
  std::string json;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "m3-bench-tp-step: %s\nusage: m3-bench-tp-step --checkpoints DIR4,DIR8 [--tp 1,2,4] "
               "[--batch 1,4,16,64] [--context 1024] [--steps 30] [--warmup 5] [--breakdown] "
               "[--sweep] [--json FILE]\n",
               why.c_str());
  std::exit(2);
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int64_t Positive(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const long long n = std::stoll(v, &used);
    if (used == v.size() && n > 0) return n;
  } catch (const std::exception&) {
  }
  Usage(flag + " must be a positive integer (or a list of them), not '" + v + "'");
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--checkpoints") {
      o.checkpoints = Split(value());
    } else if (a == "--tp") {
      o.tp.clear();
      for (const std::string& v : Split(value())) o.tp.push_back(static_cast<int>(Positive(a, v)));
    } else if (a == "--batch") {
      o.batches.clear();
      for (const std::string& v : Split(value())) o.batches.push_back(Positive(a, v));
    } else if (a == "--context") {
      o.context = Positive(a, value());
    } else if (a == "--steps") {
      o.steps = static_cast<int>(Positive(a, value()));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(Positive(a, value()));
    } else if (a == "--breakdown") {
      o.breakdown = true;
    } else if (a == "--sweep") {
      o.sweep = true;
    } else if (a == "--json") {
      o.json = value();
    } else {
      Usage("unknown argument '" + a + "'");
    }
  }
  if (o.checkpoints.empty() && !o.sweep) Usage("--checkpoints (or --sweep alone) is required");
  if (o.tp.empty() || o.batches.empty()) Usage("--tp and --batch need at least one value");
  return o;
}

void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string ModeName(AllReduceMode m) {
  return m == AllReduceMode::kNccl ? "nccl" : "custom";
}

// Events around every collective of the wrapped communicator, on its rank's stream, recorded as
// graph nodes when the stream is being captured (cudaEventRecordExternal), so replays of a
// recorded step re-record them. Events come from a pool made up front (none is created while a
// step is recorded).
class TimedCommunicator : public Communicator {
 public:
  TimedCommunicator(Communicator& inner, cudaStream_t stream) : inner_(inner), stream_(stream) {
    pool_.resize(4096);
    for (cudaEvent_t& e : pool_) Cuda(cudaEventCreate(&e), "event");
  }
  ~TimedCommunicator() override {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void AllReduceSum(const DeviceTensor& t) override {
    Timed([&] { inner_.AllReduceSum(t); });
  }
  void AllReduceAddRmsNorm(const DeviceTensor& delta, const DeviceTensor& residual,
                           const DeviceTensor& weight, float eps, const DeviceTensor& out,
                           be::M3Ops& ops) override {
    Timed([&] { inner_.AllReduceAddRmsNorm(delta, residual, weight, eps, out, ops); });
  }
  void AllGatherRows(const DeviceTensor& in, const DeviceTensor& out) override {
    Timed([&] { inner_.AllGatherRows(in, out); });
  }
  void AllGatherColumns(const DeviceTensor& in, const DeviceTensor& out,
                        const DeviceTensor& scratch) override {
    Timed([&] { inner_.AllGatherColumns(in, out, scratch); });
  }
  void Barrier() override { inner_.Barrier(); }

  // Collectives timed so far; the i-th one's GPU milliseconds and its start / end events.
  size_t calls() const { return used_ / 2; }
  cudaEvent_t start(size_t i) const { return pool_[2 * i]; }
  cudaEvent_t end(size_t i) const { return pool_[2 * i + 1]; }

 private:
  template <typename Fn>
  void Timed(Fn&& fn) {
    if (used_ + 2 > pool_.size()) throw std::runtime_error("TimedCommunicator: event pool spent");
    Record(pool_[used_]);
    fn();
    Record(pool_[used_ + 1]);
    used_ += 2;
  }
  // cudaEventRecordExternal is only legal while the stream is being captured.
  void Record(cudaEvent_t e) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    Cuda(cudaStreamIsCapturing(stream_, &status), "capture status");
    if (status == cudaStreamCaptureStatusActive)
      Cuda(cudaEventRecordWithFlags(e, stream_, cudaEventRecordExternal), "event (captured)");
    else
      Cuda(cudaEventRecord(e, stream_), "event");
  }

  Communicator& inner_;
  cudaStream_t stream_;
  std::vector<cudaEvent_t> pool_;
  size_t used_ = 0;
};

double Ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  Cuda(cudaEventElapsedTime(&ms, a, b), "event time");
  return ms;
}

// The same for the events recorded inside a graph (the breakdown): NaN, not a failed run, if
// this driver cannot time them.
double GraphMs(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
    cudaGetLastError();
    return std::nan("");
  }
  return ms;
}

// B decode rows of sequences with `ctx` tokens each (ctx - 1 cached), sequence s on pages
// [s * P, (s + 1) * P); every row's logits wanted (the step the decode graphs replay).
ForwardBatch DecodeBatch(int64_t seqs, int64_t ctx, int64_t page, int64_t vocab, uint64_t seed) {
  ForwardBatch b;
  const int64_t pages = (ctx + page - 1) / page;
  b.max_pages_per_seq = static_cast<int32_t>(pages);
  b.num_decodes = static_cast<int32_t>(seqs);
  b.query_start.push_back(0);
  std::mt19937_64 rng(seed);
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t pos = ctx - 1;
    b.context_lens.push_back(static_cast<int32_t>(pos));
    for (int64_t j = 0; j < pages; ++j)
      b.block_tables.push_back(static_cast<int32_t>(s * pages + j));
    b.token_ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab - 3)));
    b.positions.push_back(static_cast<int32_t>(pos));
    b.slot_mapping.push_back((s * pages + pos / page) * page + pos % page);
    b.query_start.push_back(static_cast<int32_t>(s + 1));
    b.logits_rows.push_back(static_cast<int32_t>(s));
  }
  return b;
}

// What one configuration measured.
struct Result {
  int tp = 1;
  std::string mode;  // "single", "nccl", "custom"
  int64_t layers = 0, batch = 0;
  double wall_ms = 0, gpu_ms = 0;  // per step: host wall, rank 0's GPU span
  // --breakdown, per MoE layer (rank 0): inside the two collectives, the rest of the layer.
  double layer_collective_us = -1, layer_other_us = -1, layer_us = -1;
  double step_collective_ms = -1;  // every collective of the step
  int64_t graph_ops = 0;           // operations (kernels, copies) in rank 0's recorded step
};

std::string Json(const Result& r) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"tp\": %d, \"all_reduce\": \"%s\", \"layers\": %lld, \"batch\": %lld, "
                "\"wall_ms\": %.4f, \"gpu_ms\": %.4f, \"idle_ms\": %.4f, \"layer_us\": %.2f, "
                "\"layer_collective_us\": %.2f, \"layer_other_us\": %.2f, "
                "\"step_collective_ms\": %.4f, \"graph_ops\": %lld}",
                r.tp, r.mode.c_str(), static_cast<long long>(r.layers),
                static_cast<long long>(r.batch), r.wall_ms, r.gpu_ms, r.wall_ms - r.gpu_ms,
                r.layer_us, r.layer_collective_us, r.layer_other_us, r.step_collective_ms,
                static_cast<long long>(r.graph_ops));
  return buf;
}

// The ranks of one TP size over one checkpoint: devices, ops, weights (loaded once), and the
// NCCL-only and peer communicator groups the modes' graphs use.
class Ranks {
 public:
  Ranks(const std::string& dir, int tp) : dir_(dir), tp_(tp), threads_(tp) {
    config_ = mm::LoadModelConfig(dir);
    mm::CheckM3Config(config_);
    for (int r = 0; r < tp; ++r) plans_.push_back(mm::MakeShardPlan(config_.text, tp, 1, r));
    std::vector<int> ids;
    for (int r = 0; r < tp; ++r) ids.push_back(r);
    if (tp > 1) {
      groups_[AllReduceMode::kNccl] = std::make_shared<NcclGroup>(ids, AllReduceMode::kNccl);
      groups_[AllReduceMode::kCustom] = std::make_shared<NcclGroup>(ids, AllReduceMode::kCustom);
    }
    const m3::WeightStore store = m3::WeightStore::OpenDirectory(dir);
    be::SharedPageRelease shared(tp);
    rank_.resize(static_cast<size_t>(tp));
    const auto t0 = Clock::now();
    threads_.Run([&](int r) {
      Rank& k = rank_[static_cast<size_t>(r)];
      k.dev = be::MakeDevice("cuda:" + std::to_string(r));
      k.ops = be::MakeM3Ops(*k.dev);
      k.stream = static_cast<cudaStream_t>(be::CudaDeviceStream(*k.dev));
      be::LoadReport report;
      k.weights = mm::LoadM3ModelWeights(store, config_, *k.dev, report,
                                         tp > 1 ? &plans_[static_cast<size_t>(r)] : nullptr,
                                         tp > 1 ? &shared : nullptr);
      for (auto& [mode, group] : groups_) k.comm[mode] = group->Bind(r, *k.dev);
    });
    std::printf("  loaded %s on %d GPU(s) in %.1f s (%lld layers)\n", dir.c_str(), tp,
                std::chrono::duration<double>(Clock::now() - t0).count(),
                static_cast<long long>(layers()));
  }
  ~Ranks() {
    // On each rank's thread, the weights before the device that holds them.
    threads_.Run([&](int r) {
      Rank& k = rank_[static_cast<size_t>(r)];
      k.comm.clear();
      k.weights = mm::M3ModelWeights{};
      k.ops.reset();
      k.dev.reset();
    });
  }
  int64_t layers() const { return config_.text.num_hidden_layers; }

  // Every batch size through `mode`'s graphs (kAuto: the single-GPU graph at TP 1); with
  // `timed`, collectives wrapped in events (the breakdown run).
  std::vector<Result> Measure(AllReduceMode mode, const Options& o, bool timed) {
    const mm::TextConfig& t = config_.text;
    const int64_t page = t.index_block_size > 0 ? t.index_block_size : 128;
    int64_t max_b = 1;
    for (int64_t b : o.batches) max_b = std::max(max_b, b);
    const int64_t pages_per_seq = (o.context + page - 1) / page;
    mm::DecoderStepLimits limits;
    limits.max_num_seqs = max_b;
    limits.max_batched_tokens = max_b;
    limits.decode_buckets = true;
    limits.graphs = true;
    std::vector<std::unique_ptr<mm::M3DecoderGraph>> graph(static_cast<size_t>(tp_));
    std::vector<std::unique_ptr<TimedCommunicator>> timers(static_cast<size_t>(tp_));
    threads_.Run([&](int r) {
      Rank& k = rank_[static_cast<size_t>(r)];
      Communicator* comm = tp_ > 1 ? k.comm.at(mode).get() : nullptr;
      if (comm && timed) {
        timers[static_cast<size_t>(r)] = std::make_unique<TimedCommunicator>(*comm, k.stream);
        comm = timers[static_cast<size_t>(r)].get();
      }
      auto& g = graph[static_cast<size_t>(r)];
      g = std::make_unique<mm::M3DecoderGraph>(config_, k.weights, *k.dev, *k.ops, limits,
                                               tp_ > 1 ? &plans_[static_cast<size_t>(r)] : nullptr,
                                               comm);
      g->AllocateKvCache(max_b * pages_per_seq, page);
      // Random contexts: K, V and index keys of unit RMS like the normed ones.
      for (size_t l = 0; l < static_cast<size_t>(layers()); ++l) {
        const be::LayerKvCache& kv = g->kv_cache(l);
        const DeviceTensor* parts[] = {&kv.k, &kv.v, &kv.index_k};
        for (uint64_t i = 0; i < 3; ++i)
          if (*parts[i])
            m3::bench::FillUniformBf16(parts[i]->data<void>(),
                                       static_cast<size_t>(parts[i]->numel()), 11 + l * 3 + i, 1.7f,
                                       0.0f, k.stream);
      }
      Cuda(cudaStreamSynchronize(k.stream), "KV fill");
    });
    cudaEvent_t a, b;
    threads_.Run([&](int r) {
      if (r != 0) return;
      Cuda(cudaEventCreate(&a), "event");
      Cuda(cudaEventCreate(&b), "event");
    });
    std::vector<Result> out;
    const mm::M3DecoderGraph::LogitsSink sink = [](const DeviceTensor&) {};
    for (int64_t B : o.batches) {
      const ForwardBatch batch = DecodeBatch(B, o.context, page, t.vocab_size, 5 + B);
      size_t first_call = 0, calls_per_step = 0;
      auto step = [&](bool record) {
        threads_.Run([&](int r) {
          Rank& k = rank_[static_cast<size_t>(r)];
          if (r == 0 && record) Cuda(cudaEventRecord(a, k.stream), "event");
          graph[static_cast<size_t>(r)]->Execute(batch, sink, m3::engine::CaptureRequest{});
          if (r == 0 && record) Cuda(cudaEventRecord(b, k.stream), "event");
          Cuda(cudaStreamSynchronize(k.stream), "step");
        });
      };
      // The first step records the bucket's graph after running it op by op: the timer's last
      // calls_per_step collectives of that step are the recorded ones.
      const size_t before = timers[0] ? timers[0]->calls() : 0;
      step(false);
      const be::DecodeGraphCache* recorded = graph[0]->decode_graphs();
      const int64_t graph_ops = recorded ? recorded->last_recorded_operations() : 0;
      if (timers[0]) {
        calls_per_step = (timers[0]->calls() - before) / 2;
        first_call = timers[0]->calls() - calls_per_step;
      }
      for (int i = 1; i < o.warmup; ++i) step(false);
      std::vector<double> wall, gpu, layer_coll, layer_other, layer_span, step_coll;
      for (int i = 0; i < o.steps; ++i) {
        const auto t0 = Clock::now();
        step(true);
        wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        gpu.push_back(Ms(a, b));
        if (!timers[0]) continue;
        // Collectives 2l (after o_proj) and 2l + 1 (after the MLP) belong to layer l; a layer
        // spans from the previous layer's last collective's end to its own last one's end.
        const TimedCommunicator& tc = *timers[0];
        auto dur = [&](size_t c) {
          return GraphMs(tc.start(first_call + c), tc.end(first_call + c));
        };
        double all = 0;
        for (size_t c = 0; c < calls_per_step; ++c) all += dur(c);
        if (!std::isnan(all)) step_coll.push_back(all);
        for (size_t l = 1; l < static_cast<size_t>(layers()) && 2 * l + 1 < calls_per_step; ++l) {
          if (!weights_moe(l)) continue;
          const double span =
              GraphMs(tc.end(first_call + 2 * l - 1), tc.end(first_call + 2 * l + 1));
          const double coll = dur(2 * l) + dur(2 * l + 1);
          if (std::isnan(span) || std::isnan(coll)) continue;
          layer_span.push_back(span * 1000);
          layer_coll.push_back(coll * 1000);
          layer_other.push_back((span - coll) * 1000);
        }
      }
      Result res;
      res.tp = tp_;
      res.mode = tp_ == 1 ? "single" : ModeName(mode);
      res.layers = layers();
      res.batch = B;
      res.wall_ms = Median(wall);
      res.gpu_ms = Median(gpu);
      res.graph_ops = graph_ops;
      if (!layer_span.empty()) {
        res.layer_us = Median(layer_span);
        res.layer_collective_us = Median(layer_coll);
        res.layer_other_us = Median(layer_other);
        res.step_collective_ms = Median(step_coll);
      }
      out.push_back(res);
    }
    threads_.Run([&](int r) {
      if (r == 0) {
        cudaEventDestroy(a);
        cudaEventDestroy(b);
      }
      graph[static_cast<size_t>(r)].reset();
      timers[static_cast<size_t>(r)].reset();
    });
    return out;
  }

 private:
  bool weights_moe(size_t l) const { return rank_[0].weights.layers.at(l).moe; }

  struct Rank {
    std::unique_ptr<Device> dev;
    std::unique_ptr<be::M3Ops> ops;
    cudaStream_t stream = nullptr;
    mm::M3ModelWeights weights;
    std::map<AllReduceMode, std::unique_ptr<Communicator>> comm;
  };
  std::string dir_;
  int tp_;
  m3::engine::parallel::RankThreads threads_;
  mm::ModelConfig config_;
  std::vector<mm::ShardPlan> plans_;
  std::map<AllReduceMode, std::shared_ptr<NcclGroup>> groups_;
  std::vector<Rank> rank_;
};

// The all-reduce alone at decode-like sizes: NCCL against the peer kernel (its size limit
// raised to the staging size for the sweep), back to back on every rank, GPU time per call on
// rank 0.
void Sweep(int tp, std::vector<std::string>& json) {
  std::printf("\nall-reduce alone, bf16, %d GPUs, back to back (us per call, rank 0):\n", tp);
  const char* prev = std::getenv("M3_PEER_ALL_REDUCE_MAX_BYTES");
  const std::string saved = prev ? prev : "";
  ::setenv("M3_PEER_ALL_REDUCE_MAX_BYTES",
           std::to_string(m3::engine::parallel::kPeerStagingBytes).c_str(), 1);
  std::vector<int> ids;
  for (int r = 0; r < tp; ++r) ids.push_back(r);
  std::map<AllReduceMode, std::shared_ptr<NcclGroup>> groups;
  groups[AllReduceMode::kNccl] = std::make_shared<NcclGroup>(ids, AllReduceMode::kNccl);
  groups[AllReduceMode::kCustom] = std::make_shared<NcclGroup>(ids, AllReduceMode::kCustom);
  if (prev)
    ::setenv("M3_PEER_ALL_REDUCE_MAX_BYTES", saved.c_str(), 1);
  else
    ::unsetenv("M3_PEER_ALL_REDUCE_MAX_BYTES");
  m3::engine::parallel::RankThreads threads(tp);
  std::vector<std::unique_ptr<Device>> dev(static_cast<size_t>(tp));
  std::vector<std::map<AllReduceMode, std::unique_ptr<Communicator>>> comm(static_cast<size_t>(tp));
  const int64_t max_n = m3::engine::parallel::kPeerStagingBytes / 2;
  std::vector<DeviceTensor> buf(static_cast<size_t>(tp));
  threads.Run([&](int r) {
    dev[r] = be::MakeDevice("cuda:" + std::to_string(r));
    for (auto& [m, g] : groups) comm[r][m] = g->Bind(r, *dev[r]);
    buf[r] = dev[r]->Alloc(DType::kBF16, {max_n});
    std::vector<float> ones(static_cast<size_t>(max_n), 0.001f);
    dev[r]->Upload(ones.data(), buf[r]);
  });
  std::printf("  %10s %10s %10s %10s\n", "bytes", "nccl", "custom", "faster");
  int64_t crossover = -1;
  for (int64_t rows : {1, 2, 4, 8, 16, 32, 64, 96, 128, 192, 256, 341}) {
    const int64_t n = rows * 6144;
    std::map<AllReduceMode, double> us;
    for (auto& [m, g] : groups) {
      constexpr int kIters = 100;
      double ms = 0;
      threads.Run([&](int r) {
        cudaStream_t s = static_cast<cudaStream_t>(be::CudaDeviceStream(*dev[r]));
        DeviceTensor t = buf[r].Rows(0, n);
        for (int i = 0; i < 10; ++i) comm[r][m]->AllReduceSum(t);
        cudaEvent_t a, b;
        Cuda(cudaEventCreate(&a), "event");
        Cuda(cudaEventCreate(&b), "event");
        Cuda(cudaEventRecord(a, s), "event");
        for (int i = 0; i < kIters; ++i) comm[r][m]->AllReduceSum(t);
        Cuda(cudaEventRecord(b, s), "event");
        Cuda(cudaEventSynchronize(b), "event");
        if (r == 0) ms = Ms(a, b);
        cudaEventDestroy(a);
        cudaEventDestroy(b);
      });
      us[m] = 1000.0 * ms / kIters;
    }
    const double nccl = us[AllReduceMode::kNccl], custom = us[AllReduceMode::kCustom];
    if (custom > nccl && crossover < 0) crossover = n * 2;
    std::printf("  %10lld %10.2f %10.2f %10s\n", static_cast<long long>(n * 2), nccl, custom,
                custom <= nccl ? "custom" : "nccl");
    char line[256];
    std::snprintf(line, sizeof line,
                  "{\"sweep\": true, \"tp\": %d, \"bytes\": %lld, \"nccl_us\": %.3f, "
                  "\"custom_us\": %.3f}",
                  tp, static_cast<long long>(n * 2), nccl, custom);
    json.push_back(line);
  }
  if (crossover < 0)
    std::printf("  the peer kernel is faster at every size measured (up to %lld bytes)\n",
                static_cast<long long>(341 * 6144 * 2));
  else
    std::printf("  NCCL first faster at %lld bytes (kPeerAllReduceMaxBytes is %lld)\n",
                static_cast<long long>(crossover),
                static_cast<long long>(m3::engine::parallel::kPeerAllReduceMaxBytes));
  threads.Run([&](int r) {
    comm[r].clear();
    buf[r] = DeviceTensor{};
    dev[r].reset();
  });
}

int Run(const Options& o) {
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  int gpus = 0;
  Cuda(cudaGetDeviceCount(&gpus), "counting GPUs");
  std::printf("m3-bench-tp-step: %d GPU(s), context %lld, %d steps after %d warm-up\n", gpus,
              static_cast<long long>(o.context), o.steps, o.warmup);
  std::vector<std::string> json;
  std::vector<Result> all;
  for (int tp : o.tp) {
    if (tp > gpus) {
      std::printf("\nTP %d: skipped, this machine has %d GPU(s)\n", tp, gpus);
      continue;
    }
    if (o.sweep && tp > 1) Sweep(tp, json);
    for (const std::string& dir : o.checkpoints) {
      std::printf("\nTP %d, %s:\n", tp, dir.c_str());
      Ranks ranks(dir, tp);
      const std::vector<AllReduceMode> modes =
          tp > 1 ? std::vector<AllReduceMode>{AllReduceMode::kNccl, AllReduceMode::kCustom}
                 : std::vector<AllReduceMode>{AllReduceMode::kAuto};
      for (AllReduceMode m : modes) {
        std::vector<Result> res = ranks.Measure(m, o, false);
        if (o.breakdown && tp > 1) {
          const std::vector<Result> timed = ranks.Measure(m, o, true);
          for (size_t i = 0; i < res.size(); ++i) {
            res[i].layer_us = timed[i].layer_us;
            res[i].layer_collective_us = timed[i].layer_collective_us;
            res[i].layer_other_us = timed[i].layer_other_us;
            res[i].step_collective_ms = timed[i].step_collective_ms;
          }
        }
        for (const Result& r : res) {
          std::printf(
              "  %-6s batch %3lld: step %.3f ms wall, %.3f ms GPU (idle %.3f ms), %lld graph ops",
              r.mode.c_str(), static_cast<long long>(r.batch), r.wall_ms, r.gpu_ms,
              r.wall_ms - r.gpu_ms, static_cast<long long>(r.graph_ops));
          if (r.layer_us >= 0)
            std::printf(
                "; per MoE layer (events run) %.1f us: collectives %.1f, rest %.1f; "
                "collectives of the step %.3f ms",
                r.layer_us, r.layer_collective_us, r.layer_other_us, r.step_collective_ms);
          std::printf("\n");
          json.push_back(Json(r));
          all.push_back(r);
        }
      }
    }
  }
  // The per-layer cost: the deepest against the shallowest checkpoint of each TP size and mode.
  std::printf(
      "\nper MSA + MoE layer, (deepest - shallowest step) / (layer difference): ms (graph "
      "operations, i.e. kernels and copies, per layer):\n");
  std::printf("  %3s %6s %16s %16s %16s\n", "TP", "batch", "nccl", "custom", "single");
  std::map<std::tuple<int, int64_t, std::string>, double> per_layer, ops_per_layer;
  for (const Result& hi : all)
    for (const Result& lo : all)
      if (hi.tp == lo.tp && hi.mode == lo.mode && hi.batch == lo.batch && hi.layers > lo.layers) {
        const double v = (hi.wall_ms - lo.wall_ms) / double(hi.layers - lo.layers);
        const double ops = double(hi.graph_ops - lo.graph_ops) / double(hi.layers - lo.layers);
        per_layer[{hi.tp, hi.batch, hi.mode}] = v;
        ops_per_layer[{hi.tp, hi.batch, hi.mode}] = ops;
        char line[320];
        std::snprintf(line, sizeof line,
                      "{\"per_layer\": true, \"tp\": %d, \"all_reduce\": \"%s\", \"batch\": %lld, "
                      "\"layers\": [%lld, %lld], \"ms_per_layer\": %.4f, \"ops_per_layer\": %.2f}",
                      hi.tp, hi.mode.c_str(), static_cast<long long>(hi.batch),
                      static_cast<long long>(lo.layers), static_cast<long long>(hi.layers), v, ops);
        json.push_back(line);
      }
  for (int tp : o.tp)
    for (int64_t B : o.batches) {
      auto get = [&](const std::string& m) {
        auto it = per_layer.find({tp, B, m});
        if (it == per_layer.end()) return std::string("-");
        char cell[64];
        std::snprintf(cell, sizeof cell, "%.4f (%.1f)", it->second, ops_per_layer[{tp, B, m}]);
        return std::string(cell);
      };
      if (tp > gpus) continue;
      std::printf("  %3d %6lld %16s %16s %16s\n", tp, static_cast<long long>(B),
                  get("nccl").c_str(), get("custom").c_str(), get("single").c_str());
    }
  for (const std::string& j : json) std::printf("json %s\n", j.c_str());
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    for (const std::string& j : json) f << j << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const Options o = ParseArgs(argc, argv);
  try {
    return Run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "m3-bench-tp-step: %s\n", e.what());
    return 1;
  }
}
