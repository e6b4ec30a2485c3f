// m3-bench-cuda-layer: one MSA + MoE decoder layer of MiniMax-M3 at the real shapes on the CUDA
// backend, run by the model's own graph (M3DecoderGraph with a one-layer config, random bf16
// weights and KV pages made on the device), against the limits of the same GPU measured in the
// same run: HBM read bandwidth (a streaming read of 4 GiB, and a device copy) and the bf16 GEMM
// peak (cuBLAS, large square GEMMs).
//   - decode at several batch sizes with a long context: median step time against the byte
//     roofline (attention, router and shared-expert weights, the experts the step selected,
//     the selected K/V blocks and every index key, at the measured read bandwidth);
//   - prefill of one long prompt: achieved TFLOP/s (useful FLOPs: projections, the selected
//     experts' GEMMs, the indexer over the causal keys and attention over the selected keys)
//     against the measured peak.
// Times are medians of CUDA-event timings on the backend's stream after warm-up. --graphs
// replays decode steps as the graph's recorded CUDA graphs (steps that want logits, so they
// also run the config's 1024-token LM head: its bytes are reported as a second roofline figure
// beside the layer's). --breakdown adds per-op timings
// (events around every backend op, in separate op-by-op runs). --json writes the figures for
// tests/bench/torch/layer_bench.py's side-by-side (scripts/device/kernel_bench.sh layer).
// docs/PERF.md has the results.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_device.h"
#include "engine/backend/device.h"
#include "engine/backend/m3_ops.h"
#include "engine/backend/make_m3_ops.h"
#include "engine/minimax_m3/m3_config.h"
#include "engine/minimax_m3/m3_decoder_graph.h"
#include "engine/minimax_m3/m3_model_weights.h"
#include "shared/error.h"
#include "tests/bench/cuda_bench_kernels.cuh"

namespace {

using m3::DType;
using m3::Shape;
using m3::engine::ForwardBatch;
using m3::engine::backend::Device;
using m3::engine::backend::DeviceTensor;
namespace be = m3::engine::backend;

struct Options {
  std::vector<int64_t> batches = {1, 8, 64};
  int64_t context = 32768;  // tokens visible to each decode row, its own included
  int64_t prefill = 8192;
  int decode_iters = 20, prefill_iters = 5, warmup = 3;
  bool breakdown = false;
  bool graphs = false;  // decode steps recorded once and replayed as CUDA graphs
  std::string json;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "m3-bench-cuda-layer: %s\n"
               "usage: m3-bench-cuda-layer [--batches 1,8,64] [--context 32768] [--prefill 8192]\n"
               "  [--decode-iters 20] [--prefill-iters 5] [--warmup 3] [--breakdown] "
               "[--graphs] [--json FILE]\n"
               "  context and prefill: positive multiples of 128 (the MSA block); 0 skips.\n",
               why.c_str());
  std::exit(2);
}

int64_t ParseCount(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < lo || n > hi)
    Usage(flag + " wants an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
          "], got '" + v + "'");
  return n;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--breakdown") {
      o.breakdown = true;
    } else if (a == "--graphs") {
      o.graphs = true;
    } else if (a == "--batches") {
      o.batches.clear();
      std::stringstream ss(value());
      std::string item;
      while (std::getline(ss, item, ',')) o.batches.push_back(ParseCount(a, item, 1, 1024));
      if (o.batches.empty()) Usage("--batches is empty");
    } else if (a == "--context") {
      o.context = ParseCount(a, value(), 0, 1 << 20);
    } else if (a == "--prefill") {
      o.prefill = ParseCount(a, value(), 0, 1 << 17);
    } else if (a == "--decode-iters") {
      o.decode_iters = static_cast<int>(ParseCount(a, value(), 1, 10000));
    } else if (a == "--prefill-iters") {
      o.prefill_iters = static_cast<int>(ParseCount(a, value(), 1, 1000));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(ParseCount(a, value(), 0, 1000));
    } else if (a == "--json") {
      o.json = value();
    } else {
      Usage("unknown argument '" + a + "'");
    }
  }
  if (o.context % 128 != 0 || o.prefill % 128 != 0)
    Usage("--context and --prefill must be multiples of 128");
  return o;
}

