// CudaM3Ops: shape and dtype checks before each kernel (kInternal: a bug), then the kernel on
// the device's stream: GEMMs on cuBLAS, the rest on kernels/cuda; op scratch from the device.
#include "engine/backend/cuda/cuda_m3_ops.h"

#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_checks.h"
#include "kernels/cuda/block_scaled_linear.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/kv_cache_fp8.cuh"
#include "kernels/cuda/layer_norm.cuh"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/moe_experts.cuh"
#include "kernels/cuda/moe_routing.cuh"
#include "kernels/cuda/msa_index_fp8.cuh"
#include "kernels/cuda/paged_attention.cuh"
#include "kernels/cuda/paged_msa_attention.cuh"
#include "kernels/cuda/paged_msa_indexer.cuh"
#include "kernels/cuda/qk_norm_rope.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/segment_attention.cuh"
#include "kernels/cuda/swiglu.cuh"

namespace m3::engine::backend {
namespace {

namespace k = m3::kernels::cuda;
using k::bf16;
using k::ElemType;
using namespace cuda_checks;

const DeviceTensor& Dense(const LinearWeight& w, const char* op) {
  Require(!w.quantized(), ErrorCode::kUnsupported,
          std::string(op) + ": " + std::string(WeightFormatName(w.format)) +
              " weights on the CUDA backend");
  return w.w;
}

// The K/V pages of a layer's cache as the attention kernels take them: bf16, or FP8 codes and
// scales (LayerKvCache::fp8_kv), their dtypes checked.
k::KvPages KvOf(const LayerKvCache& c) {
  if (!c.fp8_kv()) {
    Check(c.k.dtype == DType::kBF16 && c.v.dtype == DType::kBF16, "KV cache dtypes");
    return k::Bf16Kv(c.k.data<bf16>(), c.v.data<bf16>());
  }
  Check(c.k.dtype == DType::kF8E4M3 && c.v.dtype == DType::kF8E4M3 &&
            c.k_scales.dtype == DType::kF32 && c.v_scales.dtype == DType::kF32,
        "FP8 KV cache dtypes");
  return k::Fp8Kv(c.k.data<uint8_t>(), c.v.data<uint8_t>(), c.k_scales.data<float>(),
                  c.v_scales.data<float>());
}

// A block-scaled weight as the kernels read it, its tensors' dtypes and widths checked.
k::ScaledRows RowsOf(const LinearWeight& w, const char* op) {
  const bool mx = w.format == WeightFormat::kMxfp8;
  const int64_t K = w.in_features(), rows = w.numel() / K;
  Check(
      w.quantized() && w.w.dtype == (mx ? DType::kF8E4M3 : DType::kU8) &&
          w.scales.dtype == (mx ? DType::kU8 : DType::kF8E4M3) &&
          w.scales.numel() == rows * (K / WeightFormatBlock(w.format)) &&
          (mx || (w.row_scale && w.row_scale.dtype == DType::kF32 && w.row_scale.numel() == rows)),
      (std::string(op) + ": block-scaled weight tensors").c_str());
  return {mx ? k::WeightKind::kMxfp8 : k::WeightKind::kNvfp4, w.w.data<void>(),
          w.scales.data<uint8_t>(), mx ? nullptr : w.row_scale.data<float>()};
}

k::PagedLayout Layout(const StepMetadata& m) {
  return {m.seqs,
          m.rows,
          m.query_start.data<int32_t>(),
          m.context_lens.data<int32_t>(),
          m.block_tables.data<int32_t>(),
          m.max_pages_per_seq,
          m.page_size,
          m.num_decodes};
}

class CudaM3Ops final : public M3Ops {
 public:
  explicit CudaM3Ops(CudaDevice& device) : dev_(device) {}

