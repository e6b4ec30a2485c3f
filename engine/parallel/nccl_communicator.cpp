// NcclCommunicator: NCCL entry points resolved from libnccl.so.2 at run time, AllReduce /
// AllGather / Barrier on the CUDA device's stream.
#include "engine/parallel/nccl_communicator.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "engine/backend/cuda/cuda_device.h"
#include "engine/parallel/peer_all_reduce_communicator.h"
#include "shared/error.h"

namespace m3::engine::parallel {

struct NcclGroup::State {
  std::shared_mutex mu;      // collectives share it; Abort and destruction take it alone
  bool aborted = false;      // after Abort every handle is gone (ncclCommAbort freed them)
  std::vector<void*> comms;  // ncclComm_t per rank
  std::vector<bool> bound;   // handed to a communicator, which destroys it
};

namespace {

struct NcclApi {
  decltype(&ncclCommInitAll) CommInitAll = nullptr;
  decltype(&ncclCommDestroy) CommDestroy = nullptr;
  decltype(&ncclCommAbort) CommAbort = nullptr;
  decltype(&ncclAllReduce) AllReduce = nullptr;
  decltype(&ncclAllGather) AllGather = nullptr;
  decltype(&ncclGetErrorString) GetErrorString = nullptr;
};

const NcclApi& Nccl() {
  static const NcclApi api = [] {
    NcclApi a;
    void* lib = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = ::dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    Require(lib != nullptr, ErrorCode::kUnavailable,
            "tensor / expert parallelism on GPUs needs NCCL: libnccl.so.2 could not be loaded "
            "(add the CUDA toolkit's lib directory to LD_LIBRARY_PATH)");
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
      Require(fn != nullptr, ErrorCode::kUnavailable, std::string("libnccl.so.2 lacks ") + name);
    };
    get(a.CommInitAll, "ncclCommInitAll");
    get(a.CommDestroy, "ncclCommDestroy");
    get(a.CommAbort, "ncclCommAbort");
    get(a.AllReduce, "ncclAllReduce");
    get(a.AllGather, "ncclAllGather");
    get(a.GetErrorString, "ncclGetErrorString");
    return a;
  }();
  return api;
}

void Check(ncclResult_t r, const std::string& what) {
  Require(r == ncclSuccess, ErrorCode::kUnavailable,
          "NCCL " + what + ": " + Nccl().GetErrorString(r));
}

void CheckCuda(cudaError_t e, const std::string& what) {
  Require(e == cudaSuccess, ErrorCode::kUnavailable, "CUDA " + what + ": " + cudaGetErrorString(e));
}

// The rank's thread normally has its GPU current already (its device bound it); switching
// only when not keeps the call out of recorded graphs' way.
void UseDevice(int device) {
  int current = -1;
  CheckCuda(cudaGetDevice(&current), "cudaGetDevice");
  if (current != device) CheckCuda(cudaSetDevice(device), "cudaSetDevice");
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<NcclGroup::State> state, int rank, int size, int device,
                   backend::Device& gpu)
      : state_(std::move(state)),
        rank_(rank),
        size_(size),
        device_(device),
        stream_(static_cast<cudaStream_t>(backend::CudaDeviceStream(gpu))) {
    // A device scalar for Barrier, allocated once (collectives allocate nothing per call).
    barrier_ = gpu.Alloc(DType::kF32, {1});
  }
  ~NcclCommunicator() override {
    std::unique_lock<std::shared_mutex> lock(state_->mu);
    void*& c = state_->comms[static_cast<size_t>(rank_)];
    if (!state_->aborted && c) Nccl().CommDestroy(static_cast<ncclComm_t>(c));
    c = nullptr;
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void AllReduceSum(const backend::DeviceTensor& t) override {
    Require(t.dtype == DType::kF32 || t.dtype == DType::kBF16, ErrorCode::kInternal,
            "AllReduceSum: float32 or bfloat16 tensors only");
    void* p = t.data<void>();
    UseDevice(device_);
    const Held comm(*this);
    Check(Nccl().AllReduce(p, p, static_cast<size_t>(t.numel()),
                           t.dtype == DType::kF32 ? ncclFloat32 : ncclBfloat16, ncclSum, comm.get(),
                           stream_),
          "AllReduce");
  }

  void AllGatherRows(const backend::DeviceTensor& in, const backend::DeviceTensor& out) override {
    Require(out.dtype == in.dtype && out.numel() == in.numel() * size_, ErrorCode::kInternal,
            "AllGatherRows: out must hold every rank's input");
    UseDevice(device_);
    const Held comm(*this);
    Check(Nccl().AllGather(in.data<void>(), out.data<void>(), in.bytes(), ncclInt8, comm.get(),
                           stream_),
          "AllGather");
  }

  // ncclAllGather stacks the ranks' [rows, cols] blocks in scratch; one 2-D copy per rank
  // moves each block into its columns of out (stream-ordered, so graphs can record it).
  void AllGatherColumns(const backend::DeviceTensor& in, const backend::DeviceTensor& out,
                        const backend::DeviceTensor& scratch) override {
    const int64_t rows = in.rows();
    Require(out.dtype == in.dtype && out.rows() == rows && out.numel() == in.numel() * size_ &&
                scratch.numel() >= in.numel() * size_,
            ErrorCode::kInternal, "AllGatherColumns: out [rows, size * cols] and scratch");
    UseDevice(device_);
    {
      const Held comm(*this);
      Check(Nccl().AllGather(in.data<void>(), scratch.data<void>(), in.bytes(), ncclInt8,
                             comm.get(), stream_),
            "AllGather");
    }
    const size_t piece = rows > 0 ? in.bytes() / static_cast<size_t>(rows) : 0;
    for (int r = 0; r < size_; ++r)
      CheckCuda(
          cudaMemcpy2DAsync(out.data<uint8_t>() + piece * static_cast<size_t>(r),
                            piece * static_cast<size_t>(size_),
                            scratch.data<uint8_t>() + in.bytes() * static_cast<size_t>(r), piece,
                            piece, static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream_),
          "gathered logits copy");
  }

  void Barrier() override {
    AllReduceSum(barrier_);
    CheckCuda(cudaStreamSynchronize(stream_), "stream synchronize");
  }

 private:
  // This rank's handle, held (shared) while a collective is queued, so Abort (exclusive) never
  // frees it under the call; throws once the group was aborted.
  class Held {
   public:
    explicit Held(const NcclCommunicator& c) : lock_(c.state_->mu) {
      Require(!c.state_->aborted, ErrorCode::kUnavailable,
              "NCCL: the GPU group was aborted after a rank failed");
      comm_ = static_cast<ncclComm_t>(c.state_->comms[static_cast<size_t>(c.rank_)]);
    }
    ncclComm_t get() const { return comm_; }

   private:
    std::shared_lock<std::shared_mutex> lock_;
    ncclComm_t comm_ = nullptr;
  };

  std::shared_ptr<NcclGroup::State> state_;
  int rank_, size_, device_;
  cudaStream_t stream_;
  backend::DeviceTensor barrier_;
};

}  // namespace