void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Times `fn` (work queued on `stream`) with CUDA events: warmup runs, then the median of iters.
template <typename Fn>
double MedianMs(cudaStream_t stream, int warmup, int iters, Fn&& fn) {
  cudaEvent_t a, b;
  Cuda(cudaEventCreate(&a), "event");
  Cuda(cudaEventCreate(&b), "event");
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    Cuda(cudaEventRecord(a, stream), "event record");
    fn();
    Cuda(cudaEventRecord(b, stream), "event record");
    Cuda(cudaEventSynchronize(b), "event sync");
    float t = 0;
    Cuda(cudaEventElapsedTime(&t, a, b), "event time");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return Median(ms);
}

// The device and ops the graph runs on: every call forwarded to the CUDA device or its ops; with
// timing on, CUDA events around each op (labelled by its weight where it has one), and with probing
// on, the routed expert ids of each MoE call read back (for the roofline's distinct experts).
class TimedBackend : public be::Device, public be::M3Ops {
 public:
  TimedBackend(Device& inner, be::M3Ops& ops, cudaStream_t stream)
      : in_(inner), ops_(ops), stream_(stream) {}
  ~TimedBackend() override {
    for (auto& e : pool_) cudaEventDestroy(e);
  }

  void Label(const DeviceTensor& w, const std::string& name) { labels_[w.data<void>()] = name; }
  void Label(const be::LinearWeight& w, const std::string& name) { Label(w.w, name); }
  bool timing = false;
  bool probing = false;
  std::vector<int32_t> last_ids;  // the latest probed MoE ids

  // Per-op milliseconds of the steps run with timing on (one entry per step and label).
  std::map<std::string, std::vector<double>> op_ms;
  void BeginTiming() { step_.clear(); }
  void EndTiming() {
    Cuda(cudaStreamSynchronize(stream_), "step sync");
    std::map<std::string, double> sum;
    for (auto& [name, a, b] : step_) {
      float t = 0;
      Cuda(cudaEventElapsedTime(&t, a, b), "event time");
      sum[name] += t;
    }
    for (auto& [name, t] : sum) op_ms[name].push_back(t);
    used_ = 0;
  }

