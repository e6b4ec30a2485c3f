// m3-make-random-checkpoint: writes a random MiniMax-M3 VL checkpoint at chosen widths (default:
// the real model's text widths with 4 layers: 1 full attention + dense MLP, then MSA + MoE;
// hidden 6144, 64 query / 4 KV heads of 128, rotary 64, index 4 x 128, MSA block 128, top-16,
// 128 experts of 3072, top-4, shared expert 3072, dense MLP 12288, vocabulary 200064; a small
// vision tower) for benchmarks on the GPU machine, where a 49 GB checkpoint cannot be carried:
// config.json, generation_config.json and one model.safetensors in BF16. Fast: the file is
// sized up front, mapped, and filled by every core in 64 MiB chunks, each chunk from its own
// counter-based random stream (the bytes do not depend on the thread count). Weights are
// uniform with the standard deviation of an initializer (embeddings 1, matrices 0.02), norms 1,
// biases 0. The engine takes token ids, so no tokenizer is written.
//   m3-make-random-checkpoint --out DIR [--layers N] [--experts N] [--vocab N] [--threads N]
//       [--max-position N] [--seed S] [--hidden N] [--heads N] [--expert-inter N]
//       [--shared-inter N] [--dense-inter N]
// (head_dim 128, 4 KV heads and the MSA index widths stay the real ones: narrower --hidden /
// --heads give small models on the same attention kernels, e.g. for tests.)
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/random_m3_config.h"

namespace {

using nlohmann::json;

using Widths = m3::bench::RandomM3Shape;

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  float stddev;  // 0: constant `fill`
  float fill;
  uint64_t begin = 0, end = 0;  // byte offsets in the data section
};