  void Embedding(const DeviceTensor& table, const DeviceTensor& ids,
                 const DeviceTensor& out) override {
    const int64_t H = table.dim(1), n = ids.numel();
    Check(out.rows() == n && out.row_elems() == H && out.dtype == table.dtype &&
              ids.dtype == DType::kI32,
          "Embedding shapes");
    Run("Embedding", [&] {
      k::GatherRows(table.data<void>(), H * DTypeSize(table.dtype), ids.data<int32_t>(), n,
                    out.data<void>(), S());
    });
  }
  void CopyRows(const DeviceTensor& src, int64_t src_row, const DeviceTensor& dst, int64_t dst_row,
                int64_t count) override {
    const int64_t w = src.row_elems();
    Check(w == dst.row_elems() && src_row + count <= src.rows() && dst_row + count <= dst.rows(),
          "CopyRows shapes");
    if (count <= 0) return;
    const size_t ss = DTypeSize(src.dtype), ds = DTypeSize(dst.dtype);
    const void* from = src.data<uint8_t>() + src_row * w * ss;
    void* to = dst.data<uint8_t>() + dst_row * w * ds;
    if (src.dtype == dst.dtype) {
      CudaCheck(cudaMemcpyAsync(to, from, count * w * ss, cudaMemcpyDeviceToDevice, S()),
                "CopyRows");
    } else {
      Check(IsFloatActivation(src.dtype) && IsFloatActivation(dst.dtype), "CopyRows dtypes");
      Run("CopyRows", [&] {
        k::ConvertFloats(from, ToElem(src.dtype), to, ToElem(dst.dtype), count * w, S());
      });
    }
  }
  void GatherRows(const DeviceTensor& src, const DeviceTensor& index,
                  const DeviceTensor& out) override {
    const int64_t w = src.row_elems(), n = index.numel();
    Check(out.rows() == n && out.row_elems() == w && out.dtype == src.dtype, "GatherRows shapes");
    Run("GatherRows", [&] {
      k::GatherRows(src.data<void>(), w * DTypeSize(src.dtype), index.data<int32_t>(), n,
                    out.data<void>(), S());
    });
  }
  void AddRmsNorm(const DeviceTensor& residual, const DeviceTensor* delta,
                  const DeviceTensor& weight, float eps, const DeviceTensor& out) override {
    const int64_t dim = weight.numel(), rows = residual.numel() / dim;
    Check(out.numel() == residual.numel() && (!delta || delta->numel() == residual.numel()),
          "AddRmsNorm shapes");
    Check(residual.dtype == DType::kBF16 && out.dtype == DType::kBF16 &&
              (!delta || delta->dtype == DType::kBF16) && weight.dtype == DType::kF32,
          "AddRmsNorm dtypes");
    Run("AddRmsNorm", [&] {
      k::AddRmsNormGemma(residual.data<bf16>(), delta ? delta->data<bf16>() : nullptr, rows, dim,
                         weight.data<float>(), eps, out.data<bf16>(), S());
    });
  }
  void LayerNorm(const DeviceTensor& x, const DeviceTensor& weight, const DeviceTensor& bias,
                 float eps, const DeviceTensor& out) override {
    const int64_t dim = weight.numel(), rows = x.numel() / dim;
    Check(out.numel() == x.numel() && x.dtype == DType::kBF16 && out.dtype == DType::kBF16 &&
              weight.dtype == DType::kF32 && bias.dtype == DType::kF32,
          "LayerNorm shapes");
    Run("LayerNorm", [&] {
      k::LayerNorm(x.data<bf16>(), rows, dim, weight.data<float>(), bias.data<float>(), eps,
                   out.data<bf16>(), S());
    });
  }
  void Add(const DeviceTensor& x, const DeviceTensor& delta) override {
    Check(x.numel() == delta.numel() && x.dtype == DType::kBF16 && delta.dtype == DType::kBF16,
          "Add shapes");
    Run("Add", [&] { k::AddInPlace(x.data<bf16>(), delta.data<bf16>(), x.numel(), S()); });
  }
  void Gelu(const DeviceTensor& x) override {
    Check(x.dtype == DType::kBF16, "Gelu dtype");
    Run("Gelu", [&] { k::GeluErf(x.data<bf16>(), x.numel(), S()); });
  }

