// CpuBackend: each op checks the shapes it relies on (an inconsistency is a bug: kInternal) and
// forwards raw pointers to its kernels/cpu twin.
//
// Expert stacks (the rank-3 weights, [experts, n, k]) are stored K-major, each expert's matrix
// transposed to [k, n], converted and transposed in one pass at load: the grouped expert MLPs
// of a decode step have a few rows per expert, and the small-M kernel that serves them streams
// a K-major weight with no per-call packing (kernels/cpu/small_m_gemm.h). Buffers in that layout
// are marked, so Upload / Download of them still speak the row-major [experts, n, k] layout of
// the interface. M3_CPU_SMALL_M=0 keeps the nn.Linear layout and the per-expert sgemm path
// (for side-by-side measurement).
#include "engine/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "engine/backend/step_metadata_upload.h"
#include "kernels/cpu/gelu.h"
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
#include "kernels/cpu/small_m_gemm.h"
#include "kernels/cpu/swiglu.h"

namespace m3::engine::backend {
namespace {

namespace k = m3::kernels::cpu;

void Check(bool ok, const char* what) {
  Require(ok, ErrorCode::kInternal, std::string("cpu backend: ") + what);
}

class HostBuffer : public DeviceBuffer {
 public:
  HostBuffer(size_t bytes, std::shared_ptr<std::atomic<size_t>> live)
      : bytes_(bytes), live_(std::move(live)) {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    data_ = std::aligned_alloc(64, rounded);
    Require(data_ != nullptr, ErrorCode::kResourceExhausted,
            "out of host memory allocating " + std::to_string(bytes) + " bytes");
    *live_ += bytes_;
  }
  ~HostBuffer() override {
    std::free(data_);
    *live_ -= bytes_;
  }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }
  // Set when the buffer holds an expert stack with each expert transposed.
  bool k_major_experts = false;

 private:
  void* data_ = nullptr;
  size_t bytes_;
  std::shared_ptr<std::atomic<size_t>> live_;
};

// Converts n elements of a float checkpoint dtype to float32.
void ConvertToF32(const TensorView& src, int64_t begin, int64_t n, float* dst) {
  switch (src.dtype) {
    case DType::kF32:
      std::memcpy(dst, src.data + begin * 4, static_cast<size_t>(n) * 4);
      return;
    case DType::kBF16: {
      const uint8_t* p = src.data + begin * 2;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + i * 2, 2);
        dst[i] = BF16ToF32(v);
      }
      return;
    }
    case DType::kF16: {
      const uint8_t* p = src.data + begin * 2;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + i * 2, 2);
        dst[i] = F16ToF32(v);
      }
      return;
    }
    case DType::kF64: {
      const uint8_t* p = src.data + begin * 8;
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, p + i * 8, 8);
        dst[i] = static_cast<float>(v);
      }
      return;
    }
    default:
      throw Error(ErrorCode::kInvalidArgument,
                  "weight dtype " + std::string(DTypeName(src.dtype)) + " is not a float type");
  }
}

// Elements [begin, begin + n) of the parts concatenated, as float32.
void ConvertConcatRange(std::span<const TensorView> parts, int64_t begin, int64_t n, float* dst) {
  for (const auto& p : parts) {
    const int64_t size = p.numel();
    if (begin >= size) {
      begin -= size;
      continue;
    }
    const int64_t take = std::min(n, size - begin);
    ConvertToF32(p, begin, take, dst);
    dst += take;
    n -= take;
    begin = 0;
    if (n == 0) return;
  }
}

bool IsKMajorExperts(const DeviceTensor& t) {
  const auto* b = dynamic_cast<const HostBuffer*>(t.buffer.get());
  return b && b->k_major_experts;
}

