// cuda_bf16_golden_compare: the CUDA engine (bf16) against a float32 reference whose weights are
// exactly bf16-representable (scripts/golden/make_bf16_golden.py, chat_e2e_logits_reference.py),
// so the only difference left is the engine's bf16 activations. A program rather than a test
// because its reference is generated on the GPU machine in the same call (the sets are too large
// to keep in the tree); scripts/device/bf16_goldens.sh runs it there.
//
// Per case (every "<case>.logits" in CASES): the prompt logits' relative L2 against the reference
// (one-step and chunked prefill; the float32 CPU engine beside them, which checks the reference
// itself), greedy tokens against the reference's, and at the first differing token whether it is
// a near-tie: the reference's margin between its token and the engine's is at most twice the
// engine's largest logit error on that row (so the rounding alone can swap them). The row is the
// engine's teacher-forced logits on the prompt plus the reference's tokens, compared with the
// reference's generate() logits of every step ("<case>.step_logits").
// Exit 0 when every case's logits are within --tol and every greedy difference is a near-tie.
// --perturb-embeddings EPS measures the reference's own sensitivity instead: the same numbers
// for the model with its token-embedding table multiplied elementwise by (1 + EPS u), u uniform
// in [-1, 1] from a fixed seed (EPS 1e-3 is below bf16's relative rounding of 2^-9), run in
// float32 on --device (cpu: no GPU needed). Its logits error is how far any implementation
// rounding the first hidden state that much lands from the reference.
//
// Usage: cuda_bf16_golden_compare MODEL_DIR CASES.safetensors [STEPS.safetensors]
//          [--tol 2e-2] [--stop-at-eos] [--device cuda] [--perturb-embeddings EPS]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "engine/generate.h"
#include "engine/model_registry.h"
#include "shared/safetensors.h"
#include "shared/tensor.h"
#include "tests/engine/golden_cases.h"

namespace m3 {
namespace {

double RelL2(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) throw std::runtime_error("rel L2 of different sizes");
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

struct Args {
  std::string model_dir, cases, steps, device = "cuda";
  double tol = 2e-2;
  double perturb = 0;
  bool stop_at_eos = false;
};

Args Parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(s + " needs a value");
      return argv[++i];
    };
    if (s == "--tol") {
      a.tol = std::stod(value());
    } else if (s == "--stop-at-eos") {
      a.stop_at_eos = true;
    } else if (s == "--device") {
      a.device = value();
    } else if (s == "--perturb-embeddings") {
      a.perturb = std::stod(value());
    } else if (s.rfind("--", 0) == 0) {
      throw std::runtime_error("unknown option " + s);
    } else {
      pos.push_back(s);
    }
  }
  if (pos.size() < 2 || pos.size() > 3)
    throw std::runtime_error(
        "usage: cuda_bf16_golden_compare MODEL_DIR CASES.safetensors [STEPS.safetensors] "
        "[--tol X] [--stop-at-eos] [--device D] [--perturb-embeddings EPS]");
  a.model_dir = pos[0];
  a.cases = pos[1];
  if (pos.size() == 3) a.steps = pos[2];
  return a;
}

std::vector<float> Row(const std::vector<float>& m, int64_t row, int64_t vocab) {
  return {m.begin() + row * vocab, m.begin() + (row + 1) * vocab};
}

// A copy of MODEL_DIR whose token-embedding table (as float32) is multiplied by (1 + eps u).
std::string PerturbedEmbeddings(const std::string& model_dir, double eps) {
  namespace fs = std::filesystem;
  const std::string dst = fs::temp_directory_path().string() + "/perturbed-" +
                          fs::path(model_dir).parent_path().filename().string() + "-" +
                          std::to_string(getpid());
  fs::create_directories(dst);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  int64_t perturbed = 0;
  for (const auto& e : fs::directory_iterator(model_dir)) {
    if (e.path().extension() != ".safetensors") {
      fs::copy_file(e.path(), dst + "/" + e.path().filename().string());
      continue;
    }
    SafetensorsFile f = SafetensorsFile::Open(e.path().string());
    NamedTensors out;
    for (const std::string& name : f.Names()) {
      TensorView v = f.Get(name);
      const bool embed = name.ends_with("embed_tokens.weight") &&
                         (v.dtype == DType::kF32 || v.dtype == DType::kBF16);
      HostTensor t(embed ? DType::kF32 : v.dtype, v.shape);
      if (!embed) {
        std::copy_n(v.data, v.nbytes, t.data());
        out.emplace_back(name, std::move(t));
        continue;
      }
      // A bf16 table becomes float32 so the perturbation is not rounded away.
      const std::vector<float> src = ToFloat32(v, name);
      auto x = t.as<float>();
      for (size_t i = 0; i < src.size(); ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const double u = static_cast<double>(state >> 11) / 9007199254740992.0 * 2 - 1;
        x[i] = static_cast<float>(src[i] * (1 + eps * u));
      }
      ++perturbed;
      out.emplace_back(name, std::move(t));
    }
    WriteSafetensors(dst + "/" + e.path().filename().string(), out);
  }
  if (perturbed == 0)
    throw std::runtime_error(model_dir + " has no float32 or bf16 embed_tokens.weight to perturb");
  return dst;
}