  void Linear(const DeviceTensor& x, const LinearWeight& lw, const DeviceTensor* bias,
              const DeviceTensor& y) override {
    if (lw.quantized()) {
      ScaledLinear(x, lw, bias, y);
      return;
    }
    const DeviceTensor& w = Dense(lw, "Linear");
    const int64_t K = w.dim(w.shape.size() - 1), N = w.numel() / K, M = x.numel() / K;
    Check(x.numel() == M * K && y.numel() == M * N && (!bias || bias->numel() == N),
          "Linear shapes");
    Check(w.dtype == DType::kBF16 && IsFloatActivation(x.dtype) && IsFloatActivation(y.dtype) &&
              (!bias || bias->dtype == DType::kF32),
          "Linear dtypes");
    DeviceTensor xb = x;
    if (x.dtype != DType::kBF16) {
      xb = dev_.Alloc(DType::kBF16, x.shape);
      Run("Linear", [&] {
        k::ConvertFloats(x.data<void>(), ElemType::kF32, xb.data<void>(), ElemType::kBF16,
                         x.numel(), S());
      });
    }
    Run("Linear", [&] {
      k::Linear(dev_.blas(), xb.data<bf16>(), M, K, w.data<bf16>(), N,
                bias ? bias->data<float>() : nullptr, y.data<void>(), ToElem(y.dtype), S());
    });
  }

  // Linear with MXFP8 / NVFP4 weights: the decode GEMV or dequantized chunks on cuBLAS
  // (kernels/cuda/block_scaled_linear.cuh), scratch from the op scratch.
  void ScaledLinear(const DeviceTensor& x, const LinearWeight& lw, const DeviceTensor* bias,
                    const DeviceTensor& y) {
    const int64_t K = lw.in_features(), N = lw.numel() / K, M = x.numel() / K;
    Check(x.numel() == M * K && y.numel() == M * N && (!bias || bias->numel() == N),
          "Linear shapes");
    Check(IsFloatActivation(x.dtype) && IsFloatActivation(y.dtype) &&
              (!bias || bias->dtype == DType::kF32),
          "Linear dtypes");
    const k::ScaledRows w = RowsOf(lw, "Linear");
    const DeviceTensor xb = AsBf16(x);
    const size_t bytes = k::BlockScaledLinearWorkspaceBytes(M, N, K, w.kind);
    void* ws = OpScratch(bytes);
    Run("Linear", [&] {
      k::BlockScaledLinear(dev_.blas(), xb.data<bf16>(), M, w, N, K,
                           bias ? bias->data<float>() : nullptr, y.data<void>(), ToElem(y.dtype),
                           ws, bytes, S());
    });
  }

