// Tensor / expert parallelism on the CPU (ranks are threads, InProcessCommunicator): for
// m3-tiny, m3-alt and the demo model, every (tp, ep) the model's shapes allow gives the greedy
// tokens of the single-rank runner and logits within 1e-5 relative L2 (float32, another
// summation order), through LoadModelRunner (a prompt with an image, then decodes) and through
// EngineCore (the golden / demo prompts with images and video batched on a tight page pool:
// chunked prefill, preemption, prefix-cache hits); parallel configs the model cannot take are
// refused naming the setting.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "engine/minimax_m3/m3_config.h"
#include "engine/minimax_m3/m3_shard_plan.h"
#include "engine/model_registry.h"
#include "engine/parallel/in_process_communicator.h"
#include "engine/parallel/rank_threads.h"
#include "engine/step/model_runner.h"
#include "shared/error.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/engine/golden_cases.h"
#include "tests/parallel/parallel_checks.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using engine::minimax_m3::LoadModelConfig;
using engine::minimax_m3::ModelConfig;

std::unique_ptr<engine::ModelRunner> Load(const std::string& set, Parallel p) {
  engine::RunnerOptions o;
  o.tensor_parallel = p.tp;
  o.expert_parallel = p.ep;
  return engine::LoadModelRunner(DataPath(set + "/model"), o);
}

// float32 on both sides, only the summation order differs.
constexpr ParityTolerance kCpu{1e-5, 1e-4};

void CheckRunner(const std::string& set, const engine::ModelInputs& in, Parallel p) {
  CheckRunnerParity(set, "cpu", in, p, kCpu);
}

// Preemption and prefix hits summed over a test case's engine runs (all in one process).
EngineExercise exercised;

void CheckEngine(const std::string& set, const std::vector<engine::ModelInputs>& prompts,
                 Parallel p) {
  exercised += CheckEngineParity(set, "cpu", prompts, p, kCpu);
}

void CheckExercised() {
  CHECK(exercised.preemptions > 0);
  CHECK(exercised.prefix_hit_tokens > 0);
  exercised = {};
}

std::vector<engine::ModelInputs> GoldenPrompts(const std::string& set) {
  const GoldenSet& g = Golden(set);
  return {g.Inputs("text"), g.Inputs("image"), g.Inputs("image2"), g.Inputs("video")};
}

std::vector<engine::ModelInputs> DemoInputs() {
  std::vector<engine::ModelInputs> out;
  for (const DemoPrompt& p : DemoPrompts()) out.push_back(p.inputs);
  return out;
}

TEST_CASE("m3-tiny: tp 2, ep 2, tp 2 + ep 2, tp 4, ep 4 equal the single rank") {
  const engine::ModelInputs image = Golden("m3-tiny").Inputs("image");
  for (Parallel p : {Parallel{2, 1}, Parallel{1, 2}, Parallel{2, 2}, Parallel{4, 1}, Parallel{1, 4},
                     Parallel{4, 4}})
    CheckRunner("m3-tiny", image, p);
  for (Parallel p : {Parallel{2, 1}, Parallel{1, 2}, Parallel{2, 2}})
    CheckEngine("m3-tiny", GoldenPrompts("m3-tiny"), p);
  CheckExercised();
}

TEST_CASE("m3-alt (3 KV heads, 6 experts): ep 2 equals the single rank") {
  CheckRunner("m3-alt", Golden("m3-alt").Inputs("image"), {1, 2});
  // Twice: whether a run preempts depends on timing; two runs make a miss unlikely.
  for (int i = 0; i < 2; ++i) CheckEngine("m3-alt", GoldenPrompts("m3-alt"), {1, 2});
  CheckExercised();
}

TEST_CASE("demo model: tp 2, ep 2, tp 2 + ep 2 equal the single rank") {
  const std::vector<engine::ModelInputs> prompts = DemoInputs();
  for (Parallel p : {Parallel{2, 1}, Parallel{1, 2}, Parallel{2, 2}}) {
    CheckRunner("demo-model", prompts.back(), p);
    CheckEngine("demo-model", prompts, p);
  }
  CheckExercised();
}

