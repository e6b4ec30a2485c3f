// ReadTextFile and ParseJsonObject (see json_file.h).
#include "shared/json_file.h"

#include <fstream>
#include <sstream>

#include "shared/error.h"

namespace m3 {

std::string ReadTextFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  Require(in.good(), ErrorCode::kNotFound, "cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json ParseJsonObject(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, "malformed JSON in " + source + ": " + e.what());
  }
  Require(j.is_object(), ErrorCode::kInvalidArgument, source + " is not a JSON object");
  return j;
}

}  // namespace m3