k::PagedLayout Layout(const StepMetadata& m) {
  return {m.seqs,
          m.query_start.data<int32_t>(),
          m.context_lens.data<int32_t>(),
          m.block_tables.data<int32_t>(),
          m.max_pages_per_seq,
          m.page_size};
}

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  DType activation_dtype() const override { return DType::kF32; }
  DType weight_dtype() const override { return DType::kF32; }
  size_t weight_bytes() const override { return weight_bytes_; }
  size_t allocated_bytes() const override { return *live_; }

  DeviceTensor Alloc(DType dtype, Shape shape) override {
    DeviceTensor t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.buffer = std::make_shared<HostBuffer>(t.bytes(), live_);
    return t;
  }
  void Upload(const void* host, const DeviceTensor& dst) override {
    if (IsKMajorExperts(dst)) {
      k::TransposeEachExpert(static_cast<const float*>(host), dst.dim(0), dst.dim(1), dst.dim(2),
                             dst.data<float>());
    } else if (dst.bytes()) {
      std::memcpy(dst.data<uint8_t>(), host, dst.bytes());
    }
  }
  void Download(const DeviceTensor& src, void* host) override {
    if (IsKMajorExperts(src)) {
      k::TransposeEachExpert(src.data<float>(), src.dim(0), src.dim(2), src.dim(1),
                             static_cast<float*>(host));
    } else if (src.bytes()) {
      std::memcpy(host, src.data<uint8_t>(), src.bytes());
    }
  }

  DeviceTensor UploadWeight(std::span<const TensorView> parts, Shape shape) override {
    int64_t total = 0;
    for (const auto& p : parts) total += p.numel();
    Check(total == NumElements(shape), "UploadWeight: parts do not fill the shape");
    if (shape.size() == 3 && experts_k_major_) return UploadExpertStack(parts, std::move(shape));
    DeviceTensor t = Alloc(DType::kF32, std::move(shape));
    float* dst = t.data<float>();
    constexpr int64_t kChunk = 1 << 18;
    for (const auto& p : parts) {
      const int64_t n = p.numel();
      k::ParallelFor((n + kChunk - 1) / kChunk, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          const int64_t begin = c * kChunk, len = std::min(kChunk, n - begin);
          ConvertToF32(p, begin, len, dst + begin);
        }
      });
      dst += n;
    }
    weight_bytes_ += t.bytes();
    return t;
  }

  StepMetadata PrepareStep(const ForwardBatch& b, int64_t page_size,
                           std::span<const float> rope_cos, std::span<const float> rope_sin,
                           int64_t rotary_dim) override {
    return UploadStepMetadata(*this, b, page_size, rope_cos, rope_sin, rotary_dim);
  }

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

  void Linear(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor* bias,
              const DeviceTensor& y) override {
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
    // FP8 index keys: the step's keys to a dense buffer, then quantized into their slots.
    const bool fp8 = idx && cache.fp8_index();
    d.index_k_by_row = fp8;
    if (fp8) index_staging_.resize(static_cast<size_t>(m.rows * l.index_head_dim));
    float* index_k = !idx ? nullptr : fp8 ? index_staging_.data() : cache.index_k.data<float>();
    k::QkNormRopeToPages(qkv.data<float>(), m.rows, d, p, m.rope_cos.data<float>(),
                         m.rope_sin.data<float>(), m.slot_mapping.data<int64_t>(),
                         q_out.data<float>(), idx ? index_q_out->data<float>() : nullptr,
                         cache.k.data<float>(), cache.v.data<float>(), index_k);
    if (fp8)
      k::QuantizeIndexKeyRowsFp8(index_staging_.data(), m.rows, l.index_head_dim,
                                 m.slot_mapping.data<int64_t>(), cache.index_codes.data<uint8_t>(),
                                 cache.index_scales.data<float>());
  }
  void PagedAttention(const DeviceTensor& q, const LayerKvCache& cache, const StepMetadata& m,
                      const AttentionShape& s, const DeviceTensor& out) override {
    k::AttentionDims dims{s.q_heads, s.kv_heads, s.head_dim, s.scale};
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
  // [experts, n, k] stored as [experts, k, n]: blocks of 32 source rows are converted into a
  // scratch and written transposed, in parallel over (expert, block); no whole-tensor copy.
  DeviceTensor UploadExpertStack(std::span<const TensorView> parts, Shape shape) {
    DeviceTensor t = Alloc(DType::kF32, std::move(shape));
    static_cast<HostBuffer*>(t.buffer.get())->k_major_experts = true;
    const int64_t E = t.dim(0), N = t.dim(1), K = t.dim(2);
    constexpr int64_t kBlock = 32;
    const int64_t blocks = (N + kBlock - 1) / kBlock;
    float* dst = t.data<float>();
    k::ParallelFor(E * blocks, 1, [&](int64_t b, int64_t e) {
      std::vector<float> scratch(kBlock * K);
      for (int64_t task = b; task < e; ++task) {
        const int64_t ex = task / blocks, r0 = (task % blocks) * kBlock;
        const int64_t rows = std::min(kBlock, N - r0);
        ConvertConcatRange(parts, (ex * N + r0) * K, rows * K, scratch.data());
        float* out = dst + ex * K * N + r0;
        for (int64_t c = 0; c < K; ++c)
          for (int64_t r = 0; r < rows; ++r) out[c * N + r] = scratch[r * K + c];
      }
    });
    weight_bytes_ += t.bytes();
    return t;
  }

  void MoeExperts(const DeviceTensor& x, const DeviceTensor& ids, const DeviceTensor& weights,
                  const DeviceTensor& gate_up, const DeviceTensor& down, const SwigluParams& p,
                  float scale, const DeviceTensor& out) override {
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

  void SampleRows(const DeviceTensor& logits, std::span<const SampleRow> rows,
                  std::vector<SampledToken>& out) override {
    const int64_t n = static_cast<int64_t>(rows.size());
    out.clear();
    if (n == 0) return;
    Check(logits.dtype == DType::kF32 && logits.shape.size() == 2 && logits.shape[0] == n,
          "SampleRows: logits must be f32 [rows, vocab]");
    const int64_t vocab = logits.shape[1];
    // The host sampler's scratch is vocabulary-sized: kept between steps.
    if (!sampler_ || sampler_->vocab() != vocab) sampler_ = std::make_unique<BatchSampler>(vocab);
    sampler_->Sample(logits.data<float>(), rows, out);
  }

 private:
  std::shared_ptr<std::atomic<size_t>> live_ = std::make_shared<std::atomic<size_t>>(0);
  size_t weight_bytes_ = 0;
  bool experts_k_major_ = k::SmallMKernelsEnabled();
  std::unique_ptr<BatchSampler> sampler_;
  std::vector<float> index_staging_;  // a step's index keys before FP8 quantization
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace m3::engine::backend
