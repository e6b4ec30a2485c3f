// Dummy weights drawn on the GPU (CudaDevice::DummyWeight / DummyLinear, kernels/cuda/
// random_fill.cuh) against their CPU twin (kernels/cpu/random_fill.h), which draws bitwise the
// same numbers: bf16 and f32 weights equal the twin's values rounded to the stored dtype; MXFP8
// and NVFP4 codes and scales equal the twin's bytes, in linear_weight.h's layout, at a stacked
// shape and at the released expert shape; the dequantized spread is std 0.02. Then the fill
// rate, and the time it implies for a full-size model's ~130 GB per GPU.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "engine/backend/cuda/cuda_device.h"
#include "engine/backend/make_device.h"
#include "kernels/cpu/microscaling.h"
#include "kernels/cpu/random_fill.h"

namespace m3::test {
namespace {

using engine::backend::Device;
using engine::backend::DeviceTensor;
using engine::backend::LinearWeight;
using engine::backend::WeightFormat;
namespace kp = m3::kernels::cpu;

float Bf16Round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

template <typename T>
std::vector<T> Down(Device& d, const DeviceTensor& t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  d.Download(t, v.data());
  return v;
}

void Sync(Device& d) {
  REQUIRE(cudaStreamSynchronize(static_cast<cudaStream_t>(engine::backend::CudaDeviceStream(d))) ==
          cudaSuccess);
}

double Std(const std::vector<float>& v) {
  double s = 0, s2 = 0;
  for (float x : v) {
    s += x;
    s2 += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size());
  return std::sqrt(s2 / n - (s / n) * (s / n));
}

TEST_CASE("dummy weights on the GPU: bf16 and f32 equal the CPU twin's draws") {
  auto dev = engine::backend::MakeDevice("cuda");
  // An element count that is not a multiple of the kernel's 8 per thread.
  const DeviceTensor m = dev->DummyWeight({37, 123}, 0.0f, 0.02f, 5);
  CHECK(m.dtype == DType::kBF16);
  std::vector<float> twin(37 * 123);
  kp::RandomNormal(5, 0.0f, 0.02f, 0, 37 * 123, twin.data());
  const std::vector<float> got = Down<float>(*dev, m);
  int64_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += got[i] != Bf16Round(twin[i]);
  CHECK(differ == 0);

  const DeviceTensor v = dev->DummyWeight({1001}, 1.0f, 0.5f, 9);
  CHECK(v.dtype == DType::kF32);
  std::vector<float> tv(1001);
  kp::RandomNormal(9, 1.0f, 0.5f, 0, 1001, tv.data());
  CHECK(Down<float>(*dev, v) == tv);

  const DeviceTensor c = dev->DummyWeight({64, 8}, 1.0f, 0.0f, 9);  // std 0: the mean
  for (float x : Down<float>(*dev, c)) REQUIRE(x == 1.0f);
}

void CheckQuantized(Device& dev, WeightFormat f, const Shape& shape, uint64_t seed) {
  const float sd = 0.02f;
  const LinearWeight L = dev.DummyLinear(f, shape, sd, seed);
  const int64_t K = shape.back(), rows = NumElements(shape) / K;
  const bool mx = f == WeightFormat::kMxfp8;
  CHECK(L.format == f);
  CHECK(L.shape() == shape);
  CHECK(L.w.dtype == (mx ? DType::kF8E4M3 : DType::kU8));
  CHECK(L.scales.dtype == (mx ? DType::kU8 : DType::kF8E4M3));
  CHECK(L.w.dim(L.w.shape.size() - 1) == (mx ? K : K / 2));
  CHECK(L.scales.dim(L.scales.shape.size() - 1) == K / (mx ? 32 : 16));
  const std::vector<uint8_t> codes = Down<uint8_t>(dev, L.w), scales = Down<uint8_t>(dev, L.scales);
  std::vector<uint8_t> tc(codes.size()), ts(scales.size());
  std::vector<float> deq(static_cast<size_t>(rows * K));
  const float global = kp::DummyNvfp4GlobalScale(sd);
  if (mx) {
    kp::RandomMxfp8Rows(seed, sd, K, 0, rows, tc.data(), ts.data());
    for (int64_t r = 0; r < rows; ++r)
      kp::DequantizeMxfp8Row(codes.data() + r * K, scales.data() + r * K / 32, K,
                             deq.data() + r * K);
  } else {
    kp::RandomNvfp4Rows(seed, sd, global, K, 0, rows, tc.data(), ts.data());
    for (int64_t r = 0; r < rows; ++r)
      kp::DequantizeNvfp4Row(codes.data() + r * K / 2, scales.data() + r * K / 16, global, K,
                             deq.data() + r * K);
    REQUIRE(L.row_scale);
    CHECK(L.row_scale.dtype == DType::kF32);
    CHECK(L.row_scale.numel() == rows);
    for (float g : Down<float>(dev, L.row_scale)) REQUIRE(g == global);
  }
  int64_t code_diff = 0, scale_diff = 0;
  for (size_t i = 0; i < codes.size(); ++i) code_diff += codes[i] != tc[i];
  for (size_t i = 0; i < scales.size(); ++i) scale_diff += scales[i] != ts[i];
  CHECK_MESSAGE(code_diff == 0, "codes differing from the CPU twin");
  CHECK_MESSAGE(scale_diff == 0, "scales differing from the CPU twin");
  const double s = Std(deq);
  std::printf("  %s dummy %s: dequantized std %.5f (drawn with 0.02)\n",
              std::string(WeightFormatName(f)).c_str(), ShapeString(shape).c_str(), s);
  CHECK(std::fabs(s / sd - 1) < (mx ? 5e-3 : 0.03));
}

TEST_CASE("dummy MXFP8 / NVFP4 Linears on the GPU: the CPU twin's bytes, std 0.02") {
  auto dev = engine::backend::MakeDevice("cuda");
  for (WeightFormat f : {WeightFormat::kMxfp8, WeightFormat::kNvfp4}) {
    CheckQuantized(*dev, f, {3, 64, 512}, 21);      // stacked experts
    CheckQuantized(*dev, f, {2 * 3072, 6144}, 22);  // one released expert's gate/up
    CheckQuantized(*dev, f, {6144, 3072}, 23);      // and its down
  }
  // The dense format is a bf16 weight.
  const LinearWeight d = dev->DummyLinear(WeightFormat::kDense, {64, 64}, 0.02f, 1);
  CHECK(!d.quantized());
  CHECK(d.w.dtype == DType::kBF16);
}

TEST_CASE("dummy weights on the GPU: fill rate (a full-size model's ~130 GB per GPU)") {
  auto dev = engine::backend::MakeDevice("cuda");
  struct Case {
    WeightFormat f;
    Shape shape;
  };
  // 32 experts of a layer at a time: 2.4 G weights (4.8 GB bf16, 2.4 GB MXFP8, 1.2 GB NVFP4).
  double worst_s_per_gb = 0;
  for (const Case& c : {Case{WeightFormat::kDense, {32, 6144, 6144 * 2}},
                        Case{WeightFormat::kMxfp8, {32, 6144, 6144 * 2}},
                        Case{WeightFormat::kNvfp4, {32, 6144, 6144 * 2}}}) {
    LinearWeight warm = dev->DummyLinear(c.f, {64, 512}, 0.02f, 1);
    Sync(*dev);
    const auto t0 = std::chrono::steady_clock::now();
    LinearWeight L = dev->DummyLinear(c.f, c.shape, 0.02f, 2);
    Sync(*dev);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double gb = static_cast<double>(L.bytes()) / 1e9;
    std::printf(
        "  dummy %s %s: %.2f GB in %.3f s (%.0f GB/s, %.1f G weights/s): 130 GB in %.1f s\n",
        std::string(WeightFormatName(c.f)).c_str(), ShapeString(c.shape).c_str(), gb, s, gb / s,
        static_cast<double>(L.numel()) / 1e9 / s, 130 * s / gb);
    worst_s_per_gb = std::max(worst_s_per_gb, s / gb);
  }
  // Seconds, not minutes: 130 GB in under 30 s at the slowest format's rate.
  CHECK(130 * worst_s_per_gb < 30);
}

}  // namespace
}  // namespace m3::test
