// M3Runner: info from the config, media splitting, Encode with pixel checks, KV storage and
// Execute delegated to the decoder graph.
#include "engine/minimax_m3/m3_runner.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>

#include "engine/backend/device_encoder_output.h"
#include "engine/backend/make_device.h"
#include "engine/backend/make_m3_ops.h"
#include "engine/minimax_m3/m3_config.h"
#include "engine/minimax_m3/m3_decoder_graph.h"
#include "engine/minimax_m3/m3_memory_plan.h"
#include "engine/minimax_m3/m3_model_weights.h"
#include "engine/minimax_m3/m3_shard_plan.h"
#include "engine/minimax_m3/m3_vision.h"
#include "engine/parallel/in_process_communicator.h"
#include "engine/parallel/nccl_communicator.h"
#include "engine/parallel/parallel_runner.h"
#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::minimax_m3 {
namespace {

class M3Runner : public ModelRunner {
 public:
  // plan / comm: this runner is one rank of a parallel group (null: the whole model).
  // store null: dummy weights (options.dummy_weights) in the formats `quant` gives.
  M3Runner(ModelConfig config, std::unique_ptr<backend::Device> device, const WeightStore* store,
           const backend::QuantConfig& quant, const RunnerOptions& options,
           const ShardPlan* plan = nullptr, std::unique_ptr<parallel::Communicator> comm = nullptr,
           SharedPageRelease* shared_pages = nullptr)
      : config_(std::move(config)),
        device_(std::move(device)),
        ops_(backend::MakeM3Ops(*device_)),
        comm_(std::move(comm)) {
    LoadReport report;
    try {
      if (store)
        weights_ = LoadM3ModelWeights(*store, config_, *device_, report, plan, shared_pages);
      else
        weights_ = DrawM3DummyWeights(config_, quant, *device_, report, plan);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kResourceExhausted) throw;
      throw Error(e.code(), "the weights do not fit on " + device_->name() + " (" +
                                std::to_string(device_->weight_bytes() >> 20) +
                                " MiB of weights uploaded before): " + e.what());
    }
    DecoderStepLimits limits;
    limits.max_num_seqs = options.max_num_seqs;
    limits.max_batched_tokens = options.max_batched_tokens;
    limits.max_logits_per_seq = std::max<int64_t>(options.max_logits_per_seq, 1);
    limits.graph_hidden_layers = std::max<int64_t>(options.draft_hidden_layers, 0);
    // Graphs where the device records them (CUDA); the CPU device runs op by op. Decode steps
    // take the graphs' bucket shapes whether or not they are recorded (graphs change no result).
    limits.decode_buckets = device_->name().rfind("cuda", 0) == 0;
    limits.graphs = options.cuda_graphs && limits.decode_buckets;
    const TextConfig& t = config_.text;
    const bool any_sparse = std::find(t.sparse_attention.begin(), t.sparse_attention.end(), true) !=
                            t.sparse_attention.end();
    limits.fp8_index_keys = options.fp8_index_keys && any_sparse;
    // The GPU's FP8 scoring kernels exist for the released model's index shapes only.
    Require(!limits.fp8_index_keys || device_->name() == "cpu" ||
                (t.index_head_dim == 128 && t.index_block_size == 128),
            ErrorCode::kUnsupported,
            "FP8 index keys on " + device_->name() +
                " need index_head_dim 128 and index_block_size 128 (this model has " +
                std::to_string(t.index_head_dim) + " and " + std::to_string(t.index_block_size) +
                ")");
    // Dynamic scales, one per (slot, kv head) written with the codes: a checkpoint's static KV
    // scales (quantization_config's kv_cache_quant_algo, k_scale / v_scale tensors) are not
    // read; the released M3 checkpoints declare none (kv_cache_quant_algo null).
    limits.fp8_kv_cache = options.fp8_kv_cache;
    graph_ = std::make_unique<M3DecoderGraph>(config_, weights_, *device_, *ops_, limits, plan,
                                              comm_.get());
    const VisionConfig& v = config_.vision;
    info_.architecture = config_.model_type;
    info_.dtype = std::string(DTypeName(device_->activation_dtype()));
    info_.kv_cache_dtype = options.fp8_kv_cache ? DTypeName(DType::kF8E4M3) : info_.dtype;
    info_.device = device_->name();
    info_.weight_bytes = report.device_bytes;
    info_.ranks = {{device_->name(), report.device_bytes}};
    info_.vocab_size = t.vocab_size;
    info_.hidden_size = t.hidden_size;
    info_.num_layers = t.num_hidden_layers;
    info_.max_model_len = t.max_position_embeddings;
    info_.eos_token_ids = config_.eos_token_ids();
    info_.bos_token_id = t.bos_token_id;
    info_.image_token_id = config_.image_token_id;
    info_.video_token_id = config_.video_token_id;
    info_.patch_dim = v.patch_dim();
    info_.patch_size = v.patch_size;
    info_.temporal_patch_size = v.temporal_patch_size;
    info_.spatial_merge_size = v.spatial_merge_size;
    info_.vision_segment_max_frames = v.vision_segment_max_frames;
    info_.msa_block_size = any_sparse ? t.index_block_size : 0;
  }

