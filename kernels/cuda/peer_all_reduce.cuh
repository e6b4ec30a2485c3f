// One-shot all-reduce over CUDA peer access, for the ranks of one process that each drive a GPU
// (tensor-parallel decode steps: small messages where NCCL's latency dominates), plain and fused
// with the residual add and Gemma RMSNorm that follow it in the decoder. Every rank launches the
// same kernel with the same grid; each block copies its slice of the rank's input into the rank's
// staging buffer, tells its twin blocks on the peers, waits for theirs, then reads every rank's
// slice over NVLink and sums it in rank order 0 + 1 + ... in float32 (so every rank computes
// bit-identical results). Synchronization, buffers and the proof of reuse are in
// peer_all_reduce.cu. The host side that makes the buffers (peer access, allocation) and picks
// this path over NCCL is engine/parallel/peer_all_reduce_communicator.h.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

constexpr int kPeerMaxRanks = 8;
// At most this many blocks a launch: they must all be resident at once on every GPU (a block
// spins until its twins on the peers have arrived), far below an H100 / H200's 132 SMs.
constexpr int kPeerMaxBlocks = 64;

// What a launch needs to know of the group; every pointer stays valid for the group's lifetime,
// so recorded CUDA graphs keep working. Per rank, on its own GPU:
//   staging: 2 * staging_bytes (calls alternate halves by the parity of their epoch);
//   flags:   kPeerMaxBlocks * kPeerMaxRanks uint32, flags[block * kPeerMaxRanks + src] = the
//            last epoch in which rank src's block `block` filled its staging (zeroed at start);
//   control: this rank's {epoch of the last completed call, blocks done in the current one},
//            read and advanced by the kernels themselves (zeroed at start).
// abort: host-mapped; nonzero makes waiting blocks give up (a peer failed and never arrives).
struct PeerAllReduceRanks {
  int rank = 0;
  int world = 0;
  void* staging[kPeerMaxRanks] = {};
  uint32_t* flags[kPeerMaxRanks] = {};
  uint32_t* control = nullptr;
  const volatile int* abort = nullptr;
  int64_t staging_bytes = 0;
};

// data[n] (float32 or bfloat16, n * element size a multiple of 16 and at most staging_bytes) =
// the sum over the ranks of their data, in place.
void PeerAllReduceSum(const PeerAllReduceRanks& ranks, void* data, ElemType type, int64_t n,
                      cudaStream_t stream);

// Whether PeerAllReduceAddRmsNorm takes rows `dim` wide (a multiple of 8, at most 8192).
bool PeerAddRmsNormFits(int64_t dim);

// The sum over the ranks of delta [rows, dim] (bf16, rounded to bf16 as an all-reduce in place
// leaves it), then AddRmsNormGemma: residual += sum (rounded to bf16), out = residual / rms *
// (1 + w). Bit-identical to PeerAllReduceSum followed by AddRmsNormGemma (the same arithmetic in
// the same order); delta is left unchanged. rows * dim * 2 at most staging_bytes.
void PeerAllReduceAddRmsNorm(const PeerAllReduceRanks& ranks, const bf16* delta, bf16* residual,
                             int64_t rows, int64_t dim, const float* w, float eps, bf16* out,
                             cudaStream_t stream);

}  // namespace m3::kernels::cuda
