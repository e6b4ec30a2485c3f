// The GPU tests' main: runs doctest only when a CUDA GPU this build supports is present;
// otherwise it says why and exits 77 (CTest's SKIP_RETURN_CODE), so a machine without a GPU
// reports the tests as skipped rather than passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "engine/backend/make_device.h"
#include "shared/error.h"

int main(int argc, char** argv) {
  try {
    m3::engine::backend::MakeDevice("cuda");
  } catch (const m3::Error& e) {
    if (e.code() != m3::ErrorCode::kUnavailable && e.code() != m3::ErrorCode::kUnsupported) throw;
    std::printf("cuda_test SKIPPED: %s\n", e.what());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
