// The table of architectures and the model_type lookup in config.json.
#include "engine/model_registry.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/minimax_m3/m3_runner.h"
#include "shared/error.h"

namespace m3::engine {
namespace {

struct Architecture {
  const char* model_type;
  std::function<std::unique_ptr<ModelRunner>(const std::string&, const RunnerOptions&)> load;
};

const std::vector<Architecture>& Table() {
  static const std::vector<Architecture> table = {
      {"minimax_m3_vl", minimax_m3::LoadMiniMaxM3Runner},
  };
  return table;
}

std::string ReadModelType(const std::string& dir) {
  auto path = std::filesystem::path(dir) / "config.json";
  std::ifstream in(path);
  Require(in.good(), ErrorCode::kNotFound, "cannot open " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kDataLoss, "malformed " + path.string() + ": " + e.what());
  }
  Require(j.is_object() && j.contains("model_type") && j["model_type"].is_string(),
          ErrorCode::kInvalidArgument, path.string() + " has no string \"model_type\"");
  return j["model_type"].get<std::string>();
}

}  // namespace

std::vector<std::string> SupportedArchitectures() {
  std::vector<std::string> names;
  for (const auto& a : Table()) names.push_back(a.model_type);
  return names;
}

std::unique_ptr<ModelRunner> LoadModelRunner(const std::string& model_dir,
                                             const RunnerOptions& options) {
  std::string type = ReadModelType(model_dir);
  for (const auto& a : Table())
    if (type == a.model_type) return a.load(model_dir, options);
  std::string known;
  for (const auto& n : SupportedArchitectures()) {
    if (!known.empty()) known += ", ";
    known += n;
  }
  throw Error(ErrorCode::kUnsupported,
              "model_type \"" + type + "\" is not supported (known: " + known + ")");
}

std::unique_ptr<Model> LoadModel(const std::string& model_dir, const SingleSequenceOptions& options,
                                 const RunnerOptions& runner) {
  return MakeSingleSequenceModel(LoadModelRunner(model_dir, runner), options);
}

}  // namespace m3::engine