  void QkNormRopeToCache(const DeviceTensor& qkv, const QkvLayout& l, const QkNormWeights& w,
                         const StepMetadata& m, const DeviceTensor& q_out,
                         const DeviceTensor* index_q_out, const LayerKvCache& cache) override {
    Check(qkv.numel() == m.rows * l.width(), "QkNormRopeToCache: qkv width");
    Check(m.rope_cos.numel() == m.rows * l.rotary_dim, "QkNormRopeToCache: rotary rows");
    const bool idx = l.index_heads > 0;
    Check(!idx || (index_q_out && (cache.index_k || cache.fp8_index())),
          "QkNormRopeToCache: index outputs");
    const k::KvPages kv = KvOf(cache);
    Check(qkv.dtype == DType::kBF16 && q_out.dtype == DType::kBF16, "QkNormRopeToCache dtypes");
    Check(!kv.fp8() || (cache.k_scales.numel() * l.head_dim == cache.k.numel() &&
                        cache.v_scales.numel() * l.head_dim == cache.v.numel()),
          "QkNormRopeToCache: FP8 KV cache shapes");
    k::QkNormRopeDims d{l.q_heads,     l.kv_heads,       l.head_dim,         l.rotary_dim,
                        l.index_heads, l.index_head_dim, l.index_rotary_dim, l.eps};
    k::QkNormWeightsPtr p{w.q_norm.data<float>(), w.k_norm.data<float>(),
                          idx ? w.index_q_norm.data<float>() : nullptr,
                          idx ? w.index_k_norm.data<float>() : nullptr};
    // FP8 index keys: the step's keys to a dense scratch buffer, then quantized into their
    // slots (no bf16 index-key pages are kept).
    const bool fp8 = idx && cache.fp8_index();
    d.index_k_by_row = fp8;
    bf16* index_k = nullptr;
    if (fp8)
      index_k = static_cast<bf16*>(
          OpScratch(static_cast<size_t>(m.rows * l.index_head_dim) * sizeof(bf16)));
    else if (idx)
      index_k = cache.index_k.data<bf16>();
    Run("QkNormRopeToCache", [&] {
      if (kv.fp8())
        k::QkNormRopeToPages(
            qkv.data<bf16>(), m.rows, d, p, m.rope_cos.data<float>(), m.rope_sin.data<float>(),
            m.slot_mapping.data<int64_t>(), q_out.data<bf16>(),
            idx ? index_q_out->data<bf16>() : nullptr,
            k::Fp8KvOut{cache.k.data<uint8_t>(), cache.v.data<uint8_t>(),
                        cache.k_scales.data<float>(), cache.v_scales.data<float>()},
            index_k, S());
      else
        k::QkNormRopeToPages(qkv.data<bf16>(), m.rows, d, p, m.rope_cos.data<float>(),
                             m.rope_sin.data<float>(), m.slot_mapping.data<int64_t>(),
                             q_out.data<bf16>(), idx ? index_q_out->data<bf16>() : nullptr,
                             cache.k.data<bf16>(), cache.v.data<bf16>(), index_k, S());
      if (fp8)
        k::QuantizeIndexKeyRowsFp8(
            index_k, m.rows, l.index_head_dim, m.slot_mapping.data<int64_t>(),
            cache.index_codes.data<uint8_t>(), cache.index_scales.data<float>(), S());
    });
  }
  void PagedAttention(const DeviceTensor& q, const LayerKvCache& cache, const StepMetadata& m,
                      const AttentionShape& s, const DeviceTensor& out) override {
    Check(q.dtype == DType::kBF16 && out.dtype == DType::kBF16, "PagedAttention dtypes");
    const k::KvPages kv = KvOf(cache);
    k::AttentionDims dims{s.q_heads, s.kv_heads, s.head_dim, s.scale};
    const k::PagedLayout layout = Layout(m);
    const size_t bytes = k::PagedAttentionWorkspaceBytes(layout, dims, 0);
    const k::AttentionWorkspace ws{OpScratch(bytes), bytes};
    Run("PagedAttention",
        [&] { k::PagedAttention(q.data<bf16>(), kv, layout, dims, out.data<bf16>(), S(), ws); });
  }
  // The index keys of an MSA layer's cache (bf16 or FP8), its tensors' dtypes checked.
  static k::IndexKeys IndexKeysOf(const DeviceTensor& index_q, const LayerKvCache& cache,
                                  const StepMetadata& m, const MsaParams& p,
                                  const DeviceTensor& selected) {
    Check(selected.numel() == p.index_heads * m.rows * p.topk_blocks, "MSA selection shape");
    const bool fp8 = cache.fp8_index();
    Check(
        index_q.dtype == DType::kBF16 && selected.dtype == DType::kI32 &&
            (fp8 ? cache.index_codes.dtype == DType::kU8 && cache.index_scales.dtype == DType::kF32
                 : cache.index_k.dtype == DType::kBF16),
        "MSA indexer dtypes");
    return fp8 ? k::IndexKeys{nullptr, cache.index_codes.data<uint8_t>(),
                              cache.index_scales.data<float>()}
               : k::IndexKeys{cache.index_k.data<bf16>(), nullptr, nullptr};
  }
  static k::IndexerParams IndexerParamsOf(const MsaParams& p) {
    return {p.index_heads, p.index_head_dim, p.block_size, p.topk_blocks, p.local_blocks};
  }
  void MsaSelectBlocks(const DeviceTensor& index_q, const LayerKvCache& cache,
                       const StepMetadata& m, const MsaParams& p,
                       const DeviceTensor& selected) override {
    const k::IndexKeys keys = IndexKeysOf(index_q, cache, m, p, selected);
    const k::IndexerParams ip = IndexerParamsOf(p);
    const k::PagedLayout layout = Layout(m);
    const size_t bytes = k::IndexerWorkspaceBytes(layout, ip);
    void* ws = OpScratch(bytes);
    Run("MsaSelectBlocks", [&] {
      k::PagedIndexerSelect(index_q.data<bf16>(), keys, layout, ip, m.max_seq_len, ws, bytes,
                            selected.data<int32_t>(), S());
    });
  }
  void MsaAttention(const DeviceTensor& q, const DeviceTensor& index_q, const LayerKvCache& cache,
                    const StepMetadata& m, const MsaParams& p, const AttentionShape& s,
                    const DeviceTensor& selected, const DeviceTensor& out) override {
    const k::IndexKeys keys = IndexKeysOf(index_q, cache, m, p, selected);
    Check(q.dtype == DType::kBF16 && out.dtype == DType::kBF16, "MsaAttention dtypes");
    const k::KvPages kv = KvOf(cache);
    const k::IndexerParams ip = IndexerParamsOf(p);
    const k::AttentionDims dims{s.q_heads, s.kv_heads, s.head_dim, s.scale};
    const k::PagedLayout layout = Layout(m);
    // One scratch: the indexer's workspace, then the attention's (256-byte aligned).
    const size_t index_bytes = (k::IndexerWorkspaceBytes(layout, ip) + 255) / 256 * 256;
    const size_t attn_bytes = k::PagedAttentionWorkspaceBytes(layout, dims, p.topk_blocks);
    auto* ws = static_cast<unsigned char*>(OpScratch(index_bytes + attn_bytes));
    const k::AttentionWorkspace attn_ws{attn_bytes > 0 ? ws + index_bytes : nullptr, attn_bytes};
    Run("MsaAttention", [&] {
      k::PagedMsaAttention(q.data<bf16>(), kv, index_q.data<bf16>(), keys, layout, dims, ip,
                           m.max_seq_len, ws, index_bytes, selected.data<int32_t>(),
                           out.data<bf16>(), S(), attn_ws);
    });
  }
  void BlockSparseAttention(const DeviceTensor& q, const LayerKvCache& cache, const StepMetadata& m,
                            const AttentionShape& s, const DeviceTensor& selected, int64_t topk,
                            int64_t block_size, const DeviceTensor& out) override {
    Check(q.dtype == DType::kBF16 && out.dtype == DType::kBF16 && selected.dtype == DType::kI32,
          "BlockSparseAttention dtypes");
    const k::KvPages kv = KvOf(cache);
    k::AttentionDims dims{s.q_heads, s.kv_heads, s.head_dim, s.scale};
    const k::PagedLayout layout = Layout(m);
    const size_t bytes = k::PagedAttentionWorkspaceBytes(layout, dims, topk);
    const k::AttentionWorkspace ws{OpScratch(bytes), bytes};
    Run("BlockSparseAttention", [&] {
      k::PagedBlockSparseAttention(q.data<bf16>(), kv, layout, dims, selected.data<int32_t>(), topk,
                                   block_size, out.data<bf16>(), S(), ws);
    });
  }