std::vector<Tensor> Tensors(const Widths& w) {
  std::vector<Tensor> t;
  const float s = 0.02f;
  auto add = [&](std::string name, std::vector<int64_t> shape, float stddev, float fill = 0) {
    t.push_back({std::move(name), std::move(shape), stddev, fill});
  };
  const int64_t H = w.hidden, D = w.head_dim;
  add("language_model.model.embed_tokens.weight", {w.vocab, H}, 1.0f);
  add("language_model.lm_head.weight", {w.vocab, H}, s);
  add("language_model.model.norm.weight", {H}, 0, 1);
  for (int64_t l = 0; l < w.layers; ++l) {
    const std::string p = "language_model.model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H}, 0, 1);
    add(p + "post_attention_layernorm.weight", {H}, 0, 1);
    add(p + "self_attn.q_proj.weight", {w.heads * D, H}, s);
    add(p + "self_attn.k_proj.weight", {w.kv_heads * D, H}, s);
    add(p + "self_attn.v_proj.weight", {w.kv_heads * D, H}, s);
    add(p + "self_attn.o_proj.weight", {H, w.heads * D}, s);
    add(p + "self_attn.q_norm.weight", {D}, 0, 1);
    add(p + "self_attn.k_norm.weight", {D}, 0, 1);
    if (l != 0) {
      add(p + "self_attn.index_q_proj.weight", {w.kv_heads * w.index_head_dim, H}, s);
      add(p + "self_attn.index_k_proj.weight", {w.index_head_dim, H}, s);
      add(p + "self_attn.index_q_norm.weight", {w.index_head_dim}, 0, 1);
      add(p + "self_attn.index_k_norm.weight", {w.index_head_dim}, 0, 1);
    }
    const std::string m = p + "block_sparse_moe.";
    if (l == 0) {
      add(m + "gate_proj.weight", {w.dense_inter, H}, s);
      add(m + "up_proj.weight", {w.dense_inter, H}, s);
      add(m + "down_proj.weight", {H, w.dense_inter}, s);
      continue;
    }
    add(m + "gate.weight", {w.experts, H}, s);
    add(m + "e_score_correction_bias", {w.experts}, 0);
    for (int64_t e = 0; e < w.experts; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      add(x + "w1.weight", {w.expert_inter, H}, s);
      add(x + "w3.weight", {w.expert_inter, H}, s);
      add(x + "w2.weight", {H, w.expert_inter}, s);
    }
    add(m + "shared_experts.gate_proj.weight", {w.shared_inter, H}, s);
    add(m + "shared_experts.up_proj.weight", {w.shared_inter, H}, s);
    add(m + "shared_experts.down_proj.weight", {H, w.shared_inter}, s);
  }
  const std::string V = "vision_tower.vision_model.";
  const int64_t Vh = w.vision_hidden;
  add(V + "embeddings.patch_embedding.weight", {Vh, 3, 2, 14, 14}, s);
  add(V + "pre_layrnorm.weight", {Vh}, 0, 1);
  add(V + "pre_layrnorm.bias", {Vh}, 0);
  for (int64_t l = 0; l < w.vision_layers; ++l) {
    const std::string p = V + "encoder.layers." + std::to_string(l) + ".";
    for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      add(p + "self_attn." + n + ".weight", {Vh, Vh}, s);
      add(p + "self_attn." + n + ".bias", {Vh}, 0);
    }
    for (const char* n : {"layer_norm1", "layer_norm2"}) {
      add(p + n + ".weight", {Vh}, 0, 1);
      add(p + n + ".bias", {Vh}, 0);
    }
    add(p + "block_sparse_moe.fc1.weight", {2 * Vh, Vh}, s);
    add(p + "block_sparse_moe.fc1.bias", {2 * Vh}, 0);
    add(p + "block_sparse_moe.fc2.weight", {Vh, 2 * Vh}, s);
    add(p + "block_sparse_moe.fc2.bias", {Vh}, 0);
  }
  add("multi_modal_projector.linear_1.weight", {w.projector, Vh}, s);
  add("multi_modal_projector.linear_1.bias", {w.projector}, 0);
  add("multi_modal_projector.linear_2.weight", {H, w.projector}, s);
  add("multi_modal_projector.linear_2.bias", {H}, 0);
  add("patch_merge_mlp.linear_1.weight", {w.projector, 4 * H}, s);
  add("patch_merge_mlp.linear_1.bias", {w.projector}, 0);
  add("patch_merge_mlp.linear_2.weight", {H, w.projector}, s);
  add("patch_merge_mlp.linear_2.bias", {H}, 0);
  return t;
}

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint16_t Bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>(bits >> 16);
}

