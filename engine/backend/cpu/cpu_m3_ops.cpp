// CpuM3Ops: each op checks the shapes it relies on (an inconsistency is a bug: kInternal) and
// forwards raw pointers to its kernels/cpu twin. Tensors are the CPU device's host buffers;
// expert stacks stored K-major (cpu_device.h) take the small-M grouped-expert kernels.
#include "engine/backend/cpu/cpu_m3_ops.h"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/backend/cpu/host_buffer.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/kv_cache_fp8.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_experts.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/msa_index_fp8.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/paged_msa_indexer.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/qk_norm_rope.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/segment_attention.h"
#include "kernels/cpu/swiglu.h"

namespace m3::engine::backend {
namespace {

namespace k = m3::kernels::cpu;

void Check(bool ok, const char* what) {
  Require(ok, ErrorCode::kInternal, std::string("cpu backend: ") + what);
}

// The CPU device dequantizes block-scaled weights at upload (Device::UploadQuantizedLinear).
const DeviceTensor& Dense(const LinearWeight& w, const char* op) {
  Check(!w.quantized(), op);
  return w.w;
}

// The FP8 KV cache's codes and scales (LayerKvCache::fp8_kv).
k::Fp8KvPages Fp8Kv(const LayerKvCache& c) {
  Check(c.k.dtype == DType::kF8E4M3 && c.v.dtype == DType::kF8E4M3 &&
            c.k_scales.dtype == DType::kF32 && c.v_scales.dtype == DType::kF32,
        "FP8 KV cache dtypes");
  return {c.k.data<uint8_t>(), c.k_scales.data<float>(), c.v.data<uint8_t>(),
          c.v_scales.data<float>()};
}

k::PagedLayout Layout(const StepMetadata& m) {
  return {m.seqs,
          m.query_start.data<int32_t>(),
          m.context_lens.data<int32_t>(),
          m.block_tables.data<int32_t>(),
          m.max_pages_per_seq,
          m.page_size};
}

class CpuM3Ops final : public M3Ops {
 public:
  void Embedding(const DeviceTensor& table, const DeviceTensor& ids,
                 const DeviceTensor& out) override {
    const int64_t H = table.dim(1), n = ids.numel();
    Check(out.rows() == n && out.row_elems() == H, "Embedding shapes");
    const int32_t* id = ids.data<int32_t>();
    const float* t = table.data<float>();
    float* o = out.data<float>();
    k::ParallelFor(n, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) std::copy_n(t + int64_t{id[i]} * H, H, o + i * H);
    });
  }
  void CopyRows(const DeviceTensor& src, int64_t src_row, const DeviceTensor& dst, int64_t dst_row,
                int64_t count) override {
    const int64_t w = src.row_elems();
    Check(w == dst.row_elems() && src_row + count <= src.rows() && dst_row + count <= dst.rows(),
          "CopyRows shapes");
    std::copy_n(src.data<float>() + src_row * w, count * w, dst.data<float>() + dst_row * w);
  }
  void GatherRows(const DeviceTensor& src, const DeviceTensor& index,
                  const DeviceTensor& out) override {
    const int64_t w = src.row_elems(), n = index.numel();
    Check(out.rows() == n && out.row_elems() == w, "GatherRows shapes");
    const int32_t* idx = index.data<int32_t>();
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(src.data<float>() + int64_t{idx[i]} * w, w, out.data<float>() + i * w);
  }
  void AddRmsNorm(const DeviceTensor& residual, const DeviceTensor* delta,
                  const DeviceTensor& weight, float eps, const DeviceTensor& out) override {
    const int64_t dim = weight.numel(), rows = residual.numel() / dim;
    Check(out.numel() == residual.numel() && (!delta || delta->numel() == residual.numel()),
          "AddRmsNorm shapes");
    k::AddRmsNormGemma(residual.data<float>(), delta ? delta->data<float>() : nullptr, rows, dim,
                       weight.data<float>(), eps, out.data<float>());
  }
  void LayerNorm(const DeviceTensor& x, const DeviceTensor& weight, const DeviceTensor& bias,
                 float eps, const DeviceTensor& out) override {
    const int64_t dim = weight.numel(), rows = x.numel() / dim;
    Check(out.numel() == x.numel(), "LayerNorm shapes");
    k::ParallelFor(rows, 8, [&](int64_t b, int64_t e) {
      k::LayerNorm(x.data<float>() + b * dim, e - b, dim, weight.data<float>(), bias.data<float>(),
                   eps, out.data<float>() + b * dim);
    });
  }
  void Add(const DeviceTensor& x, const DeviceTensor& delta) override {
    Check(x.numel() == delta.numel(), "Add shapes");
    float* a = x.data<float>();
    const float* d = delta.data<float>();
    k::ParallelFor(x.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) a[i] += d[i];
    });
  }
  void Gelu(const DeviceTensor& x) override {
    float* a = x.data<float>();
    k::ParallelFor(x.numel(), 1 << 14, [&](int64_t b, int64_t e) { k::GeluErf(a + b, e - b); });
  }

  void Linear(const DeviceTensor& x, const LinearWeight& lw, const DeviceTensor* bias,
              const DeviceTensor& y) override {
    const DeviceTensor& w = Dense(lw, "Linear");
    const int64_t K = w.dim(w.shape.size() - 1), N = w.numel() / K, M = x.numel() / K;
    Check(x.numel() == M * K && y.numel() == M * N && (!bias || bias->numel() == N),
          "Linear shapes");
    k::Linear(x.data<float>(), M, K, w.data<float>(), N, bias ? bias->data<float>() : nullptr,
              y.data<float>());
  }

  void QkNormRopeToCache(const DeviceTensor& qkv, const QkvLayout& l, const QkNormWeights& w,
                         const StepMetadata& m, const DeviceTensor& q_out,
                         const DeviceTensor* index_q_out, const LayerKvCache& cache) override {
    Check(qkv.numel() == m.rows * l.width(), "QkNormRopeToCache: qkv width");
    Check(m.rope_cos.numel() == m.rows * l.rotary_dim, "QkNormRopeToCache: rotary rows");
    const bool idx = l.index_heads > 0;
    Check(!idx || (index_q_out && (cache.index_k || cache.fp8_index())),
          "QkNormRopeToCache: index outputs");
    k::QkNormRopeDims d{l.q_heads,     l.kv_heads,       l.head_dim,         l.rotary_dim,
                        l.index_heads, l.index_head_dim, l.index_rotary_dim, l.eps};
    k::QkNormWeightsPtr p{w.q_norm.data<float>(), w.k_norm.data<float>(),
                          idx ? w.index_q_norm.data<float>() : nullptr,
                          idx ? w.index_k_norm.data<float>() : nullptr};
    // FP8 index keys / KV: the step's keys (and values) to dense buffers, then quantized into
    // their slots.
    const bool fp8 = idx && cache.fp8_index();
    d.index_k_by_row = fp8;
    if (fp8) index_staging_.resize(static_cast<size_t>(m.rows * l.index_head_dim));
    float* index_k = !idx ? nullptr : fp8 ? index_staging_.data() : cache.index_k.data<float>();
    const bool fp8_kv = cache.fp8_kv();
    const int64_t kv_width = l.kv_heads * l.head_dim;
    d.kv_by_row = fp8_kv;
    if (fp8_kv) {
      Check(cache.k.dtype == DType::kF8E4M3 && cache.v.dtype == DType::kF8E4M3 &&
                cache.k_scales.numel() * l.head_dim == cache.k.numel() &&
                cache.v_scales.numel() * l.head_dim == cache.v.numel(),
            "QkNormRopeToCache: FP8 KV cache shapes");
      k_staging_.resize(static_cast<size_t>(m.rows * kv_width));
      v_staging_.resize(static_cast<size_t>(m.rows * kv_width));
    }
    k::QkNormRopeToPages(qkv.data<float>(), m.rows, d, p, m.rope_cos.data<float>(),
                         m.rope_sin.data<float>(), m.slot_mapping.data<int64_t>(),
                         q_out.data<float>(), idx ? index_q_out->data<float>() : nullptr,
                         fp8_kv ? k_staging_.data() : cache.k.data<float>(),
                         fp8_kv ? v_staging_.data() : cache.v.data<float>(), index_k);
    if (fp8)
      k::QuantizeIndexKeyRowsFp8(index_staging_.data(), m.rows, l.index_head_dim,
                                 m.slot_mapping.data<int64_t>(), cache.index_codes.data<uint8_t>(),
                                 cache.index_scales.data<float>());
    if (fp8_kv) {
      const int64_t* slots = m.slot_mapping.data<int64_t>();
      k::QuantizeKvRowsFp8(k_staging_.data(), m.rows, l.kv_heads, l.head_dim, slots,
                           cache.k.data<uint8_t>(), cache.k_scales.data<float>());
      k::QuantizeKvRowsFp8(v_staging_.data(), m.rows, l.kv_heads, l.head_dim, slots,
                           cache.v.data<uint8_t>(), cache.v_scales.data<float>());
    }
  }
  void PagedAttention(const DeviceTensor& q, const LayerKvCache& cache, const StepMetadata& m,
                      const AttentionShape& s, const DeviceTensor& out) override {
    k::AttentionDims dims{s.q_heads, s.kv_heads, s.head_dim, s.scale};
    if (cache.fp8_kv())
      k::PagedAttention(q.data<float>(), Fp8Kv(cache), Layout(m), dims, out.data<float>());
    else
      k::PagedAttention(q.data<float>(), cache.k.data<float>(), cache.v.data<float>(), Layout(m),
                        dims, out.data<float>());
  }
  void MsaSelectBlocks(const DeviceTensor& index_q, const LayerKvCache& cache,
                       const StepMetadata& m, const MsaParams& p,
                       const DeviceTensor& selected) override {
    Check(selected.numel() == p.index_heads * m.rows * p.topk_blocks, "MsaSelectBlocks shape");
    k::IndexerParams ip{p.index_heads, p.index_head_dim, p.block_size, p.topk_blocks,
                        p.local_blocks};
    if (cache.fp8_index())
      k::PagedIndexerSelectBlocksFp8(index_q.data<float>(), cache.index_codes.data<uint8_t>(),
                                     cache.index_scales.data<float>(), cache.index_scales.numel(),
                                     Layout(m), ip, selected.data<int32_t>());
    else
      k::PagedIndexerSelectBlocks(index_q.data<float>(), cache.index_k.data<float>(), Layout(m), ip,
                                  selected.data<int32_t>());
  }
  void BlockSparseAttention(const DeviceTensor& q, const LayerKvCache& cache, const StepMetadata& m,
                            const AttentionShape& s, const DeviceTensor& selected, int64_t topk,
                            int64_t block_size, const DeviceTensor& out) override {
    k::AttentionDims dims{s.q_heads, s.kv_heads, s.head_dim, s.scale};
    if (cache.fp8_kv())
      k::PagedBlockSparseAttention(q.data<float>(), Fp8Kv(cache), Layout(m), dims,
                                   selected.data<int32_t>(), topk, block_size, out.data<float>());
    else
      k::PagedBlockSparseAttention(q.data<float>(), cache.k.data<float>(), cache.v.data<float>(),
                                   Layout(m), dims, selected.data<int32_t>(), topk, block_size,
                                   out.data<float>());
  }

  void SwigluOai(const DeviceTensor& gate_up, const SwigluParams& p,
                 const DeviceTensor& out) override {
    const int64_t I = out.row_elems(), rows = out.rows();
    Check(gate_up.numel() == rows * 2 * I, "SwigluOai shapes");
    const float* g = gate_up.data<float>();
    float* o = out.data<float>();
    k::ParallelFor(rows, 8, [&](int64_t b, int64_t e) {
      k::SwigluOai(g + b * 2 * I, g + b * 2 * I + I, e - b, I, 2 * I, p.alpha, p.limit, o + b * I);
    });
  }
  void MoeRoute(const DeviceTensor& logits, const DeviceTensor& bias, const DeviceTensor& ids,
                const DeviceTensor& weights, const ExpertRange& local) override {
    const int64_t rows = logits.rows(), E = logits.row_elems(), K = ids.row_elems();
    Check(ids.rows() == rows && weights.numel() == rows * K, "MoeRoute shapes");
    std::vector<int64_t> wide(rows * K);
    k::ParallelFor(rows, 16, [&](int64_t b, int64_t e) {
      k::MoeRouteSigmoid(logits.data<float>() + b * E, e - b, E,
                         bias ? bias.data<float>() : nullptr, K, wide.data() + b * K,
                         weights.data<float>() + b * K, local.first, local.count);
    });
    int32_t* out = ids.data<int32_t>();
    for (int64_t i = 0; i < rows * K; ++i) out[i] = static_cast<int32_t>(wide[i]);
  }
  void MoeExperts(const DeviceTensor& x, const DeviceTensor& ids, const DeviceTensor& weights,
                  const LinearWeight& gate_up_w, const LinearWeight& down_w, const SwigluParams& p,
                  float scale, const DeviceTensor& out) override {
    const DeviceTensor& gate_up = Dense(gate_up_w, "MoeExperts");
    const DeviceTensor& down = Dense(down_w, "MoeExperts");
    k::MoeExpertsDims d;
    d.experts = gate_up.dim(0);
    d.inter = gate_up.dim(1) / 2;
    d.hidden = gate_up.dim(2);
    d.topk = ids.row_elems();
    d.alpha = p.alpha;
    d.limit = p.limit;
    d.scale = scale;
    Check(down.numel() == d.experts * d.hidden * d.inter && out.numel() == x.numel(),
          "MoeExperts shapes");
    const bool k_major = IsKMajorExperts(gate_up);
    Check(k_major == IsKMajorExperts(down), "MoeExperts: gate_up and down layouts differ");
    if (k_major) {
      k::MoeGroupedExpertsKMajor(x.data<float>(), x.rows(), ids.data<int32_t>(),
                                 weights.data<float>(), gate_up.data<float>(), down.data<float>(),
                                 d, out.data<float>());
    } else {
      k::MoeGroupedExperts(x.data<float>(), x.rows(), ids.data<int32_t>(), weights.data<float>(),
                           gate_up.data<float>(), down.data<float>(), d, out.data<float>());
    }
  }

  void SegmentAttention(const DeviceTensor& qkv, const DeviceTensor& cos, const DeviceTensor& sin,
                        int64_t rot, std::span<const int64_t> segments, int64_t heads,
                        int64_t head_dim, const DeviceTensor& out) override {
    const int64_t rows = qkv.rows();
    Check(qkv.numel() == rows * 3 * heads * head_dim && out.numel() == rows * heads * head_dim,
          "SegmentAttention shapes");
    Check(!segments.empty() && segments.front() == 0 && segments.back() == rows,
          "SegmentAttention segments must cover the rows");
    k::SegmentAttention(qkv.data<float>(), rows, heads, head_dim, cos.data<float>(),
                        sin.data<float>(), rot, segments.data(),
                        static_cast<int64_t>(segments.size()) - 1, out.data<float>());
  }

 private:
  std::vector<float> index_staging_;          // a step's index keys before FP8 quantization
  std::vector<float> k_staging_, v_staging_;  // its K and V before FP8 KV quantization
};

}  // namespace

std::unique_ptr<M3Ops> MakeCpuM3Ops(CpuDevice& /*device*/) {
  return std::make_unique<CpuM3Ops>();
}

}  // namespace m3::engine::backend
