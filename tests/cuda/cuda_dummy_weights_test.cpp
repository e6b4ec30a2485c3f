// Dummy weights drawn on the GPU (CudaDevice::DummyWeight / DummyLinear, kernels/cuda/
// random_fill.cuh) against their CPU twin (kernels/cpu/random_fill.h), which draws bitwise the
// same numbers: bf16 and f32 weights equal the twin's values rounded to the stored dtype; the
// MXFP8 and NVFP4 fill kernels' codes and scales equal the twin's bytes (whole and from a row
// further in); DummyLinear gives the twin's bytes in linear_weight.h's layout, at a stacked
// shape and the released expert shapes; the dequantized spread is std 0.02. Then the fill
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
#include "kernels/cuda/random_fill.cuh"

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

// The twin's codes and scales of a dummy [rows, K] Linear, and their dequantized values.
struct Twin {
  std::vector<uint8_t> codes, scales;
  std::vector<float> dequantized;
};
Twin MakeTwin(WeightFormat f, int64_t rows, int64_t K, float sd, uint64_t seed) {
  const bool mx = f == WeightFormat::kMxfp8;
  Twin t;
  t.codes.resize(static_cast<size_t>(mx ? rows * K : rows * K / 2));
  t.scales.resize(static_cast<size_t>(rows * K / (mx ? 32 : 16)));
  t.dequantized.resize(static_cast<size_t>(rows * K));
  const float global = kp::DummyNvfp4GlobalScale(sd);
  if (mx)
    kp::RandomMxfp8Rows(seed, sd, K, 0, rows, t.codes.data(), t.scales.data());
  else
    kp::RandomNvfp4Rows(seed, sd, global, K, 0, rows, t.codes.data(), t.scales.data());
  for (int64_t r = 0; r < rows; ++r) {
    if (mx)
      kp::DequantizeMxfp8Row(t.codes.data() + r * K, t.scales.data() + r * K / 32, K,
                             t.dequantized.data() + r * K);
    else
      kp::DequantizeNvfp4Row(t.codes.data() + r * K / 2, t.scales.data() + r * K / 16, global, K,
                             t.dequantized.data() + r * K);
  }
  return t;
}

