// Processor settings from a model directory: transformers 5's processor_config.json and the
// older preprocessor_config.json / video_preprocessor_config.json are read as the reference
// reads them, and every bad value (huge, negative, non-numeric, inconsistent, unsupported) is
// a clear error naming the file and key when the directory is loaded, never a bad_alloc
// later. A --model that is not a model directory fails `preprocess` and `serve` at start.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gateway/media/m3_vision_processor.h"
#include "gateway/media/vision_processor.h"
#include "shared/error.h"
#include "tests/test_util.h"

using m3::ErrorCode;
using m3::media::LoadM3VisionConfig;
using m3::media::LoadVisionProcessor;
using m3::media::M3VisionConfig;

namespace {

// A fresh model directory holding `files` (name -> text).
std::string ModelDir(const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string dir = m3::test::TempDir();
  for (const auto& [name, text] : files) m3::test::WriteFile(dir + "/" + name, text);
  return dir;
}

std::pair<ErrorCode, std::string> LoadError(const std::string& dir) {
  try {
    LoadVisionProcessor(dir);
  } catch (const m3::Error& e) {
    return {e.code(), e.what()};
  } catch (const std::exception& e) {
    return {ErrorCode::kInternal, std::string("not an m3::Error: ") + e.what()};
  }
  return {ErrorCode::kInternal, "loaded without an error"};
}

}  // namespace

TEST_CASE("processor_config.json: image and video sections, size.longest_edge is max_pixels") {
  const M3VisionConfig c = LoadM3VisionConfig(m3::test::DataPath("chat-e2e/model"));
  CHECK(c.patch_size == 14);
  CHECK(c.temporal_patch_size == 2);
  CHECK(c.merge_size == 2);
  CHECK(c.image_min_pixels == 3136);
  CHECK(c.image_max_pixels == 50176);
  CHECK(c.video_min_pixels == 3136);
  CHECK(c.video_max_pixels == 602112);  // explicit max_pixels; the stale size {672, 672} ignored
  CHECK(c.video_total_pixels == 45158400);
  CHECK(c.video_fps == 1.0);
  CHECK(c.video_min_frames == 4);
  CHECK(c.video_max_frames == 768);
  CHECK_FALSE(c.video_sample_frames);
  CHECK(c.image_mean[1] == 0.4578275);
  CHECK(c.image_std[2] == 0.27577711);
}

TEST_CASE("older layout: preprocessor_config.json and video_preprocessor_config.json") {
  const std::string dir =
      ModelDir({{"preprocessor_config.json",
                 R"({"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2,
                     "image_mean": 0.5, "image_std": [0.5, 0.25, 0.5],
                     "size": {"shortest_edge": 1024, "longest_edge": 200704},
                     "min_pixels": 2048, "do_resize": true, "resample": 3})"},
                {"video_preprocessor_config.json",
                 R"({"patch_size": 16, "max_pixels": 100352, "fps": 2.0, "min_frames": 2,
                     "max_frames": 64, "total_pixels": 1000000, "do_sample_frames": true,
                     "size": {"height": 672, "width": 672}})"}});
  const M3VisionConfig c = LoadM3VisionConfig(dir);
  CHECK(c.patch_size == 16);
  CHECK(c.image_mean == std::array<double, 3>{0.5, 0.5, 0.5});
  CHECK(c.image_std[1] == 0.25);
  CHECK(c.image_min_pixels == 2048);  // an explicit min_pixels wins over size.shortest_edge
  CHECK(c.image_max_pixels == 200704);
  CHECK(c.video_max_pixels == 100352);
  CHECK(c.video_fps == 2.0);
  CHECK(c.video_min_frames == 2);
  CHECK(c.video_max_frames == 64);
  CHECK(c.video_total_pixels == 1000000);
  CHECK(c.video_sample_frames);
  // No config.json to check against: the processor loads with its own settings.
  const auto p = LoadVisionProcessor(dir);
  CHECK(p->Layout(1, 64, 64).patch_dim == 3 * 2 * 16 * 16);
}