  const RunnerInfo& info() const override { return info_; }

  std::vector<MediaSegment> SplitMedia(bool video, std::array<int64_t, 3> g) const override {
    const int64_t m = config_.vision.spatial_merge_size;
    const auto [t, h, w] = g;
    const std::string where = std::string(video ? "video" : "image") + " grid_thw (" +
                              std::to_string(t) + ", " + std::to_string(h) + ", " +
                              std::to_string(w) + ")";
    Require(t > 0 && h > 0 && w > 0, ErrorCode::kInvalidArgument, where + " must be positive");
    Require(h % m == 0 && w % m == 0, ErrorCode::kInvalidArgument,
            where + ": height and width must be divisible by the merge size " + std::to_string(m));
    Require(t <= (int64_t{1} << 20) && h <= (int64_t{1} << 20) && w <= (int64_t{1} << 20),
            ErrorCode::kInvalidArgument, where + " is implausibly large");
    // An image is one segment whatever its t (the processor gives images t = 1).
    const int64_t max_frames = video ? config_.vision.vision_segment_max_frames : 0;
    std::vector<MediaSegment> out;
    int64_t patch = 0, token = 0;
    for (const GridThw& s : VisionSegments({GridThw{t, h, w}}, max_frames)) {
      MediaSegment seg;
      seg.patch_offset = patch;
      seg.patch_rows = s[0] * s[1] * s[2];
      seg.grid_thw = s;
      seg.tokens = seg.patch_rows / (m * m);
      seg.token_offset = token;
      patch += seg.patch_rows;
      token += seg.tokens;
      out.push_back(seg);
    }
    return out;
  }

  std::shared_ptr<const EncoderOutput> Encode(const float* patches,
                                              const MediaSegment& segment) override {
    const int64_t rows = segment.patch_rows, pd = info_.patch_dim;
    const int64_t m = config_.vision.spatial_merge_size;
    Require(rows == segment.grid_thw[0] * segment.grid_thw[1] * segment.grid_thw[2] &&
                segment.tokens * m * m == rows,
            ErrorCode::kInvalidArgument, "media segment rows do not match its grid");
    for (int64_t i = 0; i < rows * pd; ++i)
      if (!std::isfinite(patches[i]))
        throw Error(ErrorCode::kInvalidArgument,
                    "pixel_values[" + std::to_string(segment.patch_offset + i / pd) + ", " +
                        std::to_string(i % pd) + "] is not a finite number");
    NamedTensors* cap = capture_.out && capture_.vision ? capture_.out : nullptr;
    return std::make_shared<backend::DeviceEncoderOutput>(
        EncodeVisionSegment(*device_, *ops_, weights_, config_, patches, segment.grid_thw, cap));
  }

  int64_t KvBytesPerPage(int64_t page_size) const override {
    return graph_->KvBytesPerPage(page_size);
  }
  void AllocateKvCache(int64_t num_pages, int64_t page_size) override {
    graph_->AllocateKvCache(num_pages, page_size);
  }
  int64_t num_pages() const override { return graph_->num_pages(); }
  int64_t page_size() const override { return graph_->page_size(); }

  void Execute(const ForwardBatch& batch, std::vector<float>& logits) override {
    graph_->Execute(batch, logits, capture_);
  }
  // Sampled on the device where the logits lie (SampleRows).
  void ExecuteAndSample(const ForwardBatch& batch, std::span<const SampleRow> rows,
                        std::vector<SampledToken>& out) override {
    out.clear();
    graph_->Execute(
        batch, [&](const backend::DeviceTensor& logits) { device_->SampleRows(logits, rows, out); },
        capture_);
  }

  void SetCapture(const CaptureRequest& capture) override { capture_ = capture; }

 private:
  ModelConfig config_;
  std::unique_ptr<backend::Device> device_;
  std::unique_ptr<backend::M3Ops> ops_;  // on *device_
  std::unique_ptr<parallel::Communicator> comm_;
  M3ModelWeights weights_;
  std::unique_ptr<M3DecoderGraph> graph_;
  RunnerInfo info_;
  CaptureRequest capture_;
};

}  // namespace