bool BuiltWithNccl() {
  return true;
}

NcclGroup::NcclGroup(const std::vector<int>& devices, AllReduceMode mode)
    : devices_(devices), state_(std::make_shared<State>()) {
  int count = 0;
  CheckCuda(cudaGetDeviceCount(&count), "counting GPUs");
  for (int d : devices)
    Require(d >= 0 && d < count, ErrorCode::kInvalidArgument,
            std::to_string(devices.size()) + " ranks need GPU cuda:" + std::to_string(d) +
                ", and this machine has " + std::to_string(count) + " GPU(s)");
  const NcclApi& api = Nccl();
  // Connections made now rather than at the first collective: a rank that fails before its
  // first collective then cannot leave a peer blocked on the host inside NCCL (where Abort
  // would wait for it).
  ::setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  std::vector<ncclComm_t> comms(devices.size());
  Check(api.CommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()),
        "setting up " + std::to_string(devices.size()) + " GPUs");
  for (ncclComm_t c : comms) state_->comms.push_back(c);
  state_->bound.assign(devices.size(), false);
  // After NCCL (which may have enabled peer access itself); a failure here leaves the NCCL
  // handles to the destructor.
  if (mode != AllReduceMode::kNccl) {
    try {
      peer_ = PeerAllReduceGroup::Make(devices, mode == AllReduceMode::kCustom);
    } catch (...) {
      for (void*& c : state_->comms) {
        Nccl().CommDestroy(static_cast<ncclComm_t>(c));
        c = nullptr;
      }
      throw;
    }
  }
}

NcclGroup::~NcclGroup() {
  // Handles never bound to a communicator; bound ones go with their communicator.
  std::unique_lock<std::shared_mutex> lock(state_->mu);
  if (state_->aborted) return;
  for (size_t r = 0; r < state_->comms.size(); ++r)
    if (!state_->bound[r] && state_->comms[r]) {
      Nccl().CommDestroy(static_cast<ncclComm_t>(state_->comms[r]));
      state_->comms[r] = nullptr;
    }
}

std::unique_ptr<Communicator> NcclGroup::Bind(int rank, backend::Device& device) {
  {
    std::unique_lock<std::shared_mutex> lock(state_->mu);
    Require(rank >= 0 && rank < static_cast<int>(state_->comms.size()) &&
                !state_->bound[static_cast<size_t>(rank)],
            ErrorCode::kInternal, "NcclGroup::Bind: rank out of range or bound twice");
    state_->bound[static_cast<size_t>(rank)] = true;
  }
  auto nccl =
      std::make_unique<NcclCommunicator>(state_, rank, static_cast<int>(state_->comms.size()),
                                         devices_[static_cast<size_t>(rank)], device);
  if (peer_) return peer_->Wrap(rank, device, std::move(nccl));
  return nccl;
}

int64_t NcclGroup::peer_max_bytes() const {
  return peer_ ? peer_->max_bytes() : 0;
}

void NcclGroup::Abort() {
  if (peer_) peer_->Abort();  // first: its kernels spin rather than wait inside NCCL
  std::unique_lock<std::shared_mutex> lock(state_->mu);
  if (state_->aborted) return;
  state_->aborted = true;
  for (void*& c : state_->comms)
    if (c) {
      Nccl().CommAbort(static_cast<ncclComm_t>(c));
      c = nullptr;
    }
}

}  // namespace m3::engine::parallel
