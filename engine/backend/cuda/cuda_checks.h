// The CUDA device's and ops' error handling and dtype mapping: an inconsistency the checks
// catch is a bug (kInternal), a failed CUDA call says which one, and the kernels' own
// std::runtime_error failures are reported through the engine's error type.
#pragma once

#include <cuda_runtime.h>

#include <exception>
#include <string>

#include "kernels/cuda/elementwise.cuh"
#include "shared/dtype.h"
#include "shared/error.h"

namespace m3::engine::backend::cuda_checks {

using kernels::cuda::ElemType;

inline void Check(bool ok, const char* what) {
  Require(ok, ErrorCode::kInternal, std::string("cuda backend: ") + what);
}

inline void CudaCheck(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw Error(ErrorCode::kInternal, "cuda backend: " + what + ": " + cudaGetErrorString(e));
}

inline std::string MiB(size_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

inline ElemType ToElem(DType t) {
  switch (t) {
    case DType::kF32:
      return ElemType::kF32;
    case DType::kF16:
      return ElemType::kF16;
    case DType::kBF16:
      return ElemType::kBF16;
    case DType::kF64:
      return ElemType::kF64;
    default:
      throw Error(ErrorCode::kInvalidArgument,
                  "weight dtype " + std::string(DTypeName(t)) + " is not a float type");
  }
}

// Runs the kernels' own failures (std::runtime_error) through the engine's error type.
template <typename Fn>
void Run(const char* op, Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInternal, std::string("cuda backend ") + op + ": " + e.what());
  }
}

inline bool IsFloatActivation(DType t) {
  return t == DType::kBF16 || t == DType::kF32;
}

}  // namespace m3::engine::backend::cuda_checks