  std::string name() const override { return in_.name(); }
  DType activation_dtype() const override { return in_.activation_dtype(); }
  DType weight_dtype() const override { return in_.weight_dtype(); }
  size_t weight_bytes() const override { return in_.weight_bytes(); }
  size_t allocated_bytes() const override { return in_.allocated_bytes(); }
  DeviceTensor Alloc(DType dtype, Shape shape) override {
    return in_.Alloc(dtype, std::move(shape));
  }
  void Upload(const void* host, const DeviceTensor& dst) override {
    Timed("Upload", [&] { in_.Upload(host, dst); });
  }
  void Download(const DeviceTensor& src, void* host) override { in_.Download(src, host); }
  DeviceTensor UploadWeight(std::span<const m3::TensorView> parts, Shape shape,
                            const PartRead& part_read = nullptr) override {
    return in_.UploadWeight(parts, std::move(shape), part_read);
  }
  void ReserveStepWorkspace(size_t bytes) override { in_.ReserveStepWorkspace(bytes); }
  void BeginStep(size_t from = 0) override { in_.BeginStep(from); }
  void EndStep() override { in_.EndStep(); }
  size_t StepWorkspaceUsed() const override { return in_.StepWorkspaceUsed(); }
  std::unique_ptr<be::StepGraph> Record(const std::function<void()>& ops) override {
    return in_.Record(ops);
  }
  void SampleRows(const DeviceTensor& logits, std::span<const m3::engine::SampleRow> rows,
                  std::vector<m3::engine::SampledToken>& out) override {
    in_.SampleRows(logits, rows, out);
  }
  be::StepMetadata PrepareStep(const ForwardBatch& batch, int64_t page_size,
                               std::span<const float> cos, std::span<const float> sin,
                               int64_t rotary_dim) override {
    be::StepMetadata m;
    Timed("PrepareStep (uploads)",
          [&] { m = in_.PrepareStep(batch, page_size, cos, sin, rotary_dim); });
    return m;
  }
  be::StepMetadata PrepareStepFromPositions(const ForwardBatch& batch, int64_t page_size,
                                            std::span<const float> inv_freq) override {
    be::StepMetadata m;
    Timed("PrepareStep (uploads, rotary rows)",
          [&] { m = in_.PrepareStepFromPositions(batch, page_size, inv_freq); });
    return m;
  }
  void Embedding(const DeviceTensor& t, const DeviceTensor& ids, const DeviceTensor& out) override {
    Timed("Embedding", [&] { ops_.Embedding(t, ids, out); });
  }
  void CopyRows(const DeviceTensor& s, int64_t sr, const DeviceTensor& d, int64_t dr,
                int64_t n) override {
    Timed("CopyRows", [&] { ops_.CopyRows(s, sr, d, dr, n); });
  }
  void GatherRows(const DeviceTensor& s, const DeviceTensor& i, const DeviceTensor& o) override {
    Timed("GatherRows", [&] { ops_.GatherRows(s, i, o); });
  }
  void AddRmsNorm(const DeviceTensor& r, const DeviceTensor* d, const DeviceTensor& w, float eps,
                  const DeviceTensor& o) override {
    Timed("AddRmsNorm " + LabelOf(w), [&] { ops_.AddRmsNorm(r, d, w, eps, o); });
  }
  void LayerNorm(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& b, float eps,
                 const DeviceTensor& o) override {
    Timed("LayerNorm", [&] { ops_.LayerNorm(x, w, b, eps, o); });
  }
  void Add(const DeviceTensor& x, const DeviceTensor& d) override {
    Timed("Add", [&] { ops_.Add(x, d); });
  }
  void Gelu(const DeviceTensor& x) override {
    Timed("Gelu", [&] { ops_.Gelu(x); });
  }
  void Linear(const DeviceTensor& x, const be::LinearWeight& w, const DeviceTensor* b,
              const DeviceTensor& y) override {
    Timed("Linear " + LabelOf(w.w), [&] { ops_.Linear(x, w, b, y); });
  }
  void QkNormRopeToCache(const DeviceTensor& qkv, const be::QkvLayout& l,
                         const be::QkNormWeights& n, const be::StepMetadata& m,
                         const DeviceTensor& q, const DeviceTensor* iq,
                         const be::LayerKvCache& c) override {
    Timed("QkNormRopeToCache", [&] { ops_.QkNormRopeToCache(qkv, l, n, m, q, iq, c); });
  }
  void PagedAttention(const DeviceTensor& q, const be::LayerKvCache& c, const be::StepMetadata& m,
                      const be::AttentionShape& s, const DeviceTensor& o) override {
    Timed("PagedAttention", [&] { ops_.PagedAttention(q, c, m, s, o); });
  }
  void MsaSelectBlocks(const DeviceTensor& iq, const be::LayerKvCache& c, const be::StepMetadata& m,
                       const be::MsaParams& p, const DeviceTensor& sel) override {
    Timed("MsaSelectBlocks", [&] { ops_.MsaSelectBlocks(iq, c, m, p, sel); });
  }
  void BlockSparseAttention(const DeviceTensor& q, const be::LayerKvCache& c,
                            const be::StepMetadata& m, const be::AttentionShape& s,
                            const DeviceTensor& sel, int64_t topk, int64_t bs,
                            const DeviceTensor& o) override {
    Timed("BlockSparseAttention", [&] { ops_.BlockSparseAttention(q, c, m, s, sel, topk, bs, o); });
  }
  void MsaAttention(const DeviceTensor& q, const DeviceTensor& iq, const be::LayerKvCache& c,
                    const be::StepMetadata& m, const be::MsaParams& p, const be::AttentionShape& s,
                    const DeviceTensor& sel, const DeviceTensor& o) override {
    Timed("MsaAttention", [&] { ops_.MsaAttention(q, iq, c, m, p, s, sel, o); });
  }
  void SwigluOai(const DeviceTensor& gu, const be::SwigluParams& p,
                 const DeviceTensor& o) override {
    Timed("SwigluOai", [&] { ops_.SwigluOai(gu, p, o); });
  }
  void MoeRoute(const DeviceTensor& l, const DeviceTensor& b, const DeviceTensor& ids,
                const DeviceTensor& w, const be::ExpertRange& local) override {
    Timed("MoeRoute", [&] { ops_.MoeRoute(l, b, ids, w, local); });
  }
  void MoeExperts(const DeviceTensor& x, const DeviceTensor& ids, const DeviceTensor& w,
                  const be::LinearWeight& gu, const be::LinearWeight& d, const be::SwigluParams& p,
                  float scale, const DeviceTensor& out) override {
    if (probing) {
      last_ids.resize(ids.numel());
      in_.Download(ids, last_ids.data());
    }
    Timed("MoeExperts (routed)", [&] { ops_.MoeExperts(x, ids, w, gu, d, p, scale, out); });
  }
  void SegmentAttention(const DeviceTensor& qkv, const DeviceTensor& c, const DeviceTensor& s,
                        int64_t rot, std::span<const int64_t> seg, int64_t heads, int64_t hd,
                        const DeviceTensor& o) override {
    Timed("SegmentAttention", [&] { ops_.SegmentAttention(qkv, c, s, rot, seg, heads, hd, o); });
  }

