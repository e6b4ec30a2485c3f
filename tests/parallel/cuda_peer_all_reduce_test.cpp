// The peer all-reduce (engine/parallel/peer_all_reduce_communicator.h, kernels/cuda/
// peer_all_reduce.cuh) on 2 GPUs and on every GPU of the machine (up to 8): sums against the
// exact host reference (bf16 inputs summed in rank order in float32, rounded once: the kernels
// must match it bit for bit, on every rank) and against NCCL (within its rounding; how many
// elements agree bit for bit is printed); messages above the size limit or of odd sizes go to NCCL;
// hundreds of calls in a row (the staging halves and epochs turn over) and replays of a recorded
// CUDA graph with new inputs each time (the epoch lives on the device); the fused
// AllReduceAddRmsNorm against the peer sum followed by the ops' AddRmsNorm (the same bits) and
// NCCL's; a rank failing while its peer waits inside the kernel. Its own main: exits 77 (skipped)
// where fewer than 2 usable GPUs are present.
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/backend/m3_ops.h"
#include "engine/backend/make_device.h"
#include "engine/backend/make_m3_ops.h"
#include "engine/parallel/nccl_communicator.h"
#include "engine/parallel/peer_all_reduce_communicator.h"
#include "engine/parallel/rank_threads.h"
#include "shared/error.h"

namespace m3::test {
namespace {

using engine::backend::Device;
using engine::backend::DeviceTensor;
using engine::parallel::AllReduceMode;
using engine::parallel::Communicator;
using engine::parallel::NcclGroup;

int GpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

// Whether every pair of GPUs 0..n-1 has peer access (the lent H100 / H200 machines: NVLink).
bool PeerAccess(int n) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      int can = 0;
      if (i != j && (cudaDeviceCanAccessPeer(&can, i, j) != cudaSuccess || !can)) return false;
    }
  return true;
}

float RoundBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

// One group of n ranks on GPUs 0..n-1: each rank's device and ops, its communicator over the
// peer kernels (mode kCustom) and one over NCCL alone.
struct Ranks {
  explicit Ranks(int n) : threads(n), dev(n), ops(n), peer(n), nccl(n) {
    std::vector<int> ids;
    for (int r = 0; r < n; ++r) ids.push_back(r);
    peer_group = std::make_shared<NcclGroup>(ids, AllReduceMode::kCustom);
    nccl_group = std::make_shared<NcclGroup>(ids, AllReduceMode::kNccl);
    REQUIRE(peer_group->peer_all_reduce());
    REQUIRE(!nccl_group->peer_all_reduce());
    threads.Run([&](int r) {
      dev[r] = engine::backend::MakeDevice("cuda:" + std::to_string(r));
      ops[r] = engine::backend::MakeM3Ops(*dev[r]);
      peer[r] = peer_group->Bind(r, *dev[r]);
      nccl[r] = nccl_group->Bind(r, *dev[r]);
    });
  }
  ~Ranks() {
    threads.Run([&](int r) {
      peer[r].reset();
      nccl[r].reset();
      ops[r].reset();
      dev[r].reset();
    });
  }
  int size() const { return threads.size(); }

  engine::parallel::RankThreads threads;
  std::shared_ptr<NcclGroup> peer_group, nccl_group;
  std::vector<std::unique_ptr<Device>> dev;
  std::vector<std::unique_ptr<engine::backend::M3Ops>> ops;
  std::vector<std::unique_ptr<Communicator>> peer, nccl;
};

// Rank r's input of call `seed`: bf16-representable values, different per rank and call.
std::vector<float> Input(int64_t n, int r, uint64_t seed, bool bf16) {
  std::mt19937_64 rng(seed * 1315423911u + static_cast<uint64_t>(r) * 2654435761u + 1);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = bf16 ? RoundBf16(u(rng)) : u(rng);
  return v;
}

