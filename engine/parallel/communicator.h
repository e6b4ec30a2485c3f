// Communicator: the collectives the ranks of one tensor- / expert-parallel model use, on the
// tensors of their own backends (host memory for the CPU backend, device memory for a GPU).
// Every rank calls the same collectives in the same order with tensors of the same shape.
#pragma once

#include "engine/backend/device_tensor.h"
#include "engine/backend/m3_ops.h"

namespace m3::engine::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // t = the sum of every rank's t, in place (float32 or bfloat16). The reduction order is
  // rank 0 + rank 1 + ..., so results do not depend on timing where the implementation allows.
  virtual void AllReduceSum(const backend::DeviceTensor& t) = 0;
  // The decoder's all-reduce of a row-parallel output and the residual add + RMSNorm after it:
  // residual += the sum of every rank's delta; out = RMSNormGemma(residual) * (1 + weight), as
  // AllReduceSum(delta) then ops.AddRmsNorm(residual, &delta, weight, eps, out) (which is what
  // this does unless an implementation fuses them into one kernel). delta's contents afterwards
  // are unspecified (this rank's part or the sum).
  virtual void AllReduceAddRmsNorm(const backend::DeviceTensor& delta,
                                   const backend::DeviceTensor& residual,
                                   const backend::DeviceTensor& weight, float eps,
                                   const backend::DeviceTensor& out, backend::M3Ops& ops) {
    AllReduceSum(delta);
    ops.AddRmsNorm(residual, &delta, weight, eps, out);
  }
  // out [size * in.rows, ...] = every rank's `in` stacked in rank order along dimension 0.
  virtual void AllGatherRows(const backend::DeviceTensor& in, const backend::DeviceTensor& out) = 0;
  // out [rows, size * cols] = every rank's `in` [rows, cols] side by side in rank order (a
  // vocab-split LM head's logits). scratch: size * in.numel() elements of in's dtype, for
  // implementations that gather rows first and re-lay them out.
  virtual void AllGatherColumns(const backend::DeviceTensor& in, const backend::DeviceTensor& out,
                                const backend::DeviceTensor& scratch) = 0;
  virtual void Barrier() = 0;
};

}  // namespace m3::engine::parallel