 private:
  std::string LabelOf(const DeviceTensor& w) const {
    auto it = labels_.find(w.data<void>());
    return it == labels_.end() ? "?" : it->second;
  }
  cudaEvent_t Event() {
    if (used_ == pool_.size()) {
      cudaEvent_t e;
      Cuda(cudaEventCreate(&e), "event");
      pool_.push_back(e);
    }
    return pool_[used_++];
  }
  template <typename Fn>
  void Timed(const std::string& name, Fn&& fn) {
    if (!timing) return fn();
    cudaEvent_t a = Event(), b = Event();
    Cuda(cudaEventRecord(a, stream_), "event record");
    fn();
    Cuda(cudaEventRecord(b, stream_), "event record");
    step_.push_back({name, a, b});
  }

  struct Span {
    std::string name;
    cudaEvent_t a, b;
  };
  Device& in_;
  be::M3Ops& ops_;
  cudaStream_t stream_;
  std::map<const void*, std::string> labels_;
  std::vector<Span> step_;
  std::vector<cudaEvent_t> pool_;
  size_t used_ = 0;
};

// The real model's text shapes, one MSA + MoE layer; a small vocabulary (the LM head is not
// part of a layer and is not run: no logits rows).
m3::engine::minimax_m3::ModelConfig LayerConfig() {
  m3::engine::minimax_m3::ModelConfig c;
  c.model_type = "minimax_m3_vl";
  m3::engine::minimax_m3::TextConfig& t = c.text;
  t.vocab_size = 1024;
  t.hidden_size = 6144;
  t.num_hidden_layers = 1;
  t.num_attention_heads = 64;
  t.num_key_value_heads = 4;
  t.head_dim = 128;
  t.rotary_dim = 64;
  t.rope_theta = 5000000.0;
  t.rms_norm_eps = 1e-6;
  t.max_position_embeddings = 1 << 20;
  t.intermediate_size = 3072;
  t.dense_intermediate_size = 3072;
  t.shared_intermediate_size = 3072;
  t.num_local_experts = 128;
  t.num_experts_per_tok = 4;
  t.routed_scaling_factor = 2.0;
  t.index_n_heads = 4;
  t.index_head_dim = 128;
  t.index_block_size = 128;
  t.index_topk_blocks = 16;
  t.index_local_blocks = 1;
  t.sparse_attention = {true};
  t.moe_mlp = {true};
  c.image_token_id = 1000;
  c.video_token_id = 1001;
  return c;
}

class Maker {
 public:
  Maker(Device& b, cudaStream_t s) : b_(b), s_(s) {}
  // Uniform in offset +- scale; matrices bf16, vectors f32 (the CUDA backend's convention).
  DeviceTensor Rand(Shape shape, float scale, float offset = 0.0f) {
    const DType dt = shape.size() >= 2 ? DType::kBF16 : DType::kF32;
    DeviceTensor t = b_.Alloc(dt, std::move(shape));
    Fill(t, scale, offset);
    return t;
  }
  void Fill(const DeviceTensor& t, float scale, float offset = 0.0f) {
    FillSeeded(t, ++seed_, scale, offset);
  }
  void FillSeeded(const DeviceTensor& t, uint64_t seed, float scale, float offset = 0.0f) {
    if (t.dtype == DType::kBF16)
      m3::bench::FillUniformBf16(t.data<void>(), t.numel(), seed, scale, offset, s_);
    else
      m3::bench::FillUniformF32(t.data<float>(), t.numel(), seed, scale, offset, s_);
  }

 private:
  Device& b_;
  cudaStream_t s_;
  uint64_t seed_ = 1000;
};

