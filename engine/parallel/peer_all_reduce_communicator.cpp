// PeerAllReduceGroup: peer access and the ranks' buffers; its communicator: the peer kernels for
// the all-reduces they take, the wrapped NCCL communicator for the rest.
#include "engine/parallel/peer_all_reduce_communicator.h"

#include <cuda_runtime.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <exception>
#include <string>

#include "engine/backend/cuda/cuda_device.h"
#include "kernels/cuda/peer_all_reduce.cuh"
#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::parallel {

namespace k = m3::kernels::cuda;

namespace {

constexpr int64_t kFlagBytes = int64_t{k::kPeerMaxBlocks} * k::kPeerMaxRanks * 4;
constexpr int64_t kControlBytes = 256;  // {epoch, blocks done}, padded
// One allocation per rank: staging (two halves), flags, control.
constexpr int64_t kRankBytes = 2 * kPeerStagingBytes + kFlagBytes + kControlBytes;

void CheckCuda(cudaError_t e, const std::string& what) {
  Require(e == cudaSuccess, ErrorCode::kUnavailable, "CUDA " + what + ": " + cudaGetErrorString(e));
}

// Puts the calling thread's current device back on leaving (Make visits every GPU).
struct RestoreDevice {
  int device = -1;
  RestoreDevice() { cudaGetDevice(&device); }
  ~RestoreDevice() {
    if (device >= 0) cudaSetDevice(device);
  }
};

void UseDevice(int device) {
  int current = -1;
  CheckCuda(cudaGetDevice(&current), "cudaGetDevice");
  if (current != device) CheckCuda(cudaSetDevice(device), "cudaSetDevice");
}

// The byte limit of the peer path: the constant, or M3_PEER_ALL_REDUCE_MAX_BYTES.
int64_t MaxBytes() {
  const char* env = std::getenv("M3_PEER_ALL_REDUCE_MAX_BYTES");
  if (env == nullptr || *env == '\0') return kPeerAllReduceMaxBytes;
  int64_t v = -1;
  const char* end = env + std::char_traits<char>::length(env);
  const auto [p, ec] = std::from_chars(env, end, v);
  Require(ec == std::errc() && p == end && v >= 0 && v <= kPeerStagingBytes,
          ErrorCode::kInvalidArgument,
          std::string("M3_PEER_ALL_REDUCE_MAX_BYTES must be a byte count in [0, ") +
              std::to_string(kPeerStagingBytes) + "], not '" + env + "'");
  return v;
}

}  // namespace

struct PeerAllReduceGroup::State {
  std::vector<int> devices;
  std::vector<void*> buffers;  // per rank, on its GPU (kRankBytes)
  int* abort_word = nullptr;   // host-mapped, read by waiting kernels
  std::atomic<bool> aborted{false};

  ~State() {
    int prev = -1;
    cudaGetDevice(&prev);
    for (size_t r = 0; r < buffers.size(); ++r)
      if (buffers[r]) {
        cudaSetDevice(devices[r]);
        cudaFree(buffers[r]);
      }
    if (abort_word) cudaFreeHost(abort_word);
    if (prev >= 0) cudaSetDevice(prev);
    cudaGetLastError();
  }
};

namespace {

class PeerAllReduceCommunicator : public Communicator {
 public:
  PeerAllReduceCommunicator(std::shared_ptr<PeerAllReduceGroup::State> state, int rank,
                            int64_t max_bytes, cudaStream_t stream,
                            std::unique_ptr<Communicator> nccl)
      : state_(std::move(state)),
        device_(state_->devices[static_cast<size_t>(rank)]),
        max_bytes_(max_bytes),
        stream_(stream),
        nccl_(std::move(nccl)) {
    ranks_.rank = rank;
    ranks_.world = static_cast<int>(state_->devices.size());
    for (int r = 0; r < ranks_.world; ++r) {
      char* base = static_cast<char*>(state_->buffers[static_cast<size_t>(r)]);
      ranks_.staging[r] = base;
      ranks_.flags[r] = reinterpret_cast<uint32_t*>(base + 2 * kPeerStagingBytes);
    }
    ranks_.control =
        reinterpret_cast<uint32_t*>(static_cast<char*>(state_->buffers[static_cast<size_t>(rank)]) +
                                    2 * kPeerStagingBytes + kFlagBytes);
    void* abort_device = nullptr;
    CheckCuda(cudaHostGetDevicePointer(&abort_device, state_->abort_word, 0),
              "mapping the abort word");
    ranks_.abort = static_cast<const volatile int*>(abort_device);
    ranks_.staging_bytes = kPeerStagingBytes;
  }

