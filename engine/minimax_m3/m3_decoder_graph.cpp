// M3DecoderGraph: batch validation, the per-step metadata, the layer loop and the LM head.
#include "engine/minimax_m3/m3_decoder_graph.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/backend/device_encoder_output.h"
#include "engine/backend/step_metadata_upload.h"
#include "kernels/cpu/rope.h"
#include "shared/error.h"

namespace m3::engine::minimax_m3 {
namespace {

using backend::DeviceTensor;

[[noreturn]] void Fail(const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "forward batch: " + what);
}

std::string Str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

M3DecoderGraph::M3DecoderGraph(const ModelConfig& config, const M3ModelWeights& weights,
                               backend::Device& device, backend::M3Ops& ops,
                               const DecoderStepLimits& limits, const ShardPlan* plan,
                               parallel::Communicator* comm)
    : config_(config),
      w_(weights),
      device_(device),
      ops_(ops),
      plan_(plan ? *plan : SingleRankPlan(config.text)),
      comm_(plan_.single() ? nullptr : comm),
      limits_(limits) {
  Require(
      plan_.single() || (comm_ && comm_->size() == plan_.world() && comm_->rank() == plan_.rank),
      ErrorCode::kInternal, "decoder graph: a sharded plan needs its group's communicator");
  const TextConfig& t = config.text;
  q_heads_ = plan_.q_heads.count;
  kv_heads_ = plan_.kv_heads.count;
  index_heads_ = plan_.single() ? t.index_n_heads : plan_.kv_heads.count;
  dense_inter_ = plan_.dense_inter.count;
  shared_inter_ = plan_.shared_inter.count;
  inv_freq_ = kernels::cpu::RopeInverseFrequencies(config.text.rotary_dim, config.text.rope_theta);
}

int64_t M3DecoderGraph::KvBytesPerPage(int64_t page_size) const {
  const TextConfig& t = config_.text;
  const int64_t act = static_cast<int64_t>(DTypeSize(device_.activation_dtype()));
  // An FP8 index key: one byte per channel and a float32 scale.
  const int64_t index_key = limits_.fp8_index_keys ? t.index_head_dim + 4 : t.index_head_dim * act;
  // A K or V vector: head_dim bytes of codes and a float32 scale with the FP8 KV cache.
  const int64_t kv_vector = limits_.fp8_kv_cache ? t.head_dim + 4 : t.head_dim * act;
  int64_t per_token = 0;
  for (bool sparse : t.sparse_attention)
    per_token += 2 * kv_heads_ * kv_vector + (sparse ? index_key : 0);
  return per_token * page_size;
}

void M3DecoderGraph::AllocateKvCache(int64_t num_pages, int64_t page_size) {
  const TextConfig& t = config_.text;
  Require(num_pages > 0 && page_size > 0, ErrorCode::kInvalidArgument,
          "KV cache: num_pages and page_size must be positive");
  const bool any_sparse = std::find(t.sparse_attention.begin(), t.sparse_attention.end(), true) !=
                          t.sparse_attention.end();
  Require(!any_sparse || t.index_block_size % page_size == 0, ErrorCode::kInvalidArgument,
          "KV cache: page size " + Str(page_size) + " does not divide the MSA block size " +
              Str(t.index_block_size));
  kv_.clear();
  graphs_.reset();
  device_.ReserveStepWorkspace(0);
  const DType dt = device_.activation_dtype();
  // With decode buckets, page num_pages takes the padding rows' K/V (no sequence owns it).
  const bool buckets = limits_.graphs || limits_.decode_buckets;
  const int64_t stored = num_pages + (buckets ? 1 : 0);
  for (bool sparse : t.sparse_attention) {
    backend::LayerKvCache c;
    const DType kv_dt = limits_.fp8_kv_cache ? DType::kF8E4M3 : dt;
    c.k = device_.Alloc(kv_dt, {stored, page_size, kv_heads_, t.head_dim});
    c.v = device_.Alloc(kv_dt, {stored, page_size, kv_heads_, t.head_dim});
    if (limits_.fp8_kv_cache) {
      c.k_scales = device_.Alloc(DType::kF32, {stored, page_size, kv_heads_});
      c.v_scales = device_.Alloc(DType::kF32, {stored, page_size, kv_heads_});
    }
    if (sparse && limits_.fp8_index_keys) {
      c.index_codes = device_.Alloc(DType::kU8, {stored, page_size, t.index_head_dim});
      c.index_scales = device_.Alloc(DType::kF32, {stored, page_size});
    } else if (sparse) {
      c.index_k = device_.Alloc(dt, {stored, page_size, t.index_head_dim});
    }
    kv_.push_back(std::move(c));
  }
  num_pages_ = num_pages;
  page_size_ = page_size;

  // The step workspace for the largest step the scheduler makes: max_batched_tokens rows (or
  // the largest decode bucket), max_num_seqs sequences (logits rows), block tables as wide as
  // the longest context needs.
  int64_t width = num_pages;
  if (t.max_position_embeddings > 0)
    width = std::min(width, (t.max_position_embeddings + page_size - 1) / page_size);
  int64_t rows = std::max<int64_t>(limits_.max_batched_tokens, 1);
  int64_t seqs = std::max<int64_t>(limits_.max_num_seqs, 1);
  if (buckets) {
    graphs_ = std::make_unique<backend::DecodeGraphCache>(device_, seqs, width, page_size,
                                                          static_cast<int32_t>(num_pages),
                                                          t.rotary_dim, limits_.graphs);
    width = graphs_->max_width();
    seqs = std::max(seqs, graphs_->max_rows());
    rows = std::max(rows, seqs);
  }
  const int64_t logit_rows = std::min(rows, seqs * limits_.max_logits_per_seq);
  graph_verify_rows_ = limits_.max_logits_per_seq > 1 ? logit_rows : 0;
  device_.ReserveStepWorkspace(StepWorkspaceBytes(rows, seqs, width, std::max(seqs, logit_rows)));
}

size_t M3DecoderGraph::StepWorkspaceBytes(int64_t rows, int64_t seqs, int64_t width,
                                          int64_t logit_rows) const {
  const TextConfig& t = config_.text;
  const int64_t act = static_cast<int64_t>(DTypeSize(device_.activation_dtype()));
  int64_t total = 0;
  auto add = [&](int64_t bytes) { total += (std::max<int64_t>(bytes, 1) + 255) / 256 * 256; };
  // The metadata (PrepareStep) and the token ids.
  for (int64_t b : {rows * 4, (seqs + 1) * 4, seqs * 4, seqs * width * 4, rows * 8,
                    rows * t.rotary_dim * 4, rows * t.rotary_dim * 4, rows * 4})
    add(b);
  const int64_t H = t.hidden_size, D = t.head_dim, Hq = q_heads_;
  const int64_t Hkv = kv_heads_, Hi = index_heads_, Di = t.index_head_dim;
  add(rows * H * act);                                     // h
  add(rows * H * act);                                     // x
  add(rows * ((Hq + 2 * Hkv) * D + (Hi + 1) * Di) * act);  // qkv
  add(rows * Hq * D * act);                                // q
  add(rows * Hq * D * act);                                // att
  add(rows * H * act);                                     // delta
  add(rows * Hi * Di * act);                               // index q
  add(Hi * rows * t.index_topk_blocks * 4);
  add(rows * 2 * dense_inter_ * act);
  add(rows * dense_inter_ * act);
  add(rows * 2 * shared_inter_ * act);
  add(rows * shared_inter_ * act);
  add(rows * t.num_local_experts * 4);
  add(rows * t.num_experts_per_tok * 4);
  add(rows * t.num_experts_per_tok * 4);
  // The LM head rows: the index, the gathered rows, the logits.
  add(logit_rows * 4);
  add(logit_rows * H * act);
  add(logit_rows * t.vocab_size * 4);
  if (plan_.vocab_gather) {  // this rank's logits columns, the gathered blocks
    add(logit_rows * plan_.vocab.count * 4);
    add(logit_rows * t.vocab_size * 4);
  }
  // Device sampling (Device::SampleRows): a float32 copy of the logits, each row's token
  // history (tokens and counts, at most the vocabulary), its parameters, masks and results.
  add(logit_rows * t.vocab_size * 4);
  add(logit_rows * t.vocab_size * 8);
  add(logit_rows * 4096);
  // Layer inputs kept by a graph-replayed step (a draft's hidden-state capture).
  if (limits_.graph_hidden_layers > 0)
    for (int64_t i = 0; i < limits_.graph_hidden_layers; ++i) add(logit_rows * H * act);
  // Uploads of bf16 tensors stage through a float32 copy (rotary rows are float32 already).
  return static_cast<size_t>(total + (int64_t{4} << 20));
}

void M3DecoderGraph::Validate(const ForwardBatch& b) const {
  const TextConfig& t = config_.text;
  const int64_t rows = b.num_rows(), seqs = b.num_seqs();
  Require(page_size_ > 0, ErrorCode::kInternal, "Execute before AllocateKvCache");
  if (!(rows > 0 && seqs > 0)) Fail("no rows");
  if (!(static_cast<int64_t>(b.positions.size()) == rows &&
        static_cast<int64_t>(b.slot_mapping.size()) == rows))
    Fail("positions / slot_mapping must have one entry per row");
  if (!(static_cast<int64_t>(b.context_lens.size()) == seqs))
    Fail("context_lens must have seqs entries");
  if (!(b.max_pages_per_seq > 0 &&
        static_cast<int64_t>(b.block_tables.size()) == seqs * b.max_pages_per_seq))
    Fail("block_tables must be [seqs, max_pages_per_seq]");
  if (!(b.query_start.front() == 0 && b.query_start.back() == rows))
    Fail("query_start must run from 0 to the row count");
  if (!(b.num_decodes >= 0 && b.num_decodes <= seqs)) Fail("num_decodes out of range");
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t q0 = b.query_start[s], q = b.query_start[s + 1] - q0, ctx = b.context_lens[s];
    if (!(q > 0 && b.query_start[s + 1] <= rows))
      Fail("query_start must increase strictly (sequence " + Str(s) + ")");
    if (!(s >= b.num_decodes || q == 1))
      Fail("decode sequence " + Str(s) + " has more than one row");
    if (!(ctx >= 0 && (t.max_position_embeddings <= 0 || ctx + q <= t.max_position_embeddings)))
      Fail("sequence " + Str(s) + " reaches position " + Str(ctx + q) +
           ", beyond max_position_embeddings " + Str(t.max_position_embeddings));
    const int64_t pages = (ctx + q + page_size_ - 1) / page_size_;
    if (!(pages <= b.max_pages_per_seq))
      Fail("sequence " + Str(s) + " needs more pages than its table");
    const int32_t* table = b.block_tables.data() + s * b.max_pages_per_seq;
    for (int64_t j = 0; j < pages; ++j)
      if (!(table[j] >= 0 && table[j] < num_pages_))
        Fail("sequence " + Str(s) + " block table entry " + Str(j) + " = " + Str(table[j]) +
             " is not a page of the cache [0, " + Str(num_pages_) + ")");
    for (int64_t i = 0; i < q; ++i) {
      const int64_t r = q0 + i, pos = ctx + i;
      if (!(b.positions[r] == pos))
        Fail("row " + Str(r) + " has position " + Str(b.positions[r]) +
             ", its sequence's layout says " + Str(pos));
      if (!(b.slot_mapping[r] == int64_t{table[pos / page_size_]} * page_size_ + pos % page_size_))
        Fail("row " + Str(r) + " slot_mapping does not match its block table");
      if (!(b.token_ids[r] >= 0 && b.token_ids[r] < t.vocab_size))
        Fail("token id " + Str(b.token_ids[r]) + " at row " + Str(r) +
             " is outside the vocabulary [0, " + Str(t.vocab_size) + ")");
    }
  }
  for (size_t i = 0; i < b.logits_rows.size(); ++i)
    if (!(b.logits_rows[i] >= 0 && b.logits_rows[i] < rows &&
          (i == 0 || b.logits_rows[i] > b.logits_rows[i - 1])))
      Fail("logits_rows must be ascending rows of the batch");
  for (const MediaSpan& m : b.media) {
    if (!(m.row >= 0 && m.length > 0 && m.row + m.length <= rows))
      Fail("media span outside the rows");
    if (!(m.features != nullptr)) Fail("media span without features");
    if (!(m.offset >= 0 && m.offset + m.length <= m.features->tokens()))
      Fail("media span takes feature rows beyond its segment");
    if (!(dynamic_cast<const backend::DeviceEncoderOutput*>(m.features.get()) != nullptr))
      Fail("media features were not encoded by this runner");
    for (int64_t r = m.row; r < m.row + m.length; ++r)
      if (!(b.token_ids[r] == config_.image_token_id || b.token_ids[r] == config_.video_token_id))
        Fail("media span covers row " + Str(r) + ", which is not an image / video placeholder");
  }
}

