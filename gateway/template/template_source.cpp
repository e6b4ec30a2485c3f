// LoadChatTemplateSource: where a Hugging Face model directory keeps its chat template.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gateway/template/chat_template.h"
#include "shared/error.h"

namespace m3::tmpl {

namespace {

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kNotFound, "cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string LoadChatTemplateSource(const std::string& model_dir) {
  namespace fs = std::filesystem;
  fs::path dir(model_dir);
  if (fs::exists(dir / "chat_template.jinja")) return ReadText(dir / "chat_template.jinja");
  fs::path config = dir / "tokenizer_config.json";
  if (!fs::exists(config)) {
    throw Error(ErrorCode::kNotFound,
                "no chat_template.jinja or tokenizer_config.json in " + model_dir);
  }
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(ReadText(config));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kDataLoss, config.string() + ": " + e.what());
  }
  if (!j.is_object() || !j.contains("chat_template") || j["chat_template"].is_null()) {
    throw Error(ErrorCode::kNotFound, config.string() + " has no chat_template");
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