TEST_CASE("processor_config.json's sections win over the separate files") {
  const std::string dir = ModelDir(
      {{"processor_config.json",
        R"({"image_processor": {"size": {"longest_edge": 50176, "shortest_edge": 3136}}})"},
       {"preprocessor_config.json", R"({"max_pixels": 99999999999})"},
       {"video_preprocessor_config.json", R"({"max_pixels": 200704})"}});
  const M3VisionConfig c = LoadM3VisionConfig(dir);
  CHECK(c.image_max_pixels == 50176);
  CHECK(c.video_max_pixels == 200704);  // no video section: the separate file is read
}

TEST_CASE("bad processor settings fail at load, naming the file and key") {
  struct Case {
    std::string file, text, needle;
    ErrorCode code = ErrorCode::kInvalidArgument;
  };
  const std::string pc = "processor_config.json", pre = "preprocessor_config.json",
                    video = "video_preprocessor_config.json";
  const std::vector<Case> cases = {
      {pc, R"({"image_processor": {"patch_size": 1e9}})", "image_processor.patch_size"},
      {pc, R"({"image_processor": {"size": {"longest_edge": 1e12}}})",
       "image_processor.size.longest_edge"},
      {pre, R"({"max_pixels": 1000000000000})", "max_pixels"},
      {pre, R"({"max_pixels": 18446744073709551615})", "max_pixels"},
      {pc, R"({"image_processor": {"size": {"shortest_edge": 100352, "longest_edge": 50176}}})",
       "image_processor.size.shortest_edge (100352) is over image_processor.size.longest_edge"},
      {pre, R"({"min_pixels": 100352, "max_pixels": 50176})", "min_pixels (100352) is over"},
      {pc, R"({"image_processor": {"merge_size": -2}})", "image_processor.merge_size"},
      {pc, R"({"image_processor": {"patch_size": 0}})", "image_processor.patch_size"},
      {pc, R"({"image_processor": {"patch_size": "fourteen"}})", "image_processor.patch_size"},
      {pc, R"({"image_processor": {"patch_size": 14.5}})", "image_processor.patch_size"},
      {pc, R"({"image_processor": {"temporal_patch_size": true}})", "temporal_patch_size"},
      {pc, R"({"image_processor": {"min_pixels": -1}})", "image_processor.min_pixels"},
      {pc, R"({"image_processor": {"image_mean": [0.5, 0.5]}})", "image_processor.image_mean"},
      {pc, R"({"image_processor": {"image_std": [0.5, 0, 0.5]}})", "image_processor.image_std"},
      {pc, R"({"image_processor": {"image_std": "wide"}})", "image_processor.image_std"},
      {pc, R"({"image_processor": {"size": 448}})", "image_processor.size must be an object"},
      {pc, R"({"image_processor": [1, 2]})", "image_processor must be an object"},
      {pc, R"({"video_processor": {"fps": 0}})", "video_processor.fps"},
      {pc, R"({"video_processor": {"fps": -1.5}})", "video_processor.fps"},
      {pc, R"({"video_processor": {"fps": "fast"}})", "video_processor.fps"},
      {pc, R"({"video_processor": {"total_pixels": 1e15}})", "video_processor.total_pixels"},
      {pc, R"({"video_processor": {"max_frames": 1e12}})", "video_processor.max_frames"},
      {pc, R"({"video_processor": {"min_frames": 10, "max_frames": 5}})",
       "video_processor.min_frames (10) is over video_processor.max_frames"},
      {pc, R"({"video_processor": {"max_pixels": 1e12}})", "video_processor.max_pixels"},
      {pc, R"({"video_processor": {"do_sample_frames": "yes"}})", "do_sample_frames"},
      {pc, R"({"image_processor": {"merge_size": 2}, "video_processor": {"merge_size": 4}})",
       "video_processor.merge_size (4) differs from"},
      {video, R"({"patch_size": 16})", "differs from",  // preprocessor_config.json says 14
       ErrorCode::kInvalidArgument},
      {pc, R"({"image_processor": {"do_normalize": false}})", "image_processor.do_normalize",
       ErrorCode::kUnsupported},
      {pc, R"({"image_processor": {"resample": 2}})", "image_processor.resample",
       ErrorCode::kUnsupported},
      {pc, R"({"image_processor": {"rescale_factor": 1.0}})", "image_processor.rescale_factor",
       ErrorCode::kUnsupported},
      {pc, R"({"image_processor": )", "invalid JSON"},
      {pre, R"([14, 2, 2])", "not a JSON object"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    std::vector<std::pair<std::string, std::string>> files = {{c.file, c.text}};
    if (c.file == video) files.push_back({pre, R"({"patch_size": 14})"});
    const std::string dir = ModelDir(files);
    const auto [code, message] = LoadError(dir);
    CAPTURE(message);
    CHECK(code == c.code);
    CHECK(message.find(dir + "/" + c.file) != std::string::npos);
    CHECK(message.find(c.needle) != std::string::npos);
  }
}

TEST_CASE("the processor's patch layout must be the vision tower's (config.json)") {
  const std::string config = m3::test::ReadFile(m3::test::DataPath("chat-e2e/model/config.json"));
  for (const char* key : {"patch_size", "merge_size", "temporal_patch_size"}) {
    CAPTURE(key);
    const std::string dir = ModelDir(
        {{"config.json", config},
         {"processor_config.json", std::string(R"({"image_processor": {")") + key + R"(": 1}})"}});
    const auto [code, message] = LoadError(dir);
    CHECK(code == ErrorCode::kInvalidArgument);
    CHECK(message.find(std::string("the processor's ") + key + " (1) differs from config.json") !=
          std::string::npos);
  }
  // The same file with the model's own values loads.
  const std::string ok =
      ModelDir({{"config.json", config}, {"processor_config.json", R"({"image_processor": {}})"}});
  CHECK_NOTHROW(LoadVisionProcessor(ok));
}

TEST_CASE("a model directory that does not exist or holds no model files is refused") {
  auto [code, message] = LoadError("/nonexistent/model");
  CHECK(code == ErrorCode::kNotFound);
  CHECK(message == "model directory '/nonexistent/model' does not exist");
  const std::string file = m3::test::TempDir() + "/file";
  m3::test::WriteFile(file, "x");
  std::tie(code, message) = LoadError(file);
  CHECK(code == ErrorCode::kInvalidArgument);
  CHECK(message.find("is not a directory") != std::string::npos);
  std::tie(code, message) = LoadError(ModelDir({{"README.md", "hello"}}));
  CHECK(code == ErrorCode::kNotFound);
  CHECK(message.find("is not a model directory") != std::string::npos);
  // No --model at all keeps the family's defaults.
  CHECK_NOTHROW(LoadVisionProcessor(""));
}

namespace {

// Runs argv with a deadline: a server that wrongly starts is killed and reported, not waited
// on forever. Returns the exit status (-1 when killed) and stderr.
std::pair<int, std::string> RunBriefly(const std::vector<std::string>& argv) {
  const std::string err_path = m3::test::TempDir() + "/stderr";
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    FILE* err = std::freopen(err_path.c_str(), "w", stderr);
    (void)err;
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return {-1, "still running after 20 s"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, m3::test::ReadFile(err_path)};
}

}  // namespace

TEST_CASE("CLI: preprocess and serve refuse a bad --model at start") {
  const std::string bin = m3::test::BinPath("m3-gateway");
  const std::string image = m3::test::DataPath("chat-e2e/images/tall.png");
  const std::string out = m3::test::TempDir() + "/out.safetensors";
  const std::string bad_config =
      ModelDir({{"processor_config.json", R"({"image_processor": {"patch_size": 1e9}})"}});
  for (const std::string& model : {std::string("/nonexistent"), bad_config}) {
    CAPTURE(model);
    const std::string needle =
        model == "/nonexistent" ? "'/nonexistent' does not exist" : "image_processor.patch_size";
    auto r = m3::test::RunProcess(
        {bin, "preprocess", "--model", model, "--image", image, "--output", out});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(needle) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out));
    const auto [code, err] = RunBriefly(
        {bin, "serve", "--preprocess-only", "--port", "0", "--model", model, "--workers", "1"});
    CHECK(code == 2);
    CHECK(err.find(needle) != std::string::npos);
  }
  // The real model directory works.
  auto r = m3::test::RunProcess({bin, "preprocess", "--model", m3::test::DataPath("chat-e2e/model"),
                                 "--image", image, "--output", out});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("\"grid_thw\":[1,22,6]") != std::string::npos);  // 300x90 at max 50176
}