// The kernels' sum: rank order, float32, rounded once to the tensor's dtype.
std::vector<float> Reference(const std::vector<std::vector<float>>& in, bool bf16) {
  std::vector<float> s(in[0].size());
  for (size_t i = 0; i < s.size(); ++i) {
    float acc = in[0][i];
    for (size_t r = 1; r < in.size(); ++r) acc += in[r][i];
    s[i] = bf16 ? RoundBf16(acc) : acc;
  }
  return s;
}

// Sums one message of n elements on every rank through `use_peer`'s communicator or NCCL;
// returns every rank's result.
std::vector<std::vector<float>> Reduce(Ranks& g, int64_t n, bool bf16, uint64_t seed, bool use_peer,
                                       std::vector<std::vector<float>>* inputs) {
  std::vector<std::vector<float>> in(g.size()), out(g.size());
  for (int r = 0; r < g.size(); ++r) in[r] = Input(n, r, seed, bf16);
  g.threads.Run([&](int r) {
    DeviceTensor t = g.dev[r]->Alloc(bf16 ? DType::kBF16 : DType::kF32, {n});
    g.dev[r]->Upload(in[r].data(), t);
    (use_peer ? g.peer : g.nccl)[r]->AllReduceSum(t);
    out[r].resize(static_cast<size_t>(n));
    g.dev[r]->Download(t, out[r].data());
  });
  if (inputs) *inputs = std::move(in);
  return out;
}

// The largest |a - b| relative to max(|b|, 1).
double MaxRelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(double(a[i]) - double(b[i])) / std::max(1.0, std::abs(double(b[i]))));
  return m;
}

// Elements where a sum in another order, rounded after each add (NCCL's ring), differs from
// the rank-order sum by more than its rounding can: each of the ranks' roundings errs by at most
// half a unit in the last place of a partial sum, |partial| <= sum |x_r| (bf16: 2^-9 of it,
// float32: 2^-24), so world * that bound (with a factor 2 to spare) holds.
int64_t BeyondRounding(const std::vector<float>& got, const std::vector<float>& want,
                       const std::vector<std::vector<float>>& in, bool bf16) {
  const double unit = bf16 ? 1.0 / 256.0 : 1.0 / (1 << 23);
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double mag = 0;
    for (const auto& x : in) mag += std::abs(double(x[i]));
    bad += std::abs(double(got[i]) - double(want[i])) > double(in.size()) * unit * mag + 1e-30;
  }
  return bad;
}

// Relative L2 distance of a from b.
double RelL2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

void CheckSums(Ranks& g) {
  const int64_t limit = g.peer_group->peer_max_bytes();
  REQUIRE(limit >= 64 * 6144 * 2);  // decode steps of the real width take the peer kernels
  struct Case {
    int64_t n;
    bool bf16;
  };
  // Decode rows of the real width (12 KiB a row), a 16-byte message, packs not divisible by
  // the block size, float32, the size limit exactly, and past it / odd sizes (NCCL).
  const std::vector<Case> cases = {{6144, true},      {3 * 6144, true},  {64 * 6144, true},
                                   {8, true},         {1000, true},      {4, false},
                                   {3 * 1024, false}, {limit / 2, true}, {limit / 2 + 8, true},
                                   {7, true},         {6, false},        {limit, true}};
  uint64_t seed = 1;
  for (const Case& c : cases) {
    CAPTURE(c.n);
    CAPTURE(c.bf16);
    std::vector<std::vector<float>> in;
    const auto got = Reduce(g, c.n, c.bf16, seed, true, &in);
    const auto nccl = Reduce(g, c.n, c.bf16, seed, false, nullptr);
    ++seed;
    const std::vector<float> want = Reference(in, c.bf16);
    const int64_t bytes = c.n * (c.bf16 ? 2 : 4);
    const bool peer_path = bytes % 16 == 0 && bytes <= limit;
    for (int r = 0; r < g.size(); ++r) {
      CAPTURE(r);
      CHECK(got[r] == got[0]);  // every rank the same bits, on either path
      if (peer_path) CHECK(got[r] == want);
      // NCCL: within its own rounding of the rank-order sum (at 2 ranks bf16 sums round once
      // either way: how many elements agree bit for bit is printed, not required).
      CHECK(BeyondRounding(nccl[r], want, in, c.bf16) == 0);
      CHECK(BeyondRounding(got[r], want, in, c.bf16) == 0);
      if (r == 0 && c.bf16) {
        int64_t same = 0;
        for (size_t i = 0; i < want.size(); ++i) same += nccl[0][i] == got[0][i];
        MESSAGE(g.size() << " ranks, " << c.n << " bf16: " << same << " of " << c.n
                         << " elements bit-identical to NCCL's");
      }
    }
  }
}

