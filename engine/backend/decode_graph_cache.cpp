// DecodeGraphCache: bucket choice, the packed input buffer of each bucket, recording on first
// use and replay with the step's inputs written into that buffer.
#include "engine/backend/decode_graph_cache.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::backend {
namespace {

int64_t Align(int64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// A typed view of `bytes` bytes of the packed input buffer.
DeviceTensor View(const DeviceTensor& buf, int64_t& at, DType dtype, Shape shape) {
  DeviceTensor t;
  t.buffer = buf.buffer;
  t.offset = buf.offset + static_cast<size_t>(at);
  t.dtype = dtype;
  t.shape = std::move(shape);
  at += Align(static_cast<int64_t>(t.bytes()));
  return t;
}

}  // namespace

DecodeGraphCache::DecodeGraphCache(Device& device, int64_t max_rows, int64_t max_width,
                                   int64_t page_size, int32_t pad_page, int64_t rotary_dim,
                                   bool record)
    : device_(device),
      buckets_(RowBuckets(max_rows)),
      max_width_(WidthBucket(max_width)),
      page_size_(page_size),
      rotary_dim_(rotary_dim),
      pad_page_(pad_page),
      record_(record) {}

std::vector<int64_t> DecodeGraphCache::RowBuckets(int64_t max_rows) {
  std::vector<int64_t> out;
  for (int64_t r : {1, 2, 4, 8, 16, 24, 32}) {
    if (!out.empty() && out.back() >= max_rows) break;
    out.push_back(r);
  }
  while (!out.empty() && out.back() < max_rows) out.push_back(out.back() + 16);
  return out;
}

int64_t DecodeGraphCache::RowBucket(int64_t rows) const {
  const auto it = std::lower_bound(buckets_.begin(), buckets_.end(), rows);
  return it == buckets_.end() ? 0 : *it;
}

int64_t DecodeGraphCache::WidthBucket(int64_t width) const {
  int64_t w = 1;
  while (w < width) w *= 2;
  return w;
}

DecodeGraphCache::Entry& DecodeGraphCache::Get(int64_t seqs, int64_t width, int64_t q) {
  Entry& e = entries_[{seqs, width, q}];
  if (e.inputs) return e;
  e.rows = seqs;
  e.width = width;
  e.q = q;
  const int64_t S = seqs, R = seqs * q, W = width, rot = rotary_dim_;
  const int64_t bytes = Align(R * 4) * 2 + Align((S + 1) * 4) + Align(S * 4) + Align(S * W * 4) +
                        Align(R * 8) + 2 * Align(R * rot * 4);
  e.inputs = device_.Alloc(DType::kI32, {bytes / 4});
  e.host.assign(static_cast<size_t>(bytes), 0);
  int64_t at = 0;
  StepMetadata& m = e.meta;
  e.ids = View(e.inputs, at, DType::kI32, {R});
  m.positions = View(e.inputs, at, DType::kI32, {R});
  m.query_start = View(e.inputs, at, DType::kI32, {S + 1});
  m.context_lens = View(e.inputs, at, DType::kI32, {S});
  m.block_tables = View(e.inputs, at, DType::kI32, {S, W});
  m.slot_mapping = View(e.inputs, at, DType::kI64, {R});
  m.rope_cos = View(e.inputs, at, DType::kF32, {R, rot});
  m.rope_sin = View(e.inputs, at, DType::kF32, {R, rot});
  m.rows = R;
  m.seqs = S;
  m.num_decodes = q == 1 ? S : 0;
  m.page_size = page_size_;
  m.max_pages_per_seq = W;
  m.max_query_len = q;
  // The capacity of the tables, not this step's longest context: launch shapes must not
  // depend on the contexts the graph is replayed with.
  m.max_seq_len = W * page_size_;
  m.batch = nullptr;
  return e;
}

int64_t DecodeGraphCache::UniformQueryRows(const ForwardBatch& b) {
  const int64_t seqs = b.num_seqs(), rows = b.num_rows();
  if (seqs <= 0 || rows % seqs != 0 || !b.media.empty() ||
      static_cast<int64_t>(b.logits_rows.size()) != rows)
    return 0;
  const int64_t q = rows / seqs;
  if (b.num_decodes != (q == 1 ? seqs : 0)) return 0;
  for (int64_t s = 0; s < seqs; ++s)
    if (b.query_start[s + 1] - b.query_start[s] != q) return 0;
  return q;
}

bool DecodeGraphCache::Run(const ForwardBatch& b, std::span<const float> cos,
                           std::span<const float> sin, const Forward& forward,
                           const std::function<void(const DeviceTensor&)>& take, int64_t max_rows) {
  const int64_t n = b.num_rows();
  const int64_t q = UniformQueryRows(b);
  if (q <= 0 || q > page_size_) return false;
  const int64_t seqs = b.num_seqs();
  const int64_t S = RowBucket(seqs), W = WidthBucket(b.max_pages_per_seq), rot = rotary_dim_;
  if (S == 0 || W > max_width_ || (q > 1 && S * q > max_rows)) return false;
  Entry& e = Get(S, W, q);
  if (e.failed) return false;
  const int64_t R = S * q;

  // The inputs' host image: the batch's rows, then padding sequences (token 0 at positions
  // 0 .. q - 1 of a sequence on the pad page).
  uint8_t* h = e.host.data();
  int64_t at = 0;
  auto section = [&](int64_t bytes) {
    uint8_t* p = h + at;
    at += Align(bytes);
    return p;
  };
  auto* ids = reinterpret_cast<int32_t*>(section(R * 4));
  auto* pos = reinterpret_cast<int32_t*>(section(R * 4));
  auto* qs = reinterpret_cast<int32_t*>(section((S + 1) * 4));
  auto* ctx = reinterpret_cast<int32_t*>(section(S * 4));
  auto* tables = reinterpret_cast<int32_t*>(section(S * W * 4));
  auto* slots = reinterpret_cast<int64_t*>(section(R * 8));
  auto* c = reinterpret_cast<float*>(section(R * rot * 4));
  auto* s = reinterpret_cast<float*>(section(R * rot * 4));
  const int64_t bw = b.max_pages_per_seq;
  std::fill(tables, tables + S * W, -1);
  for (int64_t i = 0; i < S; ++i) {
    const bool real = i < seqs;
    qs[i] = static_cast<int32_t>(i * q);
    ctx[i] = real ? b.context_lens[i] : 0;
    if (real)
      std::copy(b.block_tables.begin() + i * bw, b.block_tables.begin() + (i + 1) * bw,
                tables + i * W);
    else
      tables[i * W] = pad_page_;
    for (int64_t j = 0; j < q; ++j) {
      const int64_t r = i * q + j;
      ids[r] = real ? b.token_ids[r] : 0;
      pos[r] = real ? b.positions[r] : static_cast<int32_t>(j);
      slots[r] = real ? b.slot_mapping[r] : int64_t{pad_page_} * page_size_ + j;
      for (int64_t k = 0; k < rot; ++k) {
        c[r * rot + k] = real ? cos[r * rot + k] : 1.0f;
        s[r * rot + k] = real ? sin[r * rot + k] : 0.0f;
      }
    }
  }
  qs[S] = static_cast<int32_t>(R);

  device_.Upload(e.host.data(), e.inputs);
  if (!record_) {
    device_.BeginStep();
    struct EndStep {
      Device& be;
      ~EndStep() { be.EndStep(); }
    } end_step{device_};
    const DeviceTensor logits = forward(e.meta, e.ids);
    ++replays_;
    take(logits.Rows(0, n));
    return true;
  }
  if (!e.graph) {
    const auto start = std::chrono::steady_clock::now();
    device_.BeginStep();
    struct EndStep {
      Device& be;
      ~EndStep() { be.EndStep(); }
    } end_step{device_};
    // Once op by op first (its results are the replay's: same inputs), so every buffer the ops
    // size on first use (kernel scratch, cuBLAS heuristics) exists before the recording.
    forward(e.meta, e.ids);
    device_.BeginStep();  // the recording takes the workspace from its start again
    try {
      e.graph = device_.Record([&] { e.logits = forward(e.meta, e.ids); });
      e.workspace_end = device_.StepWorkspaceUsed();
    } catch (const Error& what) {
      // An op that could not be recorded (e.g. a workspace it needs is missing): this bucket
      // runs op by op, where the same error, if it is one, surfaces.
      Log(LogLevel::kWarn, "decode graphs: recording failed: ", what.what());
      e.graph = nullptr;
    }
    if (!e.graph) {
      e.failed = true;
      Log(LogLevel::kWarn, "decode graphs: bucket of ", S, " sequences x ", q, " rows x ", W,
          " pages cannot be recorded; its steps run op by op");
      return false;
    }
    ++recorded_;
    last_operations_ = e.graph->operations();
    Log(LogLevel::kInfo, "decode graphs: recorded the bucket of ", S, " sequences x ", q,
        " rows x ", W, " pages in ",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
        " ms (", recorded_, " recorded)");
  }
  e.graph->Replay();
  ++replays_;
  // What reads the logits (device sampling) takes its buffers from the step workspace above
  // the graph's, which hold the logits.
  device_.BeginStep(e.workspace_end);
  struct EndStep {
    Device& be;
    ~EndStep() { be.EndStep(); }
  } end_step{device_};
  take(e.logits.Rows(0, n));
  return true;
}

}  // namespace m3::engine::backend
