// m3-bench-cuda-msa: MSA (lightning indexer + block-sparse attention) against this engine's
// dense paged attention at 8K, 32K and 128K context, decode at batch 1 and 32 and a whole-prompt
// prefill, at the real shapes (64 query / 4 KV heads of 128, index 4 heads x 128, block 128,
// top-16, 1 local block, pages of 128). Index keys in bf16 and in FP8 (e4m3 + per-key scale).
// Medians of CUDA-event timings after warm-up, fresh random data (made on the device) for each
// size; decode per call from a CUDA graph of 20 calls (as decode steps run), and eager, the calls
// rotating through enough data sets that none finds its data in L2 (a decode step's other layers
// evict it; --warm-l2: every call re-reads the same data). Prints a table and writes JSON
// (--json) that tests/bench/torch/msa_dense_bench.py reads to set the PyTorch SDPA (flash)
// timings of the same sizes beside these.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/msa_index_fp8.cuh"
#include "kernels/cuda/msa_index_scores.cuh"
#include "kernels/cuda/msa_index_topk.cuh"
#include "kernels/cuda/paged_attention.cuh"
#include "kernels/cuda/paged_msa_attention.cuh"
#include "kernels/cuda/paged_msa_indexer.cuh"

namespace {

namespace kc = m3::kernels::cuda;
using kc::bf16;

constexpr int64_t kQHeads = 64, kKvHeads = 4, kDim = 128, kIdxHeads = 4, kIdxDim = 128;
constexpr int64_t kBlock = 128, kTopK = 16, kPage = 128;

void Ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Uniform in [-scale, scale) from a counter hash of (seed, i): device-made, so 8 GB of KV
// pages never pass through the host.
__global__ void FillKernel(bf16* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    const float u = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    p[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

struct Buf {
  void* p = nullptr;
  explicit Buf(size_t bytes) { Ok(cudaMalloc(&p, std::max<size_t>(bytes, 16)), "cudaMalloc"); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf() { cudaFree(p); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

void Fill(const Buf& b, size_t n, uint64_t seed, float scale) {
  FillKernel<<<1024, 256>>>(b.as<bf16>(), n, seed, scale);
  Ok(cudaGetLastError(), "fill");
}

// The decode-rows hint of layouts that have it (rows [0, num_decodes) are decodes).
template <typename L>
auto SetDecodes(L& l, int64_t n, int) -> decltype(l.num_decodes = n, void()) {
  l.num_decodes = n;
}
template <typename L>
void SetDecodes(L&, int64_t, long) {}

struct Timing {
  double median_ms = 0;
  int reps = 0;
};

// Median of per-call CUDA-event times on stream st after warm-up; a first run above one second
// is the only run (the slow dense prefills at 128K). f(i) makes the i-th call.
template <typename F>
Timing Eager(F&& f, cudaStream_t st, int warmup, int reps) {
  cudaEvent_t a, b;
  Ok(cudaEventCreate(&a), "event");
  Ok(cudaEventCreate(&b), "event");
  std::vector<float> ms;
  int call = 0;
  auto once = [&] {
    Ok(cudaEventRecord(a, st), "record");
    f(call++);
    Ok(cudaEventRecord(b, st), "record");
    Ok(cudaEventSynchronize(b), "sync");
    float t = 0;
    Ok(cudaEventElapsedTime(&t, a, b), "elapsed");
    return t;
  };
  const float first = once();
  if (first > 1000.0f) {
    ms.push_back(first);
  } else {
    for (int i = 1; i < warmup; ++i) once();
    for (int i = 0; i < reps; ++i) ms.push_back(once());
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], static_cast<int>(ms.size())};
}

// Per call: f(0) .. f(calls - 1) captured into one CUDA graph and replayed (median of the
// replays): GPU time without launch cost, as decode steps run under graphs.
template <typename F>
Timing Graph(F&& f, cudaStream_t st, int runs = 9, int calls = 20) {
  f(0);
  f(1);
  Ok(cudaStreamSynchronize(st), "warm-up");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  Ok(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < calls; ++i) f(i);
  Ok(cudaStreamEndCapture(st, &graph), "capture end");
  Ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  Timing t = Eager([&](int) { Ok(cudaGraphLaunch(exec, st), "graph launch"); }, st, 2, runs);
  t.median_ms /= calls;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return t;
}

struct Result {
  std::string kind;  // decode | prefill
  int64_t ctx = 0, batch = 0;
  // Decode: per call from CUDA graphs (eager_*: launched one by one); prefill: eager.
  Timing scan_bf16, scan_fp8, topk, idx_bf16, idx_fp8, sparse, dense;
  // Decode: MSA as the engine runs it (PagedMsaAttention: at small batch the scan, then the
  // attention selecting its blocks itself) in one graph, and beside it the unfused chain (scan,
  // top-k kernel, attention) and the selecting attention alone (0 where it does not apply).
  Timing msa_bf16, msa_fp8, msa_bf16_unfused, selecting_attention;
  // Decode: MSA in a step's order, after the small chained kernel that writes the step's index
  // key (the FP8 quantize-on-write of each row's key), which the scan's copies of earlier keys
  // overlap, as they overlap the key write in a decode step (and not the previous attention as
  // in msa_*); the times include the write. key_write: the write alone.
  Timing step_msa_bf16, step_msa_fp8, key_write;
  Timing eager_idx_bf16, eager_sparse, eager_dense;
  int64_t fp8_sel_differ = 0, sel_pairs = 0;
  int data_sets = 1;  // rotated call by call (DataSets)
  double idx_bytes_bf16 = 0, idx_bytes_fp8 = 0, dense_bytes = 0, sparse_bytes = 0;
  double score_flop = 0;
};

// How many data sets a decode case rotates through, call by call, so that what a call reads was
// evicted from L2 by the calls between (as in a decode step, where the rest of the model streams
// through L2 between two visits of a layer's caches): 1 where one call reads more than twice
// the L2, else enough sets that the calls between read twice the L2. warm_l2: 1 (the data of
// the previous call, the same, partly in L2).
int DataSets(double bytes_per_call, bool warm_l2) {
  int dev = 0, l2_int = 0;
  Ok(cudaGetDevice(&dev), "device");
  Ok(cudaDeviceGetAttribute(&l2_int, cudaDevAttrL2CacheSize, dev), "L2 size");
  const double l2 = l2_int;
  if (warm_l2 || bytes_per_call >= 2.0 * l2) return 1;
  return static_cast<int>(std::min(32.0, 1.0 + std::ceil(2.0 * l2 / bytes_per_call)));
}

Result Run(bool prefill, int64_t ctx, int64_t batch, uint64_t seed, bool dense_prefill,
           bool warm_l2) {
  Result res;
  res.kind = prefill ? "prefill" : "decode";
  res.ctx = ctx;
  res.batch = batch;
  // Bytes a decode step must read per sequence: all index keys, the selected K/V (4 groups x
  // 16 blocks x 128 keys x K and V), or the whole K/V for dense.
  const double sel_keys = static_cast<double>(std::min<int64_t>(ctx, kTopK * kBlock));
  res.idx_bytes_bf16 = static_cast<double>(batch) * ctx * kIdxDim * 2;
  res.idx_bytes_fp8 = static_cast<double>(batch) * ctx * (kIdxDim + 4);
  res.sparse_bytes = static_cast<double>(batch) * sel_keys * kKvHeads * kDim * 2 * 2;
  res.dense_bytes = static_cast<double>(batch) * ctx * kKvHeads * kDim * 2 * 2;
  // Useful scoring FLOP of a prefill: every (row, head) against its visible keys.
  res.score_flop = 2.0 * kIdxDim * kIdxHeads * batch * (static_cast<double>(ctx) * (ctx + 1) / 2);
  // The smallest call's bytes (FP8 MSA) size the rotation: every kind of call is then cold.
  const int sets = prefill ? 1 : DataSets(res.idx_bytes_fp8 + res.sparse_bytes, warm_l2);
  res.data_sets = sets;
  const int64_t seqs = batch, rows = prefill ? ctx * batch : batch;
  const int64_t pages_per_seq = (ctx + kPage - 1) / kPage, pages = pages_per_seq * seqs;
  const int64_t slots = pages * kPage * sets;

  // Layout: each decode row at position ctx - 1 (ctx keys), a prefill's rows 0..ctx-1; pages
  // shuffled over the pool as a long-running cache leaves them, set i's over its own pages.
  std::vector<int32_t> qs(seqs + 1), cl(seqs), bt(sets * seqs * pages_per_seq);
  for (int64_t s = 0; s <= seqs; ++s) qs[s] = static_cast<int32_t>(prefill ? s * ctx : s);
  for (int64_t s = 0; s < seqs; ++s) cl[s] = static_cast<int32_t>(prefill ? 0 : ctx - 1);
  std::iota(bt.begin(), bt.end(), 0);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (int i = 0; i < sets; ++i)
    std::shuffle(bt.begin() + i * pages, bt.begin() + (i + 1) * pages, rng);
  Buf dqs(qs.size() * 4), dcl(cl.size() * 4), dbt(bt.size() * 4);
  Ok(cudaMemcpy(dqs.p, qs.data(), qs.size() * 4, cudaMemcpyHostToDevice), "copy");
  Ok(cudaMemcpy(dcl.p, cl.data(), cl.size() * 4, cudaMemcpyHostToDevice), "copy");
  Ok(cudaMemcpy(dbt.p, bt.data(), bt.size() * 4, cudaMemcpyHostToDevice), "copy");
  std::vector<kc::PagedLayout> layouts;
  for (int i = 0; i < sets; ++i) {
    layouts.push_back({seqs, rows, dqs.as<int32_t>(), dcl.as<int32_t>(),
                       dbt.as<int32_t>() + i * pages, pages_per_seq, kPage});
    SetDecodes(layouts.back(), prefill ? 0 : rows, 0);
  }
  const kc::PagedLayout& layout = layouts[0];

  const size_t kv_n = static_cast<size_t>(slots * kKvHeads * kDim);
  Buf k(kv_n * 2), v(kv_n * 2), ik(slots * kIdxDim * 2), ik8(slots * kIdxDim), iks(slots * 4),
      q(rows * kQHeads * kDim * 2), iq(rows * kIdxHeads * kIdxDim * 2),
      out(rows * kQHeads * kDim * 2), sel(kIdxHeads * rows * kTopK * 4),
      sel8(kIdxHeads * rows * kTopK * 4);
  Fill(k, kv_n, seed * 8 + 1, 1.0f);
  Fill(v, kv_n, seed * 8 + 2, 1.0f);
  Fill(ik, slots * kIdxDim, seed * 8 + 3, 1.0f);
  Fill(q, rows * kQHeads * kDim, seed * 8 + 4, 1.0f);
  Fill(iq, rows * kIdxHeads * kIdxDim, seed * 8 + 5, 1.0f);
  kc::QuantizeIndexKeysFp8(ik.as<bf16>(), slots, kIdxDim, ik8.as<uint8_t>(), iks.as<float>(),
                           nullptr);
  Ok(cudaDeviceSynchronize(), "setup");

  const kc::IndexerParams ip{kIdxHeads, kIdxDim, kBlock, kTopK, 1};
  const size_t ws_bytes = kc::IndexerWorkspaceBytes(layout, ip);
  Buf ws(ws_bytes);
  const kc::IndexKeys keys16{ik.as<bf16>()}, keys8{nullptr, ik8.as<uint8_t>(), iks.as<float>()};
  const kc::AttentionDims dims{kQHeads, kKvHeads, kDim, 0.08838834764831845f};
  const int warm = prefill ? 2 : 5, reps = prefill ? 5 : 30;
  const int64_t max_blocks = (pages_per_seq * kPage + kBlock - 1) / kBlock;
  float* scores = ws.as<float>();

  cudaStream_t st;
  Ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
  // Each call below reads the data set its layout names; calls(f) makes f(layout) the i-th call
  // over set i % sets.
  using Layout = const kc::PagedLayout&;
  auto calls = [&](auto f) { return [&layouts, sets, f](int i) { f(layouts[i % sets]); }; };
  auto scan16 = [&](Layout L) {
    kc::IndexScoresDecode(iq.as<bf16>(), keys16, L, kIdxHeads, max_blocks, true, scores, st);
  };
  auto scan8 = [&](Layout L) {
    kc::IndexScoresDecode(iq.as<bf16>(), keys8, L, kIdxHeads, max_blocks, true, scores, st);
  };
  auto idx8 = [&](Layout L) {
    kc::PagedIndexerSelect(iq.as<bf16>(), keys8, L, ip, ctx, ws.p, ws_bytes, sel8.as<int32_t>(),
                           st);
  };
  auto idx16 = [&](Layout L) {
    kc::PagedIndexerSelect(iq.as<bf16>(), keys16, L, ip, ctx, ws.p, ws_bytes, sel.as<int32_t>(),
                           st);
  };
  // After a full selection, so the scores are real ones.
  auto topk = [&](Layout L) {
    kc::IndexTopK(scores, L, kIdxHeads, kBlock, max_blocks, kTopK, 1, sel.as<int32_t>(), st);
  };
  // Split-K partials in a workspace made once, as the engine's step workspace holds them (without
  // one, every call allocates from the stream's pool).
  const size_t sparse_ws = kc::PagedAttentionWorkspaceBytes(layout, dims, kTopK);
  const size_t dense_ws = kc::PagedAttentionWorkspaceBytes(layout, dims, 0);
  Buf attn_ws(std::max(sparse_ws, dense_ws));
  auto sparse = [&](Layout L) {
    kc::PagedBlockSparseAttention(q.as<bf16>(), k.as<bf16>(), v.as<bf16>(), L, dims,
                                  sel.as<int32_t>(), kTopK, kBlock, out.as<bf16>(), st,
                                  {attn_ws.p, sparse_ws});
  };
  auto msa_over = [&](Layout L, const kc::IndexKeys& keys, const Buf& selection) {
    kc::PagedMsaAttention(q.as<bf16>(), k.as<bf16>(), v.as<bf16>(), iq.as<bf16>(), keys, L, dims,
                          ip, ctx, ws.p, ws_bytes, selection.as<int32_t>(), out.as<bf16>(), st,
                          {attn_ws.p, sparse_ws});
  };
  bool selects = false;  // whether the decode attention selects for this batch
  auto selecting = [&](Layout L) {
    selects = kc::PagedMsaDecodeAttention(q.as<bf16>(), k.as<bf16>(), v.as<bf16>(), L, dims, scores,
                                          max_blocks, 1, kTopK, kBlock, sel.as<int32_t>(),
                                          out.as<bf16>(), st);
  };
  auto dense = [&](Layout L) {
    kc::PagedAttention(q.as<bf16>(), k.as<bf16>(), v.as<bf16>(), L, dims, out.as<bf16>(), st,
                       {attn_ws.p, dense_ws});
  };
  if (!prefill) {
    res.scan_bf16 = Graph(calls(scan16), st);
    res.scan_fp8 = Graph(calls(scan8), st);
    res.idx_fp8 = Graph(calls(idx8), st);
    res.idx_bf16 = Graph(calls(idx16), st);
    res.topk = Graph(calls(topk), st);
    res.sparse = Graph(calls(sparse), st);
    res.dense = Graph(calls(dense), st);
    res.msa_fp8 = Graph(calls([&](Layout L) { msa_over(L, keys8, sel8); }), st);
    res.msa_bf16_unfused = Graph(calls([&](Layout L) {
                                   idx16(L);
                                   sparse(L);
                                 }),
                                 st);
    res.msa_bf16 = Graph(calls([&](Layout L) { msa_over(L, keys16, sel); }), st);
    // Rewrites every row's last key with the codes it has (the same scan input).
    auto write_key = [&](Layout L) {
      kc::QuantizeStepIndexKeysFp8(ik.as<bf16>(), L, kIdxDim, ik8.as<uint8_t>(), iks.as<float>(),
                                   st);
    };
    res.key_write = Graph(calls(write_key), st);
    res.step_msa_bf16 = Graph(calls([&](Layout L) {
                                write_key(L);
                                msa_over(L, keys16, sel);
                              }),
                              st);
    res.step_msa_fp8 = Graph(calls([&](Layout L) {
                               write_key(L);
                               msa_over(L, keys8, sel8);
                             }),
                             st);
    selecting(layout);
    if (selects) res.selecting_attention = Graph(calls(selecting), st);
    res.eager_idx_bf16 = Eager(calls(idx16), st, warm, reps);
    res.eager_sparse = Eager(calls(sparse), st, warm, reps);
    res.eager_dense = Eager(calls(dense), st, warm, reps);
  } else {
    res.idx_fp8 = Eager(calls(idx8), st, warm, reps);
    res.idx_bf16 = Eager(calls(idx16), st, warm, reps);
    res.topk = Eager(calls(topk), st, warm, reps);
    res.sparse = Eager(calls(sparse), st, warm, reps);
    if (dense_prefill) res.dense = Eager(calls(dense), st, 1, 3);
  }
  // Both selections of the same data set, for the comparison below.
  idx16(layout);
  idx8(layout);
  Ok(cudaStreamSynchronize(st), "run");
  Ok(cudaStreamDestroy(st), "stream");

  // FP8 against bf16 selections, as sets per (head, row).
  std::vector<int32_t> a(kIdxHeads * rows * kTopK), b(a.size());
  Ok(cudaMemcpy(a.data(), sel.p, a.size() * 4, cudaMemcpyDeviceToHost), "copy");
  Ok(cudaMemcpy(b.data(), sel8.p, b.size() * 4, cudaMemcpyDeviceToHost), "copy");
  res.sel_pairs = kIdxHeads * rows;
  for (int64_t i = 0; i < res.sel_pairs; ++i) {
    std::sort(a.begin() + i * kTopK, a.begin() + (i + 1) * kTopK);
    std::sort(b.begin() + i * kTopK, b.begin() + (i + 1) * kTopK);
    res.fp8_sel_differ +=
        !std::equal(a.begin() + i * kTopK, a.begin() + (i + 1) * kTopK, b.begin() + i * kTopK);
  }
  return res;
}

std::string Json(const Result& r) {
  char buf[1536];
  std::snprintf(buf, sizeof buf,
                "{\"kind\":\"%s\",\"ctx\":%lld,\"batch\":%lld,\"scan_bf16_ms\":%.5f,"
                "\"scan_fp8_ms\":%.5f,\"topk_ms\":%.5f,\"indexer_bf16_ms\":%.5f,"
                "\"indexer_fp8_ms\":%.5f,\"sparse_attention_ms\":%.5f,\"dense_ms\":%.5f,"
                "\"dense_reps\":%d,\"fp8_selections_differ\":%lld,\"selections\":%lld,"
                "\"index_bytes_bf16\":%.0f,\"index_bytes_fp8\":%.0f,\"sparse_kv_bytes\":%.0f,"
                "\"dense_kv_bytes\":%.0f,\"score_flop\":%.0f,\"eager_indexer_bf16_ms\":%.5f,"
                "\"eager_sparse_attention_ms\":%.5f,\"eager_dense_ms\":%.5f,"
                "\"msa_bf16_ms\":%.5f,\"msa_fp8_ms\":%.5f,\"msa_bf16_unfused_ms\":%.5f,"
                "\"selecting_attention_ms\":%.5f,\"step_msa_bf16_ms\":%.5f,"
                "\"step_msa_fp8_ms\":%.5f,\"key_write_ms\":%.5f,\"data_sets\":%d}",
                r.kind.c_str(), static_cast<long long>(r.ctx), static_cast<long long>(r.batch),
                r.scan_bf16.median_ms, r.scan_fp8.median_ms, r.topk.median_ms, r.idx_bf16.median_ms,
                r.idx_fp8.median_ms, r.sparse.median_ms, r.dense.median_ms, r.dense.reps,
                static_cast<long long>(r.fp8_sel_differ), static_cast<long long>(r.sel_pairs),
                r.idx_bytes_bf16, r.idx_bytes_fp8, r.sparse_bytes, r.dense_bytes, r.score_flop,
                r.eager_idx_bf16.median_ms, r.eager_sparse.median_ms, r.eager_dense.median_ms,
                r.msa_bf16.median_ms, r.msa_fp8.median_ms, r.msa_bf16_unfused.median_ms,
                r.selecting_attention.median_ms, r.step_msa_bf16.median_ms,
                r.step_msa_fp8.median_ms, r.key_write.median_ms, r.data_sets);
  return buf;
}

// Rewritten after every size, so a run cut short by a time limit keeps what it measured.
bool WriteJson(const char* path, const char* device, const std::vector<std::string>& json) {
  FILE* f = std::fopen(path, "w");
  if (!f) return false;
  std::fprintf(f, "{\"device\":\"%s\",\"results\":[\n", device);
  for (size_t i = 0; i < json.size(); ++i)
    std::fprintf(f, "%s%s\n", json[i].c_str(), i + 1 < json.size() ? "," : "");
  std::fprintf(f, "]}\n");
  return std::fclose(f) == 0;
}

int Usage(const char* msg) {
  std::fprintf(stderr,
               "m3-bench-cuda-msa: %s\nusage: m3-bench-cuda-msa [--contexts 8192,32768,131072] "
               "[--batches 1,32] [--no-prefill] [--no-dense-prefill] [--warm-l2] [--json FILE]\n",
               msg);
  return 2;
}

std::vector<int64_t> ParseList(const char* s) {
  std::vector<int64_t> v;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (*p == ',' || *p == 0) {
      if (cur.empty() || cur.size() > 9 || cur.find_first_not_of("0123456789") != std::string::npos)
        throw std::invalid_argument(std::string("bad number list: ") + s);
      v.push_back(std::stoll(cur));
      if (v.back() <= 0) throw std::invalid_argument(std::string("bad number list: ") + s);
      cur.clear();
      if (*p == 0) break;
    } else {
      cur += *p;
    }
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> contexts{8192, 32768, 131072}, batches{1, 32};
  bool prefill = true, dense_prefill = true, warm_l2 = false;
  const char* json_path = nullptr;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--contexts" && i + 1 < argc)
        contexts = ParseList(argv[++i]);
      else if (a == "--batches" && i + 1 < argc)
        batches = ParseList(argv[++i]);
      else if (a == "--no-prefill")
        prefill = false;
      else if (a == "--no-dense-prefill")
        dense_prefill = false;
      else if (a == "--warm-l2")
        warm_l2 = true;
      else if (a == "--json" && i + 1 < argc)
        json_path = argv[++i];
      else
        return Usage(("unknown or incomplete argument " + a).c_str());
    }
  } catch (const std::exception& e) {
    return Usage(e.what());
  }
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    std::fprintf(stderr, "m3-bench-cuda-msa: no usable CUDA GPU\n");
    return 1;
  }
  std::printf("m3-bench-cuda-msa on %s (%d SMs, %d MB L2); decode %s\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20,
              warm_l2 ? "re-reads the previous call's data (partly in L2)"
                      : "rotates data sets so that no call finds its data in L2");
  std::printf("%-8s %7s %5s | %9s %9s %9s | %9s %9s %9s | %9s %10s | %s\n", "kind", "ctx", "batch",
              "scan16", "scan8", "topk", "idx16", "idx8", "sparse", "dense", "dense/msa16",
              "fp8 sel differ");
  std::vector<std::string> json;
  uint64_t seed = 1;
  try {
    for (int64_t ctx : contexts) {
      std::vector<std::pair<bool, int64_t>> runs;
      for (int64_t b : batches) runs.push_back({false, b});
      if (prefill) runs.push_back({true, 1});
      for (auto [pf, b] : runs) {
        const Result r = Run(pf, ctx, b, ++seed, dense_prefill, warm_l2);
        const double msa = pf ? r.idx_bf16.median_ms + r.sparse.median_ms : r.msa_bf16.median_ms;
        std::printf(
            "%-8s %7lld %5lld | %9.4f %9.4f %9.4f | %9.4f %9.4f %9.4f | %9.4f %10.2f | %lld/%lld"
            " (%d data sets)\n",
            r.kind.c_str(), static_cast<long long>(r.ctx), static_cast<long long>(r.batch),
            r.scan_bf16.median_ms, r.scan_fp8.median_ms, r.topk.median_ms, r.idx_bf16.median_ms,
            r.idx_fp8.median_ms, r.sparse.median_ms, r.dense.median_ms,
            r.dense.reps ? r.dense.median_ms / msa : 0.0, static_cast<long long>(r.fp8_sel_differ),
            static_cast<long long>(r.sel_pairs), r.data_sets);
        if (!pf)
          std::printf(
              "         chained in one graph: msa16 %.4f msa8 %.4f (msa16 with the top-k kernel "
              "%.4f; selecting attention alone %.4f)\n",
              r.msa_bf16.median_ms, r.msa_fp8.median_ms, r.msa_bf16_unfused.median_ms,
              r.selecting_attention.median_ms);
        if (!pf)
          std::printf(
              "         in a step's order, after the key write: msa16 %.4f msa8 %.4f (the write "
              "alone %.4f)\n",
              r.step_msa_bf16.median_ms, r.step_msa_fp8.median_ms, r.key_write.median_ms);
        if (!pf)
          std::printf("         eager (launched one by one): idx16 %.4f sparse %.4f dense %.4f\n",
                      r.eager_idx_bf16.median_ms, r.eager_sparse.median_ms,
                      r.eager_dense.median_ms);
        if (!pf && r.scan_bf16.median_ms > 0)
          std::printf("         index scan: bf16 %.0f GB/s, fp8 %.0f GB/s\n",
                      r.idx_bytes_bf16 / r.scan_bf16.median_ms * 1e-6,
                      r.idx_bytes_fp8 / r.scan_fp8.median_ms * 1e-6);
        if (pf)
          std::printf("         indexer: bf16 %.0f TFLOP/s, fp8 %.0f TFLOP/s (scores + top-k)\n",
                      r.score_flop / r.idx_bf16.median_ms * 1e-9,
                      r.score_flop / r.idx_fp8.median_ms * 1e-9);
        std::fflush(stdout);
        json.push_back(Json(r));
        if (json_path && !WriteJson(json_path, prop.name, json)) {
          std::fprintf(stderr, "m3-bench-cuda-msa: cannot write %s\n", json_path);
          return 1;
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "m3-bench-cuda-msa: %s\n", e.what());
    return 1;
  }
  return 0;
}