// Many calls in a row on the same tensors, sizes alternating (each call's epoch flips the
// staging half; a stale read of the previous call's half would show), checked every call.
void CheckManyCalls(Ranks& g) {
  const std::vector<int64_t> sizes = {6144, 8 * 6144, 64 * 6144, 8};
  std::vector<DeviceTensor> t(g.size());
  g.threads.Run([&](int r) { t[r] = g.dev[r]->Alloc(DType::kBF16, {64 * 6144}); });
  int bad = 0;
  for (int call = 0; call < 300; ++call) {
    const int64_t n = sizes[call % sizes.size()];
    std::vector<std::vector<float>> in(g.size()), out(g.size());
    for (int r = 0; r < g.size(); ++r) in[r] = Input(n, r, 1000 + call, true);
    g.threads.Run([&](int r) {
      DeviceTensor v = t[r].Rows(0, n);
      g.dev[r]->Upload(in[r].data(), v);
      g.peer[r]->AllReduceSum(v);
      out[r].resize(static_cast<size_t>(n));
      g.dev[r]->Download(v, out[r].data());
    });
    const std::vector<float> want = Reference(in, true);
    for (int r = 0; r < g.size(); ++r) bad += out[r] != want;
  }
  CHECK(bad == 0);
}

// Recorded once per rank, replayed with new inputs: the epoch is read and advanced on the
// device, so every replay synchronizes with the peers' replay of the same call.
void CheckGraphReplays(Ranks& g) {
  const int64_t n = 4 * 6144;
  constexpr int kCalls = 3;  // per recorded step
  std::vector<std::vector<DeviceTensor>> t(g.size());
  std::vector<std::unique_ptr<engine::backend::StepGraph>> graph(g.size());
  g.threads.Run([&](int r) {
    for (int c = 0; c < kCalls; ++c) t[r].push_back(g.dev[r]->Alloc(DType::kBF16, {n}));
    graph[r] = g.dev[r]->Record([&] {
      for (int c = 0; c < kCalls; ++c) g.peer[r]->AllReduceSum(t[r][c]);
    });
  });
  for (int r = 0; r < g.size(); ++r) REQUIRE(graph[r] != nullptr);
  int bad = 0;
  for (int replay = 0; replay < 50; ++replay) {
    std::vector<std::vector<std::vector<float>>> in(kCalls,
                                                    std::vector<std::vector<float>>(g.size()));
    for (int c = 0; c < kCalls; ++c)
      for (int r = 0; r < g.size(); ++r) in[c][r] = Input(n, r, 5000 + replay * kCalls + c, true);
    std::vector<std::vector<std::vector<float>>> out(kCalls,
                                                     std::vector<std::vector<float>>(g.size()));
    g.threads.Run([&](int r) {
      for (int c = 0; c < kCalls; ++c) g.dev[r]->Upload(in[c][r].data(), t[r][c]);
      graph[r]->Replay();
      // An eager call between replays shares the epoch sequence with the graph's.
      if (replay % 7 == 3) {
        DeviceTensor extra = g.dev[r]->Alloc(DType::kBF16, {6144});
        const std::vector<float> ones(6144, 1.0f);
        g.dev[r]->Upload(ones.data(), extra);
        g.peer[r]->AllReduceSum(extra);
      }
      for (int c = 0; c < kCalls; ++c) {
        out[c][r].resize(static_cast<size_t>(n));
        g.dev[r]->Download(t[r][c], out[c][r].data());
      }
    });
    for (int c = 0; c < kCalls; ++c) {
      const std::vector<float> want = Reference(in[c], true);
      for (int r = 0; r < g.size(); ++r) bad += out[c][r] != want;
    }
  }
  CHECK(bad == 0);
  g.threads.Run([&](int r) { graph[r].reset(); });
}