// Fills bf16 elements [first, last) of tensor t (element indices) at `out`.
void Fill(const Tensor& t, uint64_t first, uint64_t last, uint16_t* out, uint64_t stream) {
  if (t.stddev == 0) {
    std::fill(out, out + (last - first), Bf16(t.fill));
    return;
  }
  // Uniform on [-a, a] has standard deviation a / sqrt(3).
  const float a = t.stddev * std::sqrt(3.0f), scale = 2.0f * a / 65536.0f;
  uint64_t state = stream;
  for (uint64_t i = 0; i < last - first; i += 4) {
    const uint64_t r = SplitMix(state);
    for (uint64_t j = 0; j < 4 && i + j < last - first; ++j)
      out[i + j] = Bf16(static_cast<float>((r >> (16 * j)) & 0xffff) * scale - a);
  }
}

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "m3-make-random-checkpoint: %s\nusage: m3-make-random-checkpoint --out DIR "
               "[--layers N] [--experts N] [--vocab N] [--threads N] [--max-position N] "
               "[--seed S] [--hidden N] [--heads N] [--expert-inter N] [--shared-inter N] "
               "[--dense-inter N]\n",
               why.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Widths w;
  std::string out;
  uint64_t seed = 1;
  int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage("option " + a + " needs a value");
    const std::string v = argv[++i];
    int64_t n = 0;
    try {
      size_t used = 0;
      n = a == "--out" ? 0 : std::stoll(v, &used);
      if (a != "--out" && (used != v.size() || n <= 0)) throw std::invalid_argument(v);
    } catch (const std::exception&) {
      Usage(a + " must be a positive integer, not '" + v + "'");
    }
    if (a == "--out")
      out = v;
    else if (a == "--layers")
      w.layers = n;
    else if (a == "--experts")
      w.experts = n;
    else if (a == "--vocab")
      w.vocab = n;
    else if (a == "--threads")
      threads = n;
    else if (a == "--max-position")
      w.max_position = n;
    else if (a == "--seed")
      seed = static_cast<uint64_t>(n);
    else if (a == "--hidden")
      w.hidden = n;
    else if (a == "--heads")
      w.heads = n;
    else if (a == "--expert-inter")
      w.expert_inter = n;
    else if (a == "--shared-inter")
      w.shared_inter = n;
    else if (a == "--dense-inter")
      w.dense_inter = n;
    else
      Usage("unknown option " + a);
  }
  if (out.empty()) Usage("--out is required");
  if (w.layers < 2) Usage("--layers must be at least 2 (a full attention layer, then MSA)");
  if (w.experts < w.topk) Usage("--experts must be at least the top-k (4)");
  if (w.vocab < 16) Usage("--vocab must be at least 16");
  if (w.heads % w.kv_heads != 0) Usage("--heads must be a multiple of the 4 KV heads");
  const auto start = std::chrono::steady_clock::now();

  std::vector<Tensor> tensors = Tensors(w);
  json header = json::object();
  uint64_t at = 0;
  for (Tensor& t : tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    t.begin = at;
    t.end = at + 2 * n;
    at = t.end;
    header[t.name] = {{"dtype", "BF16"}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const uint64_t data_bytes = at, file_bytes = 8 + h.size() + data_bytes;

  std::filesystem::create_directories(out);
  const std::string path = out + "/model.safetensors";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) Usage("cannot create " + path + ": " + std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(file_bytes)) != 0)
    Usage("cannot size " + path + " to " + std::to_string(file_bytes) +
          " bytes: " + std::strerror(errno));
  void* map = ::mmap(nullptr, file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) Usage("cannot map " + path + ": " + std::strerror(errno));
  auto* base = static_cast<uint8_t*>(map);
  const uint64_t header_len = h.size();
  std::memcpy(base, &header_len, 8);  // little-endian host (x86-64, aarch64)
  std::memcpy(base + 8, h.data(), h.size());
  uint8_t* data = base + 8 + h.size();

  // 64 MiB chunks of the data section, taken in turn by the threads.
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  const uint64_t chunks = (data_bytes + kChunk - 1) / kChunk;
  std::atomic<uint64_t> next{0};
  auto work = [&] {
    for (uint64_t c = next++; c < chunks; c = next++) {
      const uint64_t lo = c * kChunk, hi = std::min(data_bytes, lo + kChunk);
      // The tensors overlapping [lo, hi): the first whose end is beyond lo, onwards.
      auto it = std::upper_bound(tensors.begin(), tensors.end(), lo,
                                 [](uint64_t v, const Tensor& t) { return v < t.end; });
      for (; it != tensors.end() && it->begin < hi; ++it) {
        const uint64_t b = std::max(lo, it->begin), e = std::min(hi, it->end);
        Fill(
            *it, (b - it->begin) / 2, (e - it->begin) / 2, reinterpret_cast<uint16_t*>(data + b),
            seed * 0x9e3779b97f4a7c15ULL ^ (c << 20) ^ static_cast<uint64_t>(it - tensors.begin()));
      }
    }
  };
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < threads; ++i) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  ::munmap(map, file_bytes);
  ::close(fd);

  std::ofstream(out + "/config.json") << m3::bench::RandomM3Config(w).dump(2);
  std::ofstream(out + "/generation_config.json") << json{{"eos_token_id", w.vocab - 3}}.dump(2);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("m3-make-random-checkpoint: %zu tensors, %.2f GB in %s, %.1f s (%.2f GB/s)\n",
              tensors.size(), static_cast<double>(file_bytes) / 1e9, path.c_str(), secs,
              static_cast<double>(file_bytes) / 1e9 / secs);
  return 0;
}
