// LoadChatTemplateSource: where a Hugging Face model directory keeps its chat template.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gateway/template/chat_template.h"
#include "shared/error.h"

namespace m3::tmpl {

namespace {

std::string ReadText(const std::filesystem::path& path) {
  std::error_code ec;
  Require(std::filesystem::is_regular_file(path, ec), ErrorCode::kInvalidArgument,
          path.string() + " is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kNotFound, "cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json ReadJsonObject(const std::filesystem::path& path) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(ReadText(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kDataLoss, path.string() + ": " + e.what());
  }
  if (!j.is_object()) throw Error(ErrorCode::kDataLoss, path.string() + ": not a JSON object");
  return j;
}

}  // namespace

// transformers 5 saves chat_template.jinja; processors of transformers 4 saved
// chat_template.json ({"chat_template": "..."}); tokenizers keep it in tokenizer_config.json.
// The first that holds one wins, as in transformers.
std::string LoadChatTemplateSource(const std::string& model_dir) {
  namespace fs = std::filesystem;
  fs::path dir(model_dir);
  std::error_code ec;
  if (fs::exists(dir / "chat_template.jinja", ec)) return ReadText(dir / "chat_template.jinja");
  if (fs::exists(dir / "chat_template.json", ec)) {
    const fs::path path = dir / "chat_template.json";
    const auto j = ReadJsonObject(path);
    if (j.contains("chat_template") && j["chat_template"].is_string()) {
      return j["chat_template"].get<std::string>();
    }
    Require(!j.contains("chat_template") || j["chat_template"].is_null(),
            ErrorCode::kInvalidArgument, path.string() + ": chat_template must be a string");
  }
  fs::path config = dir / "tokenizer_config.json";
  if (!fs::exists(config, ec)) {
    throw Error(
        ErrorCode::kNotFound,
        "no chat_template.jinja, chat_template.json or tokenizer_config.json in " + model_dir);
  }
  const nlohmann::ordered_json j = ReadJsonObject(config);
  if (!j.contains("chat_template") || j["chat_template"].is_null()) {
    throw Error(ErrorCode::kNotFound, config.string() + " has no chat_template (and " + model_dir +
                                          " has no chat_template.jinja)");
  }
  const auto& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const auto& entry : t) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
    throw Error(ErrorCode::kNotFound, config.string() + ": chat_template list has no \"default\"");
  }
  throw Error(ErrorCode::kInvalidArgument,
              config.string() + ": chat_template must be a string or a list of {name, template}");
}

}  // namespace m3::tmpl