void M3DecoderGraph::Execute(const ForwardBatch& b, std::vector<float>& logits,
                             const CaptureRequest& capture) {
  logits.clear();
  Execute(
      b,
      [&](const DeviceTensor& out) {
        logits.resize(static_cast<size_t>(out.numel()));
        device_.Download(out, logits.data());
      },
      capture);
}

void M3DecoderGraph::Execute(const ForwardBatch& b, const LogitsSink& take,
                             const CaptureRequest& capture) {
  Validate(b);
  const int64_t rows = b.num_rows();
  backend::Device& dev = device_;

  // Decode-only steps (one row per sequence, each row's logits wanted, no media, nothing to
  // capture) run at their bucket's shape: its recorded graph, or op by op when not recording;
  // so do speculative verify steps whose sequences all run the same 1 + k rows. Their few
  // rotary rows are made on the host (the graph's inputs are host arrays).
  const int64_t n = static_cast<int64_t>(b.logits_rows.size());
  // A capture of a few layers' inputs alone (a speculative draft's) does not leave the graphs:
  // the recorded forward copies those inputs into the workspace, downloaded after the replay.
  const std::vector<int64_t>& keep_layers = capture.hidden_state_layers;
  bool keep_ok = capture.out && capture.hidden_states && !capture.block_indices &&
                 !capture.vision && !keep_layers.empty() &&
                 static_cast<int64_t>(keep_layers.size()) <= limits_.graph_hidden_layers;
  for (int64_t l : keep_layers)
    keep_ok = keep_ok && l >= 0 && l < static_cast<int64_t>(w_.layers.size());
  const int64_t q = graphs_ ? backend::DecodeGraphCache::UniformQueryRows(b) : 0;
  if (graphs_ && (!capture.out || keep_ok) && q > 0) {
    std::vector<float> cos, sin;
    backend::HostRopeTables(b, inv_freq_, cos, sin);
    std::vector<DeviceTensor>* kept = nullptr;
    if (keep_ok)
      kept = &graph_kept_[{graphs_->RowBucket(b.num_seqs()),
                           graphs_->WidthBucket(b.max_pages_per_seq), q}];
    const auto forward = [&](const backend::StepMetadata& meta, const DeviceTensor& ids) {
      // The last execution of a bucket's forward is its recording (or, not recording, this
      // step): its kept tensors are the ones a replay fills.
      if (kept) kept->clear();
      return Forward(meta, ids, {}, nullptr, CaptureRequest{}, kept ? &keep_layers : nullptr, kept);
    };
    const LogitsSink none = [](const DeviceTensor&) {};
    if (graphs_->Run(b, cos, sin, forward, takes_logits() ? take : none, graph_verify_rows_)) {
      if (kept) {
        Require(kept->size() == keep_layers.size(), ErrorCode::kInternal,
                "decode graphs: the kept hidden states of a bucket are missing");
        for (size_t i = 0; i < keep_layers.size(); ++i) {
          HostTensor host =
              HostTensor::Uninitialized(DType::kF32, {rows, config_.text.hidden_size});
          device_.Download((*kept)[i].Rows(0, rows), host.data());
          capture.out->emplace_back("hidden_states." + Str(keep_layers[i]), std::move(host));
        }
      }
      return;
    }
  }

  dev.BeginStep();
  struct EndStep {
    backend::Device& dev;
    ~EndStep() { dev.EndStep(); }
  } end_step{dev};
  // The rotary rows where the device can make them (an 8K-token prefill's tables are 4 MB).
  backend::StepMetadata meta = dev.PrepareStepFromPositions(b, page_size_, inv_freq_);
  DeviceTensor ids = dev.Alloc(DType::kI32, {rows});
  dev.Upload(b.token_ids.data(), ids);
  const DeviceTensor out = Forward(meta, ids, b.media, &b.logits_rows, capture);
  // Device sampling's buffers come from the workspace too, after the step's (it is sized for
  // them: StepWorkspaceBytes).
  if (n > 0 && takes_logits()) take(out);
}