int64_t Differ(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return -1;
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

// The fill kernels alone, rows [first, first + n) of a [rows, K] Linear, against the twin's
// bytes.
void CheckFillKernels(Device& dev, WeightFormat f, int64_t rows, int64_t K, int64_t first,
                      int64_t n, uint64_t seed) {
  namespace kc = m3::kernels::cuda;
  const float sd = 0.02f, global = kp::DummyNvfp4GlobalScale(sd);
  const bool mx = f == WeightFormat::kMxfp8;
  const int64_t cw = mx ? K : K / 2, sw = K / (mx ? 32 : 16);
  const Twin t = MakeTwin(f, rows, K, sd, seed);
  auto stream = static_cast<cudaStream_t>(engine::backend::CudaDeviceStream(dev));
  const DeviceTensor c = dev.Alloc(DType::kU8, {n, cw}), s = dev.Alloc(DType::kU8, {n, sw});
  const DeviceTensor g = dev.Alloc(DType::kF32, {n});
  if (mx) {
    kc::RandomMxfp8Fill(seed, sd, first, n, K, c.data<uint8_t>(), s.data<uint8_t>(), stream);
  } else {
    kc::RandomNvfp4Fill(seed, sd, global, first, n, K, c.data<uint8_t>(), s.data<uint8_t>(),
                        g.data<float>(), stream);
    for (float x : Down<float>(dev, g)) REQUIRE(x == global);
  }
  const std::vector<uint8_t> want_c(t.codes.begin() + first * cw,
                                    t.codes.begin() + (first + n) * cw);
  const std::vector<uint8_t> want_s(t.scales.begin() + first * sw,
                                    t.scales.begin() + (first + n) * sw);
  CHECK_MESSAGE(Differ(Down<uint8_t>(dev, c), want_c) == 0, "codes differing from the CPU twin");
  CHECK_MESSAGE(Differ(Down<uint8_t>(dev, s), want_s) == 0, "scales differing from the CPU twin");
}

// What Device::DummyLinear gives: linear_weight.h's layout (the CUDA device keeps both formats
// quantized, as UploadQuantizedLinear does) with the twin's bytes; std 0.02 dequantized.
void CheckDummyLinear(Device& dev, WeightFormat f, const Shape& shape, uint64_t seed) {
  const float sd = 0.02f;
  const LinearWeight L = dev.DummyLinear(f, shape, sd, seed);
  const int64_t K = shape.back(), rows = NumElements(shape) / K;
  const bool mx = f == WeightFormat::kMxfp8;
  const Twin t = MakeTwin(f, rows, K, sd, seed);
  CHECK(L.shape() == shape);
  REQUIRE(L.quantized());
  CHECK(L.format == f);
  CHECK(L.w.dtype == (mx ? DType::kF8E4M3 : DType::kU8));
  CHECK(L.scales.dtype == (mx ? DType::kU8 : DType::kF8E4M3));
  CHECK(L.w.dim(L.w.shape.size() - 1) == (mx ? K : K / 2));
  CHECK(L.scales.dim(L.scales.shape.size() - 1) == K / (mx ? 32 : 16));
  CHECK(Differ(Down<uint8_t>(dev, L.w), t.codes) == 0);
  CHECK(Differ(Down<uint8_t>(dev, L.scales), t.scales) == 0);
  if (!mx) {
    REQUIRE(L.row_scale);
    CHECK(L.row_scale.numel() == rows);
    for (float g : Down<float>(dev, L.row_scale)) REQUIRE(g == kp::DummyNvfp4GlobalScale(sd));
  }
  const double s = Std(t.dequantized);
  std::printf("  %s dummy %s: dequantized std %.5f (drawn with 0.02)\n",
              std::string(WeightFormatName(f)).c_str(), ShapeString(shape).c_str(), s);
  CHECK(std::fabs(s / sd - 1) < (mx ? 5e-3 : 0.03));
}

TEST_CASE("dummy MXFP8 / NVFP4 Linears on the GPU: the CPU twin's bytes, std 0.02") {
  auto dev = engine::backend::MakeDevice("cuda");
  for (WeightFormat f : {WeightFormat::kMxfp8, WeightFormat::kNvfp4}) {
    CAPTURE(WeightFormatName(f));
    CheckFillKernels(*dev, f, 96, 512, 0, 96, 31);
    CheckFillKernels(*dev, f, 96, 512, 40, 17, 31);   // a slab of rows further in
    CheckDummyLinear(*dev, f, {3, 64, 512}, 21);      // stacked experts
    CheckDummyLinear(*dev, f, {2 * 3072, 6144}, 22);  // one released expert's gate/up
    CheckDummyLinear(*dev, f, {6144, 3072}, 23);      // and its down
  }
  // The dense format is a bf16 weight.
  const LinearWeight d = dev->DummyLinear(WeightFormat::kDense, {64, 64}, 0.02f, 1);
  CHECK(!d.quantized());
  CHECK(d.w.dtype == DType::kBF16);
}

TEST_CASE("dummy weights on the GPU: fill rate (a full-size model's ~130 GB per GPU)") {
  namespace kc = m3::kernels::cuda;
  auto dev = engine::backend::MakeDevice("cuda");
  auto stream = static_cast<cudaStream_t>(engine::backend::CudaDeviceStream(*dev));
  // 32 experts' gate/up of a layer: 2.4 G weights (4.8 GB bf16, 2.5 GB MXFP8, 1.4 GB NVFP4),
  // drawn in the layout each format is held in.
  const int64_t rows = 32 * 6144, K = 2 * 6144;
  const float sd = 0.02f;
  double worst_s_per_gb = 0;
  for (const char* name : {"bf16", "MXFP8", "NVFP4"}) {
    const std::string f = name;
    const int64_t cw = f == "MXFP8" ? K : K / 2, sw = K / (f == "MXFP8" ? 32 : 16);
    DeviceTensor a, b, c;
    if (f == "bf16") {
      a = dev->Alloc(DType::kBF16, {rows, K});
    } else {
      a = dev->Alloc(DType::kU8, {rows, cw});
      b = dev->Alloc(DType::kU8, {rows, sw});
      c = dev->Alloc(DType::kF32, {rows});
    }
    auto fill = [&](uint64_t seed) {
      if (f == "bf16")
        kc::RandomNormalFill(seed, 0.0f, sd, rows * K, a.data<void>(), kc::ElemType::kBF16, stream);
      else if (f == "MXFP8")
        kc::RandomMxfp8Fill(seed, sd, 0, rows, K, a.data<uint8_t>(), b.data<uint8_t>(), stream);
      else
        kc::RandomNvfp4Fill(seed, sd, kp::DummyNvfp4GlobalScale(sd), 0, rows, K, a.data<uint8_t>(),
                            b.data<uint8_t>(), c.data<float>(), stream);
    };
    fill(1);  // warm-up
    Sync(*dev);
    const auto t0 = std::chrono::steady_clock::now();
    fill(2);
    Sync(*dev);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double gb =
        static_cast<double>(a.bytes() + (b ? b.bytes() : 0) + (c ? c.bytes() : 0)) / 1e9;
    std::printf(
        "  dummy %s [%lld, %lld]: %.2f GB in %.3f s (%.0f GB/s, %.1f G weights/s): "
        "130 GB in %.1f s\n",
        name, static_cast<long long>(rows), static_cast<long long>(K), gb, s, gb / s,
        static_cast<double>(rows * K) / 1e9 / s, 130 * s / gb);
    worst_s_per_gb = std::max(worst_s_per_gb, s / gb);
  }
  // Seconds, not minutes: 130 GB in under 30 s at the slowest format's rate.
  CHECK(130 * worst_s_per_gb < 30);
}

}  // namespace
}  // namespace m3::test