// Weights with unit-variance outputs for unit-variance inputs (uniform +- sqrt(3 / fan_in)).
m3::engine::minimax_m3::M3ModelWeights MakeWeights(const m3::engine::minimax_m3::ModelConfig& c,
                                                   Maker& mk) {
  const m3::engine::minimax_m3::TextConfig& t = c.text;
  const int64_t H = t.hidden_size, D = t.head_dim, Di = t.index_head_dim;
  auto fan = [](int64_t k) { return static_cast<float>(std::sqrt(3.0 / double(k))); };
  m3::engine::minimax_m3::M3ModelWeights w;
  w.embed_tokens = mk.Rand({t.vocab_size, H}, 1.0f);
  w.final_norm = mk.Rand({H}, 0.1f);
  w.lm_head = mk.Rand({t.vocab_size, H}, fan(H));
  m3::engine::minimax_m3::M3DecoderLayerWeights L;
  L.sparse_attention = true;
  L.moe = true;
  L.input_norm = mk.Rand({H}, 0.1f);
  L.post_attention_norm = mk.Rand({H}, 0.1f);
  const int64_t qkv_rows =
      (t.num_attention_heads + 2 * t.num_key_value_heads) * D + (t.index_n_heads + 1) * Di;
  L.qkv_proj = mk.Rand({qkv_rows, H}, fan(H));
  L.o_proj = mk.Rand({H, t.num_attention_heads * D}, fan(t.num_attention_heads * D));
  L.norms.q_norm = mk.Rand({D}, 0.1f);
  L.norms.k_norm = mk.Rand({D}, 0.1f);
  L.norms.index_q_norm = mk.Rand({Di}, 0.1f);
  L.norms.index_k_norm = mk.Rand({Di}, 0.1f);
  L.router = mk.Rand({t.num_local_experts, H}, fan(H));
  L.router_bias = mk.Rand({t.num_local_experts}, 0.05f);
  const int64_t E = t.num_local_experts, I = t.intermediate_size, S = t.shared_intermediate_size;
  L.experts_gate_up = mk.Rand({E, 2 * I, H}, fan(H));
  L.experts_down = mk.Rand({E, H, I}, fan(I));
  L.shared_gate_up = mk.Rand({2 * S, H}, fan(H));
  L.shared_down = mk.Rand({H, S}, fan(S));
  w.layers.push_back(std::move(L));
  return w;
}

// `seqs` sequences of `rows` rows each after `ctx` cached tokens, sequence s on pages
// [s * pages_per_seq, ...); decode when rows == 1.
ForwardBatch MakeBatch(int64_t seqs, int64_t rows, int64_t ctx, int64_t page, int64_t vocab,
                       std::mt19937& rng) {
  ForwardBatch b;
  const int64_t pages_per_seq = (ctx + rows + page - 1) / page;
  b.max_pages_per_seq = static_cast<int32_t>(pages_per_seq);
  b.num_decodes = rows == 1 ? static_cast<int32_t>(seqs) : 0;
  b.query_start.push_back(0);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab) - 3);
  for (int64_t s = 0; s < seqs; ++s) {
    b.context_lens.push_back(static_cast<int32_t>(ctx));
    for (int64_t j = 0; j < pages_per_seq; ++j)
      b.block_tables.push_back(static_cast<int32_t>(s * pages_per_seq + j));
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t pos = ctx + i;
      b.token_ids.push_back(tok(rng));
      b.positions.push_back(static_cast<int32_t>(pos));
      b.slot_mapping.push_back((s * pages_per_seq + pos / page) * page + pos % page);
    }
    b.query_start.push_back(static_cast<int32_t>(b.token_ids.size()));
  }
  return b;
}

struct Limits {
  double read_gbs = 0, copy_gbs = 0, peak_tflops = 0;
};

Limits MeasureLimits(cudaStream_t s) {
  Limits l;
  const size_t bytes = size_t{4} << 30;
  void* buf = nullptr;
  uint32_t* sink = nullptr;
  Cuda(cudaMalloc(&buf, bytes), "bandwidth buffer");
  Cuda(cudaMalloc(reinterpret_cast<void**>(&sink), m3::bench::ReadSinkWords() * 4), "sink");
  m3::bench::FillUniformBf16(buf, bytes / 2, 7, 1.0f, 0.0f, s);
  const double read_ms = MedianMs(s, 3, 15, [&] { m3::bench::StreamRead(buf, bytes, sink, s); });
  l.read_gbs = bytes / read_ms / 1e6;
  const size_t half = bytes / 2;
  const double copy_ms = MedianMs(s, 3, 15, [&] {
    Cuda(cudaMemcpyAsync(static_cast<char*>(buf) + half, buf, half, cudaMemcpyDeviceToDevice, s),
         "copy");
  });
  l.copy_gbs = 2.0 * half / copy_ms / 1e6;  // read + write
  Cuda(cudaFree(buf), "free");
  Cuda(cudaFree(sink), "free");

  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate");
  cublasSetStream(h, s);
  for (const int64_t n : {int64_t{8192}, int64_t{16384}}) {
    void *a = nullptr, *b = nullptr, *c = nullptr;
    Cuda(cudaMalloc(&a, n * n * 2), "gemm A");
    Cuda(cudaMalloc(&b, n * n * 2), "gemm B");
    Cuda(cudaMalloc(&c, n * n * 2), "gemm C");
    m3::bench::FillUniformBf16(a, n * n, 8, 1.0f, 0.0f, s);
    m3::bench::FillUniformBf16(b, n * n, 9, 1.0f, 0.0f, s);
    const float alpha = 1.0f, beta = 0.0f;
    const int ni = static_cast<int>(n);
    const double ms = MedianMs(s, 3, 10, [&] {
      if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, ni, ni, ni, &alpha, a, CUDA_R_16BF, ni, b,
                       CUDA_R_16BF, ni, &beta, c, CUDA_R_16BF, ni, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error("cublasGemmEx");
    });
    const double tf = 2.0 * n * n * n / ms / 1e9;
    std::printf("  bf16 GEMM %lld^3 (cuBLAS, f32 accumulation): %.3f ms, %.1f TFLOP/s\n",
                static_cast<long long>(n), ms, tf);
    l.peak_tflops = std::max(l.peak_tflops, tf);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }
  cublasDestroy(h);
  return l;
}