  int rank() const override { return nccl_->rank(); }
  int size() const override { return nccl_->size(); }

  void AllReduceSum(const backend::DeviceTensor& t) override {
    if (!Takes(t)) return nccl_->AllReduceSum(t);
    Ready();
    Launch("AllReduceSum", [&] {
      k::PeerAllReduceSum(ranks_, t.data<void>(),
                          t.dtype == DType::kF32 ? k::ElemType::kF32 : k::ElemType::kBF16,
                          t.numel(), stream_);
    });
  }

  void AllReduceAddRmsNorm(const backend::DeviceTensor& delta,
                           const backend::DeviceTensor& residual,
                           const backend::DeviceTensor& weight, float eps,
                           const backend::DeviceTensor& out, backend::M3Ops& ops) override {
    const int64_t dim = weight.numel();
    const bool fused = Takes(delta) && delta.dtype == DType::kBF16 &&
                       residual.dtype == DType::kBF16 && out.dtype == DType::kBF16 &&
                       weight.dtype == DType::kF32 && k::PeerAddRmsNormFits(dim) &&
                       residual.numel() == delta.numel() && out.numel() == delta.numel() &&
                       delta.numel() % dim == 0;
    if (!fused) return Communicator::AllReduceAddRmsNorm(delta, residual, weight, eps, out, ops);
    Ready();
    Launch("AllReduceAddRmsNorm", [&] {
      k::PeerAllReduceAddRmsNorm(ranks_, delta.data<k::bf16>(), residual.data<k::bf16>(),
                                 delta.numel() / dim, dim, weight.data<float>(), eps,
                                 out.data<k::bf16>(), stream_);
    });
  }

  void AllGatherRows(const backend::DeviceTensor& in, const backend::DeviceTensor& out) override {
    nccl_->AllGatherRows(in, out);
  }
  void AllGatherColumns(const backend::DeviceTensor& in, const backend::DeviceTensor& out,
                        const backend::DeviceTensor& scratch) override {
    nccl_->AllGatherColumns(in, out, scratch);
  }
  void Barrier() override { nccl_->Barrier(); }

 private:
  // Decided by dtype and size alone: the same on every rank for the same call.
  bool Takes(const backend::DeviceTensor& t) const {
    const int64_t bytes = static_cast<int64_t>(t.bytes());
    return (t.dtype == DType::kF32 || t.dtype == DType::kBF16) && bytes > 0 && bytes % 16 == 0 &&
           bytes <= max_bytes_;
  }
  void Ready() const {
    Require(!state_->aborted.load(), ErrorCode::kUnavailable,
            "peer all-reduce: the GPU group was aborted after a rank failed");
    UseDevice(device_);
  }
  template <typename Fn>
  void Launch(const char* what, Fn&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kInternal, std::string("peer all-reduce ") + what + ": " + e.what());
    }
  }

  std::shared_ptr<PeerAllReduceGroup::State> state_;
  int device_;
  int64_t max_bytes_;
  cudaStream_t stream_;
  std::unique_ptr<Communicator> nccl_;
  k::PeerAllReduceRanks ranks_;
};

}  // namespace