void CheckRefused(const std::string& set, Parallel p, const std::string& needle,
                  ErrorCode code = ErrorCode::kInvalidArgument) {
  CAPTURE(set);
  CAPTURE(p.tp);
  CAPTURE(p.ep);
  try {
    Load(set, p);
    FAIL("loaded");
  } catch (const Error& e) {
    CHECK(e.code() == code);
    CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

TEST_CASE("parallel configs the model cannot take are refused by name") {
  CheckRefused("m3-tiny", {3, 1}, "num_attention_heads 4");
  CheckRefused("m3-tiny", {0, 1}, "tensor parallel size must be >= 1");
  CheckRefused("m3-tiny", {1, -1}, "expert parallel size must be >= 1");
  CheckRefused("m3-tiny", {2, 4}, "must be equal");
  CheckRefused("m3-tiny", {1, 3}, "num_local_experts 8");
  CheckRefused("m3-tiny", {8, 1}, "num_attention_heads 4");
  CheckRefused("m3-alt", {2, 1}, "num_key_value_heads 3");
  CheckRefused("m3-alt", {1, 4}, "num_local_experts 6");
  CheckRefused("m3-alt", {1, 3}, "dense_intermediate_size 80");
  // ShardPlan directly: the ranges of a rank.
  const ModelConfig c = LoadModelConfig(DataPath("m3-tiny/model"));
  const engine::minimax_m3::ShardPlan r3 = engine::minimax_m3::MakeShardPlan(c.text, 4, 4, 3);
  CHECK(r3.q_heads.first == 3);
  CHECK(r3.q_heads.count == 1);
  CHECK(r3.kv_heads.first == 1);  // 4 ranks, 2 KV heads: ranks 2 and 3 keep KV head 1
  CHECK(r3.kv_heads.count == 1);
  CHECK(r3.experts.first == 6);
  CHECK(r3.experts.count == 2);
  CHECK(r3.expert_inter.count == c.text.intermediate_size);
  CHECK(r3.vocab_gather);  // 4 ranks divide m3-tiny's 512 entries
  CHECK(r3.vocab.first == 384);
  CHECK(r3.vocab.count == 128);
  // The demo model's 439 entries are not divisible by 2: its LM head stays whole.
  const ModelConfig demo = LoadModelConfig(DataPath("demo-model/model"));
  const engine::minimax_m3::ShardPlan d1 = engine::minimax_m3::MakeShardPlan(demo.text, 2, 2, 1);
  CHECK(!d1.vocab_gather);
  CHECK(d1.vocab.count == demo.text.vocab_size);
  const engine::minimax_m3::ShardPlan t1 = engine::minimax_m3::MakeShardPlan(c.text, 2, 1, 1);
  CHECK(t1.experts.count == c.text.num_local_experts);
  CHECK(t1.expert_inter.first == c.text.intermediate_size / 2);
}

TEST_CASE("an unknown all-reduce is refused by name") {
  engine::RunnerOptions o;
  o.tensor_parallel = 2;
  o.all_reduce = "fast";
  CHECK_THROWS_WITH(engine::LoadModelRunner(DataPath("m3-tiny/model"), o),
                    "all-reduce must be 'auto', 'nccl' or 'custom', not 'fast'");
}

TEST_CASE(
    "m3-engine serve refuses bad --tensor-parallel / --expert-parallel / --all-reduce with a "
    "message") {
  struct Bad {
    std::vector<std::string> flags;
    std::string needle;
  };
  const Bad cases[] = {
      {{"--tensor-parallel", "3"}, "num_attention_heads 4"},
      {{"--tensor-parallel", "0"}, "--tensor-parallel must be in [1, 64]"},
      {{"--expert-parallel", "x"}, "expert-parallel"},
      {{"--tensor-parallel", "2", "--expert-parallel", "4"}, "must be equal"},
      {{"--expert-parallel", "3"}, "num_local_experts 8"},
      {{"--device", "cuda", "--tensor-parallel", "2"},
       "tensor parallel 2 / expert parallel 1 on cuda: "},
      {{"--tensor-parallel", "2", "--all-reduce", "fast"},
       "--all-reduce must be 'auto' or 'nccl' or 'custom', not 'fast'"},
      {{"--tensor-parallel", "2", "--all-reduce", "nccl"}, "--all-reduce needs a GPU --device"},
  };
  for (const Bad& b : cases) {
    std::vector<std::string> argv = {BinPath("m3-engine"),      "serve",  "--model",
                                     DataPath("m3-tiny/model"), "--port", "0"};
    argv.insert(argv.end(), b.flags.begin(), b.flags.end());
    const ProcessResult r = RunProcess(argv);
    CAPTURE(r.err);
    if (r.err.find("without gRPC") != std::string::npos) return;  // no serve in this build
    CHECK(r.exit_code != 0);
    CHECK(r.err.find(b.needle) != std::string::npos);
  }
}

TEST_CASE("in-process AllReduce: rank-ordered float32 sum, bf16, mismatched shapes refused") {
  constexpr int kRanks = 3;
  auto group = std::make_shared<engine::parallel::InProcessGroup>(kRanks);
  std::vector<std::vector<float>> data(kRanks);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      engine::parallel::InProcessCommunicator comm(group, r);
      struct Buf : engine::backend::DeviceBuffer {
        std::vector<float>* v;
        void* data() override { return v->data(); }
        size_t bytes() const override { return v->size() * 4; }
      };
      data[r].resize(1001);
      for (size_t i = 0; i < data[r].size(); ++i)
        data[r][i] = 1e8f * (r == 0) + float(r + i) * 0.25f;
      auto buf = std::make_shared<Buf>();
      buf->v = &data[r];
      engine::backend::DeviceTensor t{buf, 0, DType::kF32, {1001}};
      comm.AllReduceSum(t);
      engine::backend::DeviceTensor small{buf, 0, DType::kF32, {static_cast<int64_t>(10 + r)}};
      try {
        comm.AllReduceSum(small);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
      comm.Barrier();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    CHECK(errors[r].find("different shapes") != std::string::npos);
    for (size_t i = 0; i < 1001; ++i) {
      // (rank 0 + rank 1) + rank 2 in float32, whatever the threads' timing.
      const float want = (1e8f + float(i) * 0.25f + float(1 + i) * 0.25f) + float(2 + i) * 0.25f;
      REQUIRE(data[r][i] == want);
    }
  }
}

// A host tensor over `v` (the CPU backend's tensors are host memory).
engine::backend::DeviceTensor HostTensor(std::vector<float>& v) {
  struct Buf : engine::backend::DeviceBuffer {
    std::vector<float>* v = nullptr;
    void* data() override { return v->data(); }
    size_t bytes() const override { return v->size() * 4; }
  };
  auto buf = std::make_shared<Buf>();
  buf->v = &v;
  return {buf, 0, DType::kF32, {static_cast<int64_t>(v.size())}};
}

TEST_CASE("a rank failing outside a collective releases the others; the group works after") {
  constexpr int kRanks = 3;
  auto group = std::make_shared<engine::parallel::InProcessGroup>(kRanks);
  engine::parallel::RankThreads threads(kRanks);
  threads.SetOnError([&](int) { group->Abort(); }, [&] { group->Reset(); });
  std::vector<std::unique_ptr<engine::parallel::InProcessCommunicator>> comms;
  for (int r = 0; r < kRanks; ++r)
    comms.push_back(std::make_unique<engine::parallel::InProcessCommunicator>(group, r));
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(64, 1.0f));
  // Ranks 0 and 1 wait in an AllReduce that rank 2 never joins: without the abort they would
  // wait forever. The first failure (rank 2's) is what Run reports.
  try {
    threads.Run([&](int r) {
      if (r == 2) throw Error(ErrorCode::kInternal, "rank 2 failed");
      comms[r]->AllReduceSum(HostTensor(data[r]));
    });
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "rank 2 failed");
  }
  for (auto& d : data) d.assign(64, 1.0f);
  threads.Run([&](int r) { comms[r]->AllReduceSum(HostTensor(data[r])); });
  for (const auto& d : data) CHECK(d == std::vector<float>(64, 3.0f));
}