void PrintBreakdown(TimedBackend& tb, double step_ms) {
  std::vector<std::pair<double, std::string>> rows;
  double total = 0;
  for (auto& [name, v] : tb.op_ms) {
    const double m = Median(v);
    rows.push_back({m, name});
    total += m;
  }
  std::sort(rows.rbegin(), rows.rend());
  std::printf(
      "    per-op (median ms per step, events around each op; sum %.3f ms, untimed "
      "step %.3f ms):\n",
      total, step_ms);
  for (auto& [m, name] : rows)
    std::printf("      %-34s %8.3f ms  %5.1f%%\n", name.c_str(), m, 100.0 * m / total);
  tb.op_ms.clear();
}

std::string Json(const std::map<std::string, double>& kv) {
  std::string s = "{";
  for (auto& [k, v] : kv) {
    if (s.size() > 1) s += ", ";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    s += "\"" + k + "\": " + buf;
  }
  return s + "}";
}

int Run(const Options& o) {
  std::unique_ptr<Device> cuda = be::MakeCudaDevice("cuda");
  std::unique_ptr<be::M3Ops> cuda_ops = be::MakeM3Ops(*cuda);
  cudaStream_t stream = static_cast<cudaStream_t>(be::CudaDeviceStream(*cuda));
  cudaDeviceProp prop{};
  Cuda(cudaGetDeviceProperties(&prop, 0), "device properties");
  std::printf("device: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount,
              prop.totalGlobalMem / double(1 << 30));
  std::map<std::string, double> out;

  std::printf("limits of this GPU, measured now:\n");
  const Limits lim = MeasureLimits(stream);
  std::printf(
      "  HBM streaming read of 4 GiB: %.0f GB/s; device copy of 2 GiB: %.0f GB/s "
      "(read + write)\n  bf16 GEMM peak: %.1f TFLOP/s\n",
      lim.read_gbs, lim.copy_gbs, lim.peak_tflops);
  out["read_gbs"] = lim.read_gbs;
  out["copy_gbs"] = lim.copy_gbs;
  out["peak_tflops"] = lim.peak_tflops;

  const m3::engine::minimax_m3::ModelConfig config = LayerConfig();
  const m3::engine::minimax_m3::TextConfig& t = config.text;
  TimedBackend tb(*cuda, *cuda_ops, stream);
  Maker mk(*cuda, stream);
  const auto weights = MakeWeights(config, mk);
  const auto& L = weights.layers[0];
  tb.Label(L.qkv_proj, "qkv_proj (+ index q/k)");
  tb.Label(L.o_proj, "o_proj");
  tb.Label(L.router, "router");
  tb.Label(L.shared_gate_up, "shared gate_up");
  tb.Label(L.shared_down, "shared down");
  tb.Label(L.input_norm, "input norm");
  tb.Label(L.post_attention_norm, "post-attention norm");
  tb.Label(weights.final_norm, "final norm");
  tb.Label(weights.lm_head, "LM head (--graphs only)");
  const int64_t page = t.index_block_size;
  int64_t max_b = 0;
  for (int64_t b : o.batches) max_b = std::max(max_b, b);
  m3::engine::minimax_m3::DecoderStepLimits limits;
  limits.max_num_seqs = std::max<int64_t>(max_b, 1);
  limits.max_batched_tokens = std::max(o.prefill, max_b);
  limits.graphs = o.graphs;
  m3::engine::minimax_m3::M3DecoderGraph graph(config, weights, tb, tb, limits);
  const int64_t pages = std::max(o.context > 0 ? max_b * (o.context / page) : 0, o.prefill / page);
  graph.AllocateKvCache(std::max<int64_t>(pages, 1), page);
  // With graphs, replayed steps bypass the backend's ops: the routed experts (roofline) and the
  // per-op breakdown come from an op-by-op twin with the same weights and KV contents.
  std::unique_ptr<m3::engine::minimax_m3::M3DecoderGraph> eager_twin;
  if (o.graphs) {
    m3::engine::minimax_m3::DecoderStepLimits eager = limits;
    eager.graphs = false;
    eager_twin =
        std::make_unique<m3::engine::minimax_m3::M3DecoderGraph>(config, weights, tb, tb, eager);
    eager_twin->AllocateKvCache(std::max<int64_t>(pages, 1), page);
  }
  m3::engine::minimax_m3::M3DecoderGraph& eager_graph = o.graphs ? *eager_twin : graph;
  auto fill_kv = [&](uint64_t seed) {
    for (auto* g : {&graph, eager_twin.get()}) {
      if (g == nullptr) continue;
      const be::LayerKvCache& kv = g->kv_cache(0);
      mk.FillSeeded(kv.k, seed, 1.7f);
      mk.FillSeeded(kv.v, seed + 1, 1.7f);
      mk.FillSeeded(kv.index_k, seed + 2, 1.7f);
    }
  };
  std::printf(
      "layer: hidden %lld, %lld q / %lld KV heads of %lld, rotary %lld, index %lld x "
      "%lld, MSA block %lld top-%lld (%lld local), %lld experts of %lld top-%lld + "
      "shared %lld; %.2f GiB on the GPU (weights + %lld KV pages)\n",
      (long long)t.hidden_size, (long long)t.num_attention_heads, (long long)t.num_key_value_heads,
      (long long)t.head_dim, (long long)t.rotary_dim, (long long)t.index_n_heads,
      (long long)t.index_head_dim, (long long)t.index_block_size, (long long)t.index_topk_blocks,
      (long long)t.index_local_blocks, (long long)t.num_local_experts,
      (long long)t.intermediate_size, (long long)t.num_experts_per_tok,
      (long long)t.shared_intermediate_size, cuda->allocated_bytes() / double(1 << 30),
      (long long)pages);

  const double H = t.hidden_size, D = t.head_dim, Hq = t.num_attention_heads;
  const double Hkv = t.num_key_value_heads, Di = t.index_head_dim;
  const double expert_params = 3.0 * H * t.intermediate_size;
  const double dense_params = double(L.qkv_proj.numel()) + double(L.o_proj.numel()) +
                              double(L.router.numel()) + double(L.shared_gate_up.numel()) +
                              double(L.shared_down.numel());
  std::mt19937 rng(5);
  std::vector<float> no_logits;  // filled only where a batch asks for logits

  auto step = [&](const ForwardBatch& batch) {
    graph.Execute(batch, no_logits, m3::engine::CaptureRequest{});
  };
  auto eager_step = [&](const ForwardBatch& batch) {
    eager_graph.Execute(batch, no_logits, m3::engine::CaptureRequest{});
  };
  auto breakdown = [&](const ForwardBatch& batch, int iters, double step_ms) {
    tb.timing = true;
    for (int i = 0; i < iters; ++i) {
      tb.BeginTiming();
      eager_step(batch);
      tb.EndTiming();
    }
    tb.timing = false;
    PrintBreakdown(tb, step_ms);
  };
  auto distinct_experts = [&](const ForwardBatch& batch) {
    tb.probing = true;
    eager_step(batch);
    tb.probing = false;
    return static_cast<double>(std::set<int32_t>(tb.last_ids.begin(), tb.last_ids.end()).size());
  };

  if (o.context > 0) {
    std::printf("decode, %lld-token context (KV pages random), median of %d steps after %d%s:\n",
                (long long)o.context, o.decode_iters, o.warmup,
                o.graphs ? ", steps replayed as CUDA graphs" : ", ops launched one by one");
    for (int64_t B : o.batches) {
      // Fresh random contexts per size: K, V and index keys of unit RMS like the normed ones.
      fill_kv(100 + 3 * static_cast<uint64_t>(B));
      ForwardBatch batch = MakeBatch(B, 1, o.context - 1, page, t.vocab_size, rng);
      // The graph replays only decode steps that want every row's logits: with --graphs the
      // step also runs the (1024-token, 12.6 MB) LM head and downloads the logits, which the
      // roofline does not count.
      if (o.graphs)
        for (int64_t r = 0; r < B; ++r) batch.logits_rows.push_back(static_cast<int32_t>(r));
      const double ms = MedianMs(stream, o.warmup, o.decode_iters, [&] { step(batch); });
      const double experts = distinct_experts(batch);
      const double blocks = std::min<double>(t.index_topk_blocks, double(o.context) / page);
      const double kv_bytes = B * Hkv * blocks * page * D * 2 * 2;
      const double index_bytes = B * double(o.context) * Di * 2;
      const double weight_bytes = 2 * (dense_params + experts * expert_params);
      const double bytes = weight_bytes + kv_bytes + index_bytes;
      const double roof_ms = bytes / (lim.read_gbs * 1e6);
      std::printf(
          "  batch %3lld: %.3f ms/step (%.1f us/token); bytes %.1f MB (weights %.1f MB "
          "with %g distinct experts, selected KV %.1f MB, index keys %.1f MB) -> "
          "roofline %.3f ms: %.1f%% of roofline\n",
          (long long)B, ms, 1000.0 * ms / B, bytes / 1e6, weight_bytes / 1e6, experts,
          kv_bytes / 1e6, index_bytes / 1e6, roof_ms, 100.0 * roof_ms / ms);
      if (o.graphs) {
        // What the replayed step reads besides the layer: the LM head's weights.
        const double head_bytes = 2.0 * double(weights.lm_head.numel());
        const double step_roof_ms = (bytes + head_bytes) / (lim.read_gbs * 1e6);
        std::printf("             with the step's LM head (%.1f MB) counted: %.1f%% of roofline\n",
                    head_bytes / 1e6, 100.0 * step_roof_ms / ms);
        out["decode_b" + std::to_string(B) + "_step_roofline_ms"] = step_roof_ms;
      }
      const std::string key = "decode_b" + std::to_string(B);
      out[key + "_ms"] = ms;
      out[key + "_roofline_ms"] = roof_ms;
      out[key + "_bytes"] = bytes;
      out[key + "_experts"] = experts;
      if (o.breakdown) breakdown(batch, std::max(3, o.decode_iters / 2), ms);
    }
  }

  if (o.prefill > 0) {
    const int64_t P = o.prefill;
    std::printf("prefill of one %lld-token prompt, median of %d after %d:\n", (long long)P,
                o.prefill_iters, std::min(o.warmup, 2));
    const ForwardBatch batch = MakeBatch(1, P, 0, page, t.vocab_size, rng);
    const double ms =
        MedianMs(stream, std::min(o.warmup, 2), o.prefill_iters, [&] { step(batch); });
    // Useful FLOPs: GEMMs of the dense weights and of each row's top-k experts, the indexer
    // over each row's causal keys, attention over the keys of its selected blocks (all visible
    // keys while at most top-k blocks are visible; then top-k - 1 full blocks and its own).
    double flops = 2.0 * P * (dense_params + t.num_experts_per_tok * expert_params);
    double idx_keys = 0, att_keys = 0;
    for (int64_t i = 0; i < P; ++i) {
      const double visible = double(i + 1);
      idx_keys += visible;
      att_keys += (i / page + 1 <= t.index_topk_blocks)
                      ? visible
                      : double((t.index_topk_blocks - 1) * page + i % page + 1);
    }
    flops += 2.0 * t.index_n_heads * Di * idx_keys + 4.0 * Hq * D * att_keys;
    const double tflops = flops / ms / 1e9;
    std::printf(
        "  %.2f ms; %.2f TFLOP useful -> %.1f TFLOP/s = %.1f%% of the measured bf16 peak "
        "(%.1f)\n",
        ms, flops / 1e12, tflops, 100.0 * tflops / lim.peak_tflops, lim.peak_tflops);
    out["prefill_ms"] = ms;
    out["prefill_tokens"] = double(P);
    out["prefill_tflop"] = flops / 1e12;
    out["prefill_tflops"] = tflops;
    if (o.breakdown) breakdown(batch, std::max(2, o.prefill_iters / 2), ms);
  }

  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << Json(out) << "\n";
    if (!f) throw std::runtime_error("cannot write " + o.json);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // figures appear as they are measured
  const Options o = ParseArgs(argc, argv);
  try {
    return Run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "m3-bench-cuda-layer: %s\n", e.what());
    return 1;
  }
}
