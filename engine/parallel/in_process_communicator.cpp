// InProcessCommunicator: the rendezvous protocol and the rank-ordered reduction.
#include "engine/parallel/in_process_communicator.h"

#include <cstring>
#include <string>

#include "shared/dtype.h"
#include "shared/error.h"

namespace m3::engine::parallel {

InProcessGroup::InProcessGroup(int size)
    : size_(size), posted_(static_cast<size_t>(size), nullptr) {
  Require(size >= 1, ErrorCode::kInvalidArgument, "communicator group size must be >= 1");
}

void InProcessGroup::Abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

void InProcessGroup::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = false;
  arrived_ = 0;
  ++generation_;
}

void InProcessGroup::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto fail = [] {
    throw Error(ErrorCode::kInternal, "collective aborted: another rank of the group failed");
  };
  if (aborted_) fail();
  const uint64_t generation = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
  if (generation_ == generation) fail();
}

InProcessCommunicator::InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {
  Require(rank_ >= 0 && rank_ < group_->size(), ErrorCode::kInvalidArgument,
          "communicator rank " + std::to_string(rank_) + " outside the group");
}

void InProcessCommunicator::Barrier() {
  group_->Wait();
}

void InProcessCommunicator::Post(const backend::DeviceTensor& t) {
  group_->posted_[static_cast<size_t>(rank_)] = &t;
  group_->Wait();
  // Every rank checks every tensor, so a mismatch throws on all of them (no rank is left
  // waiting at the next barrier).
  for (const backend::DeviceTensor* o : group_->posted_) {
    if (o->dtype != t.dtype || o->numel() != t.numel()) {
      group_->Wait();
      throw Error(ErrorCode::kInternal, "collective: ranks passed tensors of different shapes");
    }
  }
}

void InProcessCommunicator::AllReduceSum(const backend::DeviceTensor& t) {
  const int n = size();
  if (n == 1) return;
  Require(t.dtype == DType::kF32 || t.dtype == DType::kBF16, ErrorCode::kInternal,
          "AllReduceSum: float32 or bfloat16 tensors only");
  Post(t);
  const int64_t total = t.numel();
  const int64_t begin = total * rank_ / n, end = total * (rank_ + 1) / n;
  const auto& posted = group_->posted_;
  if (t.dtype == DType::kF32) {
    for (int64_t i = begin; i < end; ++i) {
      float s = posted[0]->data<float>()[i];
      for (int r = 1; r < n; ++r) s += posted[static_cast<size_t>(r)]->data<float>()[i];
      for (int r = 0; r < n; ++r) posted[static_cast<size_t>(r)]->data<float>()[i] = s;
    }
  } else {
    for (int64_t i = begin; i < end; ++i) {
      float s = BF16ToF32(posted[0]->data<uint16_t>()[i]);
      for (int r = 1; r < n; ++r)
        s += BF16ToF32(posted[static_cast<size_t>(r)]->data<uint16_t>()[i]);
      const uint16_t v = F32ToBF16(s);
      for (int r = 0; r < n; ++r) posted[static_cast<size_t>(r)]->data<uint16_t>()[i] = v;
    }
  }
  group_->Wait();
}

void InProcessCommunicator::AllGatherRows(const backend::DeviceTensor& in,
                                          const backend::DeviceTensor& out) {
  const int n = size();
  Require(out.dtype == in.dtype && out.numel() == in.numel() * n, ErrorCode::kInternal,
          "AllGatherRows: out must hold every rank's input");
  Post(in);
  // Each rank copies every rank's piece into its own output.
  for (int r = 0; r < n; ++r)
    std::memcpy(out.data<uint8_t>() + in.bytes() * static_cast<size_t>(r),
                group_->posted_[static_cast<size_t>(r)]->data<uint8_t>(), in.bytes());
  group_->Wait();
}

void InProcessCommunicator::AllGatherColumns(const backend::DeviceTensor& in,
                                             const backend::DeviceTensor& out,
                                             const backend::DeviceTensor& /*scratch*/) {
  const int n = size();
  const int64_t rows = in.rows();
  Require(out.dtype == in.dtype && out.rows() == rows && out.numel() == in.numel() * n,
          ErrorCode::kInternal, "AllGatherColumns: out must be [rows, size * cols]");
  Post(in);
  // Each rank copies every rank's columns straight into its own output rows.
  const size_t piece = rows > 0 ? in.bytes() / static_cast<size_t>(rows) : 0;
  for (int r = 0; r < n; ++r) {
    const uint8_t* src = group_->posted_[static_cast<size_t>(r)]->data<uint8_t>();
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(out.data<uint8_t>() + (static_cast<size_t>(i) * n + r) * piece,
                  src + static_cast<size_t>(i) * piece, piece);
  }
  group_->Wait();
}

}  // namespace m3::engine::parallel