  void SwigluOai(const DeviceTensor& gate_up, const SwigluParams& p,
                 const DeviceTensor& out) override {
    const int64_t I = out.row_elems(), rows = out.rows();
    Check(gate_up.numel() == rows * 2 * I && gate_up.dtype == DType::kBF16 &&
              out.dtype == DType::kBF16,
          "SwigluOai shapes");
    Run("SwigluOai", [&] {
      k::SwigluOai(gate_up.data<bf16>(), rows, I, p.alpha, p.limit, out.data<bf16>(), S());
    });
  }
  void MoeRoute(const DeviceTensor& logits, const DeviceTensor& bias, const DeviceTensor& ids,
                const DeviceTensor& weights, const ExpertRange& local) override {
    const int64_t rows = logits.rows(), E = logits.row_elems(), K = ids.row_elems();
    Check(ids.rows() == rows && weights.numel() == rows * K && ids.dtype == DType::kI32 &&
              IsFloatActivation(logits.dtype) && IsFloatActivation(weights.dtype) &&
              (!bias || (bias.dtype == DType::kF32 && bias.numel() == E)),
          "MoeRoute shapes");
    Run("MoeRoute", [&] {
      k::MoeRouteSigmoid(logits.data<void>(), ToElem(logits.dtype), rows, E,
                         bias ? bias.data<float>() : nullptr, K, ids.data<int32_t>(),
                         weights.data<void>(), ToElem(weights.dtype), S(), local.first,
                         local.count);
    });
  }
  void MoeExperts(const DeviceTensor& x, const DeviceTensor& ids, const DeviceTensor& weights,
                  const LinearWeight& gate_up_w, const LinearWeight& down_w, const SwigluParams& p,
                  float scale, const DeviceTensor& out) override {
    if (gate_up_w.quantized() || down_w.quantized()) {
      ScaledMoeExperts(x, ids, weights, gate_up_w, down_w, p, scale, out);
      return;
    }
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
    Check(down.numel() == d.experts * d.hidden * d.inter && out.numel() == x.numel() &&
              x.dtype == DType::kBF16 && out.dtype == DType::kBF16 &&
              gate_up.dtype == DType::kBF16 && down.dtype == DType::kBF16 &&
              IsFloatActivation(weights.dtype),
          "MoeExperts shapes");
    const size_t bytes = k::MoeExpertsWorkspaceBytes(x.rows(), d);
    const k::MoeWorkspace ws{OpScratch(bytes), bytes};
    Run("MoeExperts", [&] {
      k::MoeGroupedExperts(dev_.blas(), x.data<bf16>(), x.rows(), ids.data<int32_t>(),
                           weights.data<void>(), ToElem(weights.dtype), gate_up.data<bf16>(),
                           down.data<bf16>(), d, out.data<bf16>(), S(), ws);
    });
  }