DeviceTensor M3DecoderGraph::Forward(const backend::StepMetadata& meta, const DeviceTensor& ids,
                                     const std::vector<MediaSpan>& media,
                                     const std::vector<int32_t>* logits_rows,
                                     const CaptureRequest& capture,
                                     const std::vector<int64_t>* keep_layers,
                                     std::vector<DeviceTensor>* keep) {
  const TextConfig& t = config_.text;
  const int64_t rows = meta.rows, H = t.hidden_size, D = t.head_dim;
  const int64_t Hq = q_heads_, Hkv = kv_heads_, rot = t.rotary_dim;
  const int64_t Hi = index_heads_, Di = t.index_head_dim;
  const float eps = static_cast<float>(t.rms_norm_eps);
  backend::Device& dev = device_;
  backend::M3Ops& ops = ops_;
  const DType f32 = dev.activation_dtype();

  DeviceTensor h = dev.Alloc(f32, {rows, H});
  ops.Embedding(w_.embed_tokens, ids, h);
  for (const MediaSpan& m : media) {
    const auto& feats = static_cast<const backend::DeviceEncoderOutput&>(*m.features).features();
    ops.CopyRows(feats, m.offset, h, m.row, m.length);
  }

  // Step workspaces, reused by every layer.
  bool any_sparse = false, any_moe = false, any_dense = false;
  for (const auto& L : w_.layers) {
    any_sparse |= L.sparse_attention;
    any_moe |= L.moe;
    any_dense |= !L.moe;
  }
  backend::QkvLayout base{Hq, Hkv, D, rot, 0, 0, 0, eps};
  backend::QkvLayout sparse = base;
  sparse.index_heads = Hi;
  sparse.index_head_dim = Di;
  sparse.index_rotary_dim = std::min(Di, rot);
  const int64_t qkv_width = any_sparse ? sparse.width() : base.width();
  DeviceTensor x = dev.Alloc(f32, {rows, H});
  DeviceTensor qkv_buf = dev.Alloc(f32, {rows * qkv_width});
  DeviceTensor q = dev.Alloc(f32, {rows, Hq, D});
  DeviceTensor att = dev.Alloc(f32, {rows, Hq * D});
  DeviceTensor delta = dev.Alloc(f32, {rows, H});
  DeviceTensor iq, sel;
  if (any_sparse) {
    iq = dev.Alloc(f32, {rows, Hi, Di});
    sel = dev.Alloc(DType::kI32, {Hi, rows, t.index_topk_blocks});
  }
  DeviceTensor dense_gu, dense_act, shared_gu, shared_act, router_logits, route_ids, route_w;
  if (any_dense) {
    dense_gu = dev.Alloc(f32, {rows, 2 * dense_inter_});
    dense_act = dev.Alloc(f32, {rows, dense_inter_});
  }
  if (any_moe) {
    shared_gu = dev.Alloc(f32, {rows, 2 * shared_inter_});
    shared_act = dev.Alloc(f32, {rows, shared_inter_});
    // The router in float32 whatever the activation dtype (M3_REFERENCE: sigmoid in float32).
    router_logits = dev.Alloc(DType::kF32, {rows, t.num_local_experts});
    route_ids = dev.Alloc(DType::kI32, {rows, t.num_experts_per_tok});
    route_w = dev.Alloc(DType::kF32, {rows, t.num_experts_per_tok});
  }
  const backend::AttentionShape shape{Hq, Hkv, D, static_cast<float>(1.0 / std::sqrt(double(D)))};
  const backend::MsaParams msa{Hi, Di, t.index_block_size, t.index_topk_blocks,
                               t.index_local_blocks};
  const backend::SwigluParams act{static_cast<float>(t.swiglu_alpha),
                                  static_cast<float>(t.swiglu_limit)};

  const auto wants_hidden = [&](int64_t layer) {
    const auto& only = capture.hidden_state_layers;
    return capture.out && capture.hidden_states &&
           (only.empty() || std::find(only.begin(), only.end(), layer) != only.end());
  };
  auto capture_float = [&](const std::string& name, const DeviceTensor& v) {
    HostTensor host = HostTensor::Uninitialized(DType::kF32, v.shape);
    dev.Download(v, host.data());
    capture.out->emplace_back(name, std::move(host));
  };

  const DeviceTensor* pending = nullptr;  // the previous layer's MLP output, not yet added
  bool normed = false;  // x already holds this layer's input norm (fused into the all-reduce)
  for (size_t li = 0; li < w_.layers.size(); ++li) {
    const M3DecoderLayerWeights& L = w_.layers[li];
    const backend::LayerKvCache& cache = kv_[li];
    if (!normed) ops.AddRmsNorm(h, pending, L.input_norm, eps, x);
    if (wants_hidden(static_cast<int64_t>(li))) capture_float("hidden_states." + Str(li), h);
    if (keep_layers && keep) {
      for (int64_t want : *keep_layers) {
        if (want != static_cast<int64_t>(li)) continue;
        DeviceTensor copy = dev.Alloc(f32, {rows, H});
        ops.CopyRows(h, 0, copy, 0, rows);
        keep->push_back(copy);
      }
    }

    const backend::QkvLayout& layout = L.sparse_attention ? sparse : base;
    DeviceTensor qkv = qkv_buf.Rows(0, rows * layout.width()).Reshape({rows, layout.width()});
    ops.Linear(x, L.qkv_proj, nullptr, qkv);
    ops.QkNormRopeToCache(qkv, layout, L.norms, meta, q, L.sparse_attention ? &iq : nullptr, cache);
    if (L.sparse_attention) {
      ops.MsaAttention(q, iq, cache, meta, msa, shape, sel, att);
      if (capture.out && capture.block_indices) {
        std::vector<int32_t> all(Hi * rows * t.index_topk_blocks);
        dev.Download(sel, all.data());
        capture.out->emplace_back(
            "block_indices.layer" + Str(li),
            HostTensor::FromInt64({Hi, rows, t.index_topk_blocks},
                                  std::vector<int64_t>(all.begin(), all.end())));
      }
    } else {
      ops.PagedAttention(q, cache, meta, shape, att);
    }
    ops.Linear(att, L.o_proj, nullptr, delta);
    // The all-reduce of a row-parallel output and the residual add + RMSNorm after it are one
    // call, one kernel where the communicator fuses them (peer_all_reduce_communicator.h).
    if (comm_ && plan_.attention_reduce)
      comm_->AllReduceAddRmsNorm(delta, h, L.post_attention_norm, eps, x, ops);
    else
      ops.AddRmsNorm(h, &delta, L.post_attention_norm, eps, x);

    if (L.moe) {
      ops.Linear(x, L.router, nullptr, router_logits);
      // Ids local to this rank's experts; another rank's picks are -1, which MoeExperts skips.
      ops.MoeRoute(router_logits, L.router_bias, route_ids, route_w,
                   {plan_.experts.first, plan_.experts.count});
      ops.Linear(x, L.shared_gate_up, nullptr, shared_gu);
      ops.SwigluOai(shared_gu, act, shared_act);
      ops.Linear(shared_act, L.shared_down, nullptr, delta);
      ops.MoeExperts(x, route_ids, route_w, L.experts_gate_up, L.experts_down, act,
                     static_cast<float>(t.routed_scaling_factor), delta);
    } else {
      ops.Linear(x, L.mlp_gate_up, nullptr, dense_gu);
      ops.SwigluOai(dense_gu, act, dense_act);
      ops.Linear(dense_act, L.mlp_down, nullptr, delta);
    }
    // The next layer's input norm (or the final norm) goes with the MLP's all-reduce.
    const DeviceTensor& next_norm =
        li + 1 < w_.layers.size() ? w_.layers[li + 1].input_norm : w_.final_norm;
    normed = comm_ && plan_.mlp_reduce;
    if (normed) comm_->AllReduceAddRmsNorm(delta, h, next_norm, eps, x, ops);
    pending = normed ? nullptr : &delta;
  }
  if (!normed) ops.AddRmsNorm(h, pending, w_.final_norm, eps, x);
  if (wants_hidden(static_cast<int64_t>(w_.layers.size())))
    capture_float("hidden_states." + Str(static_cast<int64_t>(w_.layers.size())), x);

  const int64_t n = logits_rows ? static_cast<int64_t>(logits_rows->size()) : rows;
  const int64_t V = t.vocab_size;
  DeviceTensor picked = x;
  if (n != rows && n > 0) {
    DeviceTensor index = dev.Alloc(DType::kI32, {n});
    dev.Upload(logits_rows->data(), index);
    picked = dev.Alloc(f32, {n, H});
    ops.GatherRows(x, index, picked);
  }
  DeviceTensor out = dev.Alloc(DType::kF32, {n, V});  // float32 logits on every device
  if (n > 0 && plan_.vocab_gather) {
    DeviceTensor part = dev.Alloc(DType::kF32, {n, plan_.vocab.count});
    DeviceTensor scratch = dev.Alloc(DType::kF32, {n * V});
    ops.Linear(picked, w_.lm_head, nullptr, part);
    comm_->AllGatherColumns(part, out, scratch);
  } else if (n > 0 && takes_logits()) {
    ops.Linear(picked, w_.lm_head, nullptr, out);
  }
  return out;
}

}  // namespace m3::engine::minimax_m3