std::shared_ptr<PeerAllReduceGroup> PeerAllReduceGroup::Make(const std::vector<int>& devices,
                                                             bool required) {
  const int world = static_cast<int>(devices.size());
  const int64_t max_bytes = MaxBytes();
  auto unavailable = [&](const std::string& why) -> std::shared_ptr<PeerAllReduceGroup> {
    Require(!required, ErrorCode::kUnavailable, "--all-reduce custom: " + why);
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true))
      Log(LogLevel::kWarn, "peer all-reduce unavailable (", why, "): every all-reduce uses NCCL");
    return nullptr;
  };
  if (world < 2) return nullptr;  // nothing to reduce
  if (world > k::kPeerMaxRanks)
    return unavailable(std::to_string(world) + " ranks, more than the kernels' " +
                       std::to_string(k::kPeerMaxRanks));
  for (int i = 0; i < world; ++i)
    for (int j = 0; j < world; ++j) {
      if (i == j) continue;
      if (devices[i] == devices[j])
        return unavailable("ranks " + std::to_string(i) + " and " + std::to_string(j) +
                           " share cuda:" + std::to_string(devices[i]));
      int can = 0;
      CheckCuda(cudaDeviceCanAccessPeer(&can, devices[i], devices[j]), "cudaDeviceCanAccessPeer");
      if (!can)
        return unavailable("cuda:" + std::to_string(devices[i]) +
                           " has no peer access to cuda:" + std::to_string(devices[j]));
    }
  const RestoreDevice restore;
  auto group = std::shared_ptr<PeerAllReduceGroup>(new PeerAllReduceGroup());
  group->state_ = std::make_shared<State>();
  group->max_bytes_ = max_bytes;
  State& s = *group->state_;
  s.devices = devices;
  s.buffers.assign(devices.size(), nullptr);
  std::string failed;
  for (int i = 0; i < world && failed.empty(); ++i) {
    CheckCuda(cudaSetDevice(devices[i]), "cudaSetDevice");
    for (int j = 0; j < world && failed.empty(); ++j) {
      if (i == j) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(devices[j], 0);
      // NCCL may have enabled it already in this process.
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        cudaGetLastError();
      else if (e != cudaSuccess)
        failed = "enabling peer access from cuda:" + std::to_string(devices[i]) +
                 " to cuda:" + std::to_string(devices[j]) + ": " + cudaGetErrorString(e);
    }
    if (!failed.empty()) break;
    CheckCuda(cudaMalloc(&s.buffers[static_cast<size_t>(i)], kRankBytes),
              "peer all-reduce buffers");
    // Flags and epochs start at 0 (the first call's epoch is 1); staging needs no clearing.
    CheckCuda(
        cudaMemset(static_cast<char*>(s.buffers[static_cast<size_t>(i)]) + 2 * kPeerStagingBytes, 0,
                   kFlagBytes + kControlBytes),
        "clearing the peer flags");
  }
  if (failed.empty())
    CheckCuda(cudaHostAlloc(reinterpret_cast<void**>(&s.abort_word), sizeof(int),
                            cudaHostAllocMapped | cudaHostAllocPortable),
              "the peer all-reduce abort word");
  if (!failed.empty()) {
    cudaGetLastError();
    return unavailable(failed);
  }
  *reinterpret_cast<volatile int*>(s.abort_word) = 0;
  return group;
}

PeerAllReduceGroup::~PeerAllReduceGroup() = default;

std::unique_ptr<Communicator> PeerAllReduceGroup::Wrap(int rank, backend::Device& device,
                                                       std::unique_ptr<Communicator> nccl) {
  Require(
      rank >= 0 && rank < static_cast<int>(state_->devices.size()) && nccl && nccl->rank() == rank,
      ErrorCode::kInternal, "PeerAllReduceGroup::Wrap: rank out of range");
  return std::make_unique<PeerAllReduceCommunicator>(
      state_, rank, max_bytes_, static_cast<cudaStream_t>(backend::CudaDeviceStream(device)),
      std::move(nccl));
}

void PeerAllReduceGroup::Abort() {
  state_->aborted.store(true);
  *reinterpret_cast<volatile int*>(state_->abort_word) = 1;
}

}  // namespace m3::engine::parallel