  // MoeExperts with MXFP8 / NVFP4 experts (either projection may also be bf16):
  // kernels/cuda/moe_experts.cuh's block-scaled entry.
  void ScaledMoeExperts(const DeviceTensor& x, const DeviceTensor& ids, const DeviceTensor& weights,
                        const LinearWeight& gate_up, const LinearWeight& down,
                        const SwigluParams& p, float scale, const DeviceTensor& out) {
    Check(gate_up.shape().size() == 3 && down.shape().size() == 3, "MoeExperts weight ranks");
    k::MoeExpertsDims d;
    d.experts = gate_up.shape()[0];
    d.inter = gate_up.shape()[1] / 2;
    d.hidden = gate_up.shape()[2];
    d.topk = ids.row_elems();
    d.alpha = p.alpha;
    d.limit = p.limit;
    d.scale = scale;
    Check(down.shape() == Shape{d.experts, d.hidden, d.inter} && out.numel() == x.numel() &&
              x.numel() == x.rows() * d.hidden && x.dtype == DType::kBF16 &&
              out.dtype == DType::kBF16 && IsFloatActivation(weights.dtype),
          "MoeExperts shapes");
    const k::ScaledRows gu = ExpertRowsOf(gate_up), dn = ExpertRowsOf(down);
    const size_t bytes = k::MoeExpertsScaledWorkspaceBytes(x.rows(), d, gu.kind, dn.kind);
    const k::MoeWorkspace ws{OpScratch(bytes), bytes};
    Run("MoeExperts", [&] {
      k::MoeGroupedExpertsScaled(dev_.blas(), x.data<bf16>(), x.rows(), ids.data<int32_t>(),
                                 weights.data<void>(), ToElem(weights.dtype), gu, dn, d,
                                 out.data<bf16>(), S(), ws);
    });
  }
  static k::ScaledRows ExpertRowsOf(const LinearWeight& w) {
    if (w.quantized()) return RowsOf(w, "MoeExperts");
    Check(w.w.dtype == DType::kBF16, "MoeExperts dense expert dtype");
    return {k::WeightKind::kBf16, w.w.data<void>(), nullptr, nullptr};
  }