// AllReduceAddRmsNorm: fused (peer), unfused (peer sum, then the ops' AddRmsNorm: the
// Communicator default) and NCCL's, from the same residual and partials.
void CheckFused(Ranks& g, int64_t rows, int64_t dim) {
  CAPTURE(rows);
  CAPTURE(dim);
  std::vector<std::vector<float>> delta(g.size());
  for (int r = 0; r < g.size(); ++r) delta[r] = Input(rows * dim, r, 77 + rows, true);
  const std::vector<float> residual = Input(rows * dim, 99, 1, true);
  std::vector<float> weight = Input(dim, 98, 1, false);
  for (float& w : weight) w *= 0.1f;
  struct Result {
    std::vector<float> residual, out;
  };
  // 0: fused, 1: peer sum + AddRmsNorm, 2: NCCL sum + AddRmsNorm.
  std::vector<std::vector<Result>> res(3, std::vector<Result>(g.size()));
  for (int path = 0; path < 3; ++path)
    g.threads.Run([&](int r) {
      Device& d = *g.dev[r];
      DeviceTensor dt = d.Alloc(DType::kBF16, {rows, dim});
      DeviceTensor h = d.Alloc(DType::kBF16, {rows, dim});
      DeviceTensor x = d.Alloc(DType::kBF16, {rows, dim});
      DeviceTensor w = d.Alloc(DType::kF32, {dim});
      d.Upload(delta[r].data(), dt);
      d.Upload(residual.data(), h);
      d.Upload(weight.data(), w);
      if (path == 0) {
        g.peer[r]->AllReduceAddRmsNorm(dt, h, w, 1e-6f, x, *g.ops[r]);
      } else {
        (path == 1 ? g.peer : g.nccl)[r]->AllReduceSum(dt);
        g.ops[r]->AddRmsNorm(h, &dt, w, 1e-6f, x);
      }
      Result& o = res[path][r];
      o.residual.resize(static_cast<size_t>(rows * dim));
      o.out.resize(static_cast<size_t>(rows * dim));
      d.Download(h, o.residual.data());
      d.Download(x, o.out.data());
    });
  // Host reference: the residual exactly, the normed output within bf16 rounding.
  const std::vector<float> sum = Reference(delta, true);
  std::vector<float> want_res(residual.size()), want_out(residual.size());
  for (int64_t i = 0; i < rows; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const size_t k = static_cast<size_t>(i * dim + j);
      want_res[k] = RoundBf16(residual[k] + sum[k]);
      ss += double(want_res[k]) * want_res[k];
    }
    const double inv = 1.0 / std::sqrt(ss / double(dim) + 1e-6);
    for (int64_t j = 0; j < dim; ++j) {
      const size_t k = static_cast<size_t>(i * dim + j);
      want_out[k] = static_cast<float>(want_res[k] * inv * (1.0 + weight[static_cast<size_t>(j)]));
    }
  }
  // Past the size limit both peer paths are NCCL's sum, exact only at 2 ranks.
  const bool exact = rows * dim * 2 <= g.peer_group->peer_max_bytes() || g.size() == 2;
  for (int r = 0; r < g.size(); ++r) {
    CAPTURE(r);
    if (exact) CHECK(res[0][r].residual == want_res);
    CHECK(res[0][r].residual == res[1][r].residual);
    CHECK(res[0][r].out == res[1][r].out);  // the same arithmetic in the same order
    CHECK(res[0][r].out == res[0][0].out);
    CHECK(MaxRelDiff(res[0][r].out, want_out) <= 2.0 / 256.0);
    // NCCL's sum rounds after each add past 2 ranks: within bf16 rounding over the tensor.
    CHECK(RelL2(res[2][r].out, res[0][r].out) <= 1e-2);
    CHECK(RelL2(res[2][r].residual, res[0][r].residual) <= 1e-2);
  }
}