int Run(const Args& a) {
  test::GoldenSet g{a.model_dir, SafetensorsFile::Open(a.cases), nullptr};
  std::optional<SafetensorsFile> steps_file;
  if (!a.steps.empty()) steps_file.emplace(SafetensorsFile::Open(a.steps));
  auto steps_of = [&](const std::string& c) -> std::optional<std::pair<Shape, std::vector<float>>> {
    const std::string key = c + ".step_logits";
    for (const SafetensorsFile* f : {&g.cases, steps_file ? &*steps_file : nullptr}) {
      if (f && f->Has(key)) return std::make_pair(f->Get(key).shape, ToFloat32(f->Get(key), key));
    }
    return std::nullopt;
  };

  engine::RunnerOptions dev;
  dev.device = a.device;
  engine::SingleSequenceOptions chunked;
  chunked.page_size = 4;
  chunked.prefill_chunk = 5;
  const std::string dir = a.perturb > 0 ? PerturbedEmbeddings(a.model_dir, a.perturb) : a.model_dir;
  if (a.perturb > 0)
    std::printf("token embeddings perturbed by a relative %.1e (uniform), on %s\n", a.perturb,
                a.device.c_str());
  auto model = engine::LoadModel(dir, {}, dev);
  auto model_chunked = engine::LoadModel(dir, chunked, dev);
  auto cpu = engine::LoadModel(a.model_dir);
  const int64_t vocab = model->vocab_size();

  std::vector<std::string> names;
  for (const std::string& k : g.cases.Names()) {
    const std::string suffix = ".logits";
    if (k.size() > suffix.size() && k.ends_with(suffix) && k.find('.') == k.size() - suffix.size())
      names.push_back(k.substr(0, k.size() - suffix.size()));
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) throw std::runtime_error(a.cases + " holds no <case>.logits");

  bool ok = true;
  double worst = 0;
  int cases_equal = 0, near_ties = 0, real_flips = 0;
  for (const std::string& c : names) {
    const engine::ModelInputs in = g.Inputs(c);
    const std::vector<float> want = g.Floats(c + ".logits");
    auto prefill = [&](engine::Model& m, const engine::ModelInputs& x) {
      auto seq = m.NewSequence();
      return m.Prefill(*seq, x, {}).logits;
    };
    const double err = RelL2(prefill(*model, in), want);
    const double err_chunked = RelL2(prefill(*model_chunked, in), want);
    const double err_cpu = RelL2(prefill(*cpu, in), want);
    worst = std::max({worst, err, err_chunked});
    const bool logits_ok = err <= a.tol && err_chunked <= a.tol;

    const std::vector<int64_t> ref = g.Ints(c + ".greedy_tokens");
    engine::GenerateOptions opt;
    opt.max_new_tokens = static_cast<int64_t>(ref.size());
    opt.ignore_eos = !a.stop_at_eos;
    const std::vector<int64_t> got = engine::Generate(*model, in, opt);
    size_t same = 0;
    while (same < got.size() && same < ref.size() && got[same] == ref[same]) ++same;
    const bool tokens_equal = same == ref.size() && got.size() == ref.size();
    cases_equal += tokens_equal;

    // Teacher-forced rows on the prompt plus the reference's tokens against its step logits.
    std::string steps_note = "no step logits";
    std::string tie_note;
    bool tie_ok = tokens_equal;
    if (auto st = steps_of(c); st && !ref.empty()) {
      engine::ModelInputs forced = in;
      forced.input_ids.insert(forced.input_ids.end(), ref.begin(), ref.end() - 1);
      const std::vector<float> rows = prefill(*model, forced);
      const int64_t p = static_cast<int64_t>(in.input_ids.size());
      const int64_t n = st->first[0];
      double worst_step = 0;
      for (int64_t j = 0; j < n && j < static_cast<int64_t>(ref.size()); ++j)
        worst_step =
            std::max(worst_step, RelL2(Row(rows, p - 1 + j, vocab), Row(st->second, j, vocab)));
      char buf[256];
      std::snprintf(buf, sizeof buf, "teacher-forced step logits worst rel L2 %.3e", worst_step);
      steps_note = buf;
      if (!tokens_equal && same < ref.size() && same < got.size() &&
          static_cast<int64_t>(same) < n) {
        const auto e = Row(rows, p - 1 + static_cast<int64_t>(same), vocab);
        const auto r = Row(st->second, static_cast<int64_t>(same), vocab);
        double max_err = 0, sq = 0;
        for (int64_t v = 0; v < vocab; ++v) {
          max_err = std::max(max_err, std::abs(double(e[v]) - r[v]));
          sq += double(r[v]) * r[v];
        }
        const double margin = double(r[ref[same]]) - r[got[same]];
        const bool tie = margin <= 2 * max_err;
        tie_ok = tie;
        (tie ? near_ties : real_flips) += 1;
        std::snprintf(buf, sizeof buf,
                      "; step %zu: reference margin %.4g (%.3g of the row's rms), engine max "
                      "logit error %.4g: %s",
                      same, margin, margin / std::sqrt(sq / vocab), max_err,
                      tie ? "NEAR-TIE" : "NOT a near-tie");
        tie_note = buf;
      } else if (!tokens_equal) {
        tie_ok = false;
        tie_note = "; lengths differ";
        ++real_flips;
      }
    } else if (!tokens_equal) {
      ++real_flips;
    }
    ok = ok && logits_ok && tie_ok;
    std::printf(
        "case %-10s logits rel L2 %.3e (chunked %.3e; f32 CPU engine %.3e) %s; greedy %zu/%zu "
        "equal%s; %s\n",
        c.c_str(), err, err_chunked, err_cpu, logits_ok ? "ok" : "OVER", same, ref.size(),
        tie_note.c_str(), steps_note.c_str());
  }
  std::printf(
      "summary %s: %zu cases, worst logits rel L2 %.3e (tol %.1e), greedy identical in %d, "
      "near-tie flips %d, other flips %d: %s\n",
      a.model_dir.c_str(), names.size(), worst, a.tol, cases_equal, near_ties, real_flips,
      ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace m3

int main(int argc, char** argv) {
  try {
    return m3::Run(m3::Parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_bf16_golden_compare: %s\n", e.what());
    return 2;
  }
}