  void SegmentAttention(const DeviceTensor& qkv, const DeviceTensor& cos, const DeviceTensor& sin,
                        int64_t rot, std::span<const int64_t> segments, int64_t heads,
                        int64_t head_dim, const DeviceTensor& out) override {
    const int64_t rows = qkv.rows();
    Check(qkv.numel() == rows * 3 * heads * head_dim && out.numel() == rows * heads * head_dim,
          "SegmentAttention shapes");
    Check(!segments.empty() && segments.front() == 0 && segments.back() == rows,
          "SegmentAttention segments must cover the rows");
    Check(qkv.dtype == DType::kBF16 && out.dtype == DType::kBF16 && IsFloatActivation(cos.dtype) &&
              IsFloatActivation(sin.dtype),
          "SegmentAttention dtypes");
    const DeviceTensor c32 = AsF32(cos), s32 = AsF32(sin);
    std::vector<int32_t> seg(segments.begin(), segments.end());
    DeviceTensor dev_seg = dev_.Alloc(DType::kI32, {static_cast<int64_t>(seg.size())});
    dev_.Upload(seg.data(), dev_seg);
    Run("SegmentAttention", [&] {
      k::SegmentAttention(qkv.data<bf16>(), rows, heads, head_dim, c32.data<float>(),
                          s32.data<float>(), rot, dev_seg.data<int32_t>(),
                          static_cast<int64_t>(seg.size()) - 1, out.data<bf16>(), S());
    });
    // `seg` is pageable host memory the upload was staged from; the kernel reads dev_seg.
  }

 private:
  cudaStream_t S() const { return dev_.stream(); }
  void* OpScratch(size_t bytes) { return dev_.OpScratch(bytes); }

  // t itself when bf16, else a bf16 copy (GEMM inputs).
  DeviceTensor AsBf16(const DeviceTensor& t) {
    if (t.dtype == DType::kBF16) return t;
    DeviceTensor b = dev_.Alloc(DType::kBF16, t.shape);
    Run("AsBf16", [&] {
      k::ConvertFloats(t.data<void>(), ToElem(t.dtype), b.data<void>(), ElemType::kBF16, t.numel(),
                       S());
    });
    return b;
  }

  // t itself when float32, else a float32 copy (tables the kernels read in f32).
  DeviceTensor AsF32(const DeviceTensor& t) {
    if (t.dtype == DType::kF32) return t;
    DeviceTensor f = dev_.Alloc(DType::kF32, t.shape);
    Run("AsF32", [&] {
      k::ConvertFloats(t.data<void>(), ToElem(t.dtype), f.data<void>(), ElemType::kF32, t.numel(),
                       S());
    });
    return f;
  }

  CudaDevice& dev_;
};

}  // namespace

std::unique_ptr<M3Ops> MakeCudaM3Ops(CudaDevice& device) {
  return std::make_unique<CudaM3Ops>(device);
}

}  // namespace m3::engine::backend