namespace {

// The device of rank `rank`: "cpu" for all, or consecutive GPUs from the one named.
std::string RankDevice(const std::string& device, int rank) {
  if (device == "cpu") return device;
  Require(device.rfind("cuda", 0) == 0, ErrorCode::kUnsupported,
          "tensor / expert parallelism runs on --device cpu or cuda[:N], not '" + device + "'");
  int first = 0;
  if (device != "cuda") {
    const char* b = device.data() + 5;
    const char* e = device.data() + device.size();
    const auto [end, ec] = std::from_chars(b, e, first);
    Require(device[4] == ':' && ec == std::errc() && end == e && first >= 0,
            ErrorCode::kInvalidArgument, "device '" + device + "' is not cpu, cuda or cuda:N");
  }
  return "cuda:" + std::to_string(first + rank);
}

std::unique_ptr<ModelRunner> LoadParallel(const std::string& model_dir,
                                          const RunnerOptions& options) {
  const ModelConfig config = LoadModelConfig(model_dir);
  CheckM3Config(config);
  const int world = std::max(options.tensor_parallel, options.expert_parallel);
  const parallel::AllReduceMode all_reduce = parallel::ParseAllReduceMode(options.all_reduce);
  std::vector<ShardPlan> plans;
  for (int r = 0; r < std::max(world, 1); ++r)
    plans.push_back(
        MakeShardPlan(config.text, options.tensor_parallel, options.expert_parallel, r));
  // CPU ranks meet in memory; GPU ranks through NCCL, one GPU each (consecutive devices).
  std::shared_ptr<parallel::InProcessGroup> cpu_group;
  std::shared_ptr<parallel::NcclGroup> gpu_group;
  std::vector<std::string> devices;
  for (int r = 0; r < world; ++r) devices.push_back(RankDevice(options.device, r));
  if (options.device == "cpu") {
    cpu_group = std::make_shared<parallel::InProcessGroup>(world);
  } else {
    const std::string what = "tensor parallel " + std::to_string(options.tensor_parallel) +
                             " / expert parallel " + std::to_string(options.expert_parallel) +
                             " on " + options.device + ": ";
    try {
      backend::MakeDevice(devices.front());  // no driver / GPU: said as for one GPU
    } catch (const Error& e) {
      throw Error(e.code(), what + e.what());
    }
    std::vector<int> ids;
    for (const std::string& d : devices) ids.push_back(std::stoi(d.substr(5)));
    try {
      // Checks the GPU count.
      gpu_group = std::make_shared<parallel::NcclGroup>(ids, all_reduce);
    } catch (const Error& e) {
      throw Error(e.code(), what + e.what());
    }
    Log(LogLevel::kInfo, "tensor / expert parallel on ", world, " GPUs: all-reduces on ",
        gpu_group->peer_all_reduce() ? "the peer kernels (NVLink) for decode-sized messages, NCCL "
                                       "for larger ones"
                                     : "NCCL");
  }
  // Dummy weights read no file: config.json and the quantization config describe the model.
  std::optional<WeightStore> store;
  backend::QuantConfig quant;
  if (options.dummy_weights)
    quant = backend::LoadQuantConfig(model_dir);
  else
    store = WeightStore::OpenDirectory(model_dir);
  CheckWeightsFit(config, plans, devices,
                  store ? FormatsFromStore(*store) : FormatsFromQuantConfig(quant));
  SharedPageRelease shared_pages(world);
  // A CPU rank failing mid-step releases the others from the collectives they wait in; GPU
  // ranks waiting for a failed peer inside NCCL kernels are released by aborting the group,
  // which stops it for good (the engine then answers every request with the cause).
  parallel::GroupFailureHooks hooks;
  if (cpu_group) {
    hooks.abort = [cpu_group](int) { cpu_group->Abort(); };
    hooks.reset = [cpu_group] { cpu_group->Reset(); };
  } else {
    hooks.stuck = [gpu_group] { gpu_group->Abort(); };
  }
  auto make = [&](int r) -> std::unique_ptr<ModelRunner> {
    const std::string& device = devices[static_cast<size_t>(r)];
    std::unique_ptr<backend::Device> dev;
    try {
      dev = backend::MakeDevice(device);
    } catch (const Error& e) {
      throw Error(e.code(), "rank " + std::to_string(r) + " of " + std::to_string(world) +
                                " (device " + device + "): " + e.what());
    }
    std::unique_ptr<parallel::Communicator> comm;
    if (cpu_group)
      comm = std::make_unique<parallel::InProcessCommunicator>(cpu_group, r);
    else
      comm = gpu_group->Bind(r, *dev);
    return std::make_unique<M3Runner>(config, std::move(dev), store ? &*store : nullptr, quant,
                                      options, &plans[static_cast<size_t>(r)], std::move(comm),
                                      &shared_pages);
  };
  return parallel::MakeParallelRunner(world, make, hooks);
}

}  // namespace

std::unique_ptr<ModelRunner> LoadMiniMaxM3Runner(const std::string& model_dir,
                                                 const RunnerOptions& options) {
  if (options.tensor_parallel != 1 || options.expert_parallel != 1)
    return LoadParallel(model_dir, options);
  // The device first: a missing driver or GPU is reported before any file is read.
  std::unique_ptr<backend::Device> device = backend::MakeDevice(options.device);
  ModelConfig config = LoadModelConfig(model_dir);
  // Dummy weights read no file: config.json and the quantization config describe the model.
  std::optional<WeightStore> store;
  backend::QuantConfig quant;
  if (options.dummy_weights)
    quant = backend::LoadQuantConfig(model_dir);
  else
    store = WeightStore::OpenDirectory(model_dir);
  if (device->name() != "cpu") {
    CheckM3Config(config);
    CheckWeightsFit(config, {SingleRankPlan(config.text)}, {device->name()},
                    store ? FormatsFromStore(*store) : FormatsFromQuantConfig(quant));
  }
  return std::make_unique<M3Runner>(std::move(config), std::move(device), store ? &*store : nullptr,
                                    quant, options);
}

}  // namespace m3::engine::minimax_m3