void CheckGroup(int n) {
  if (!PeerAccess(n)) {
    MESSAGE("GPUs 0.." << n - 1 << " lack peer access between some pair: nothing to check");
    return;
  }
  Ranks g(n);
  CheckSums(g);
  CheckManyCalls(g);
  CheckGraphReplays(g);
  for (int64_t rows : {1, 3, 64, 100}) CheckFused(g, rows, 6144);
  CheckFused(g, 5, 3072);  // a width whose rows do not fill the threads' registers
  CheckFused(g, 2, 9216);  // wider than the fused kernel: the unfused default path
}

TEST_CASE("peer all-reduce: 2 GPUs") {
  CheckGroup(2);
}

TEST_CASE("peer all-reduce: every GPU of the machine (3 to 8)") {
  const int n = std::min(GpuCount(), 8);
  if (n < 3) {
    MESSAGE("only " << n << " GPUs: covered by the 2-GPU case");
    return;
  }
  CheckGroup(n);
}

TEST_CASE("peer all-reduce: without peer access there is no peer group (auto: NCCL alone)") {
  // Two ranks on one GPU are never each other's peers.
  using engine::parallel::PeerAllReduceGroup;
  CHECK(PeerAllReduceGroup::Make({0, 0}, false) == nullptr);
  CHECK_THROWS_AS(PeerAllReduceGroup::Make({0, 0}, true), Error);
}

TEST_CASE("peer all-reduce: a rank failing while its peer waits in the kernel aborts the group") {
  if (!PeerAccess(2)) return;
  auto group = std::make_shared<NcclGroup>(std::vector<int>{0, 1}, AllReduceMode::kCustom);
  engine::parallel::RankThreads threads(2);
  threads.SetOnStuck([group] { group->Abort(); }, std::chrono::milliseconds(1000));
  std::vector<std::unique_ptr<Device>> be(2);
  std::vector<std::unique_ptr<Communicator>> comm(2);
  std::vector<DeviceTensor> t(2);
  threads.Run([&](int r) {
    be[r] = engine::backend::MakeDevice("cuda:" + std::to_string(r));
    comm[r] = group->Bind(r, *be[r]);
    t[r] = be[r]->Alloc(DType::kBF16, {6144});
  });
  // Rank 0 waits on the GPU for a peer kernel rank 1 never launches.
  CHECK_THROWS_WITH(threads.Run([&](int r) {
    if (r == 1) throw Error(ErrorCode::kInternal, "rank 1 failed");
    comm[0]->AllReduceSum(t[0]);
    std::vector<float> host(6144);
    be[0]->Download(t[0], host.data());
  }),
                    "rank 1 failed");
  CHECK(threads.broken());
  CHECK_THROWS_WITH(comm[0]->AllReduceSum(t[0]),
                    "peer all-reduce: the GPU group was aborted after a rank failed");
  comm.clear();
  t.clear();
  be.clear();
}

}  // namespace
}  // namespace m3::test

int main(int argc, char** argv) {
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  for (const char* device : {"cuda:0", "cuda:1"}) {
    try {
      m3::engine::backend::MakeDevice(device);
    } catch (const m3::Error& e) {
      std::printf("cuda_peer_all_reduce_test SKIPPED: needs 2 GPUs; %s: %s\n", device, e.what());
      return 77;
    }
  }
  doctest::Context context(argc, argv);
  return context.run();
}