TEST_CASE("ranks stuck after a peer failed are released by on_stuck; the group then refuses") {
  // As GPU ranks in NCCL: the waiting ranks cannot be released from the failing rank's thread,
  // only by the stuck hook (the group's abort), after the grace period.
  constexpr int kRanks = 3;
  engine::parallel::RankThreads threads(kRanks);
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  int stuck_calls = 0;
  threads.SetOnStuck(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        ++stuck_calls;
        released = true;
        cv.notify_all();
      },
      std::chrono::milliseconds(50));
  // A job whose ranks all finish, even one that fails on every rank, is not stuck.
  threads.Run([](int) {});
  CHECK_THROWS_WITH(threads.Run([](int) { throw Error(ErrorCode::kInvalidArgument, "bad"); }),
                    "bad");
  CHECK_FALSE(threads.broken());
  try {
    threads.Run([&](int r) {
      if (r == 1) throw Error(ErrorCode::kInternal, "rank 1 failed");
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return released; });
    });
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "rank 1 failed");
  }
  CHECK(stuck_calls == 1);
  CHECK(threads.broken());
  bool ran = false;
  try {
    threads.Run([&](int) { ran = true; });
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kUnavailable);
    CHECK(std::string(e.what()).find("rank 1 failed") != std::string::npos);
  }
  CHECK_FALSE(ran);
}

TEST_CASE("a malformed batch is refused on every rank; the parallel runner then runs on") {
  auto runner = Load("m3-tiny", {2, 2});
  runner->AllocateKvCache(8, 4);
  engine::ForwardBatch b;
  b.token_ids = {1, 100000};
  b.positions = {0, 1};
  b.slot_mapping = {0, 1};
  b.query_start = {0, 2};
  b.context_lens = {0};
  b.block_tables = {0};
  b.max_pages_per_seq = 1;
  b.logits_rows = {1};
  std::vector<float> logits;
  try {
    runner->Execute(b, logits);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("outside the vocabulary") != std::string::npos);
  }
  CheckRunner("m3-tiny", Golden("m3-tiny").Inputs("text"), {2, 2});
}

}  // namespace
}  // namespace m3::test
