// tokenizer_config.json: special and added tokens; see tokenizer_config.h.
#include "gateway/tokenizer/tokenizer_config.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "shared/error.h"

namespace m3::tok {
namespace {

using Json = nlohmann::json;

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  Require(in.good(), ErrorCode::kNotFound, "cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A token as transformers saves it: a string, or an AddedToken object {"content": ...}.
std::optional<std::string> TokenText(const Json& j, const std::string& where) {
  if (j.is_null()) return std::nullopt;
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) {
    return j["content"].get<std::string>();
  }
  throw Error(ErrorCode::kInvalidArgument,
              where + " must be a string, null or {\"content\": ...}, got " + j.dump());
}

std::vector<std::string> TokenList(const Json& j, const std::string& where) {
  std::vector<std::string> out;
  if (j.is_null()) return out;
  // transformers 5's extra_special_tokens may be a {name: token} map.
  Require(j.is_array() || j.is_object(), ErrorCode::kInvalidArgument,
          where + " must be a list of tokens");
  for (const auto& [key, value] : j.items()) {
    if (auto t = TokenText(value, where + "[" + key + "]")) out.push_back(*t);
  }
  return out;
}

Json AddedTokenEntry(const std::string& id_text, const Json& j, const std::string& where) {
  const std::string at = where + "[\"" + id_text + "\"]";
  size_t used = 0;
  long long id = -1;
  try {
    id = std::stoll(id_text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  Require(used == id_text.size() && id >= 0 && id <= INT32_MAX, ErrorCode::kInvalidArgument,
          at + ": the key must be a token id");
  Require(j.is_object() && j.contains("content") && j["content"].is_string(),
          ErrorCode::kInvalidArgument, at + " must be an object with a string \"content\"");
  Json entry = {{"id", id},        {"content", j["content"]}, {"single_word", false},
                {"lstrip", false}, {"rstrip", false},         {"normalized", false},
                {"special", false}};
  for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized", "special"}) {
    if (!j.contains(flag) || j[flag].is_null()) continue;
    Require(j[flag].is_boolean(), ErrorCode::kInvalidArgument,
            at + "." + flag + " must be true or false");
    entry[flag] = j[flag];
  }
  return entry;
}

}  // namespace

TokenizerConfig ParseTokenizerConfig(std::string_view json_text, const std::string& source) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  Require(!j.is_discarded(), ErrorCode::kInvalidArgument, source + ": invalid JSON");
  Require(j.is_object(), ErrorCode::kInvalidArgument, source + ": not a JSON object");
  TokenizerConfig c;
  c.source = source;
  auto token = [&](const char* key, std::optional<std::string>& out) {
    if (j.contains(key)) out = TokenText(j[key], source + ": " + key);
  };
  token("bos_token", c.bos_token);
  token("eos_token", c.eos_token);
  token("pad_token", c.pad_token);
  token("unk_token", c.unk_token);
  for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
    if (!j.contains(key)) continue;
    for (auto& t : TokenList(j[key], source + ": " + key)) {
      c.additional_special_tokens.push_back(std::move(t));
    }
  }
  if (j.contains("added_tokens_decoder") && !j["added_tokens_decoder"].is_null()) {
    const Json& decoder = j["added_tokens_decoder"];
    const std::string where = source + ": added_tokens_decoder";
    Require(decoder.is_object(), ErrorCode::kInvalidArgument,
            where + " must be an object of id: token");
    std::map<int64_t, Json> by_id;
    for (const auto& [id_text, value] : decoder.items()) {
      Json entry = AddedTokenEntry(id_text, value, where);
      const int64_t id = entry["id"].get<int64_t>();
      by_id[id] = std::move(entry);
    }
    for (auto& [id, entry] : by_id) c.added_tokens.push_back(std::move(entry));
  }
  return c;
}

TokenizerConfig LoadTokenizerConfig(const std::string& model_dir) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  return ParseTokenizerConfig(ReadText(path), path.string());
}

nlohmann::ordered_json SpecialTokens::TemplateVariables() const {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  for (const auto& [key, token] : {std::pair{"bos_token", &bos}, std::pair{"eos_token", &eos},
                                   std::pair{"unk_token", &unk}, std::pair{"pad_token", &pad}}) {
    if (*token) vars[key] = (*token)->content;
  }
  if (!additional.empty()) {
    auto& list = vars["additional_special_tokens"] = nlohmann::ordered_json::array();
    for (const auto& t : additional) list.push_back(t.content);
  }
  return vars;
}

SpecialTokens ResolveSpecialTokens(const TokenizerConfig& config, const Tokenizer& tokenizer) {
  const std::string source = config.source.empty() ? "tokenizer_config.json" : config.source;
  auto resolve = [&](const std::string& content, const std::string& key) {
    const std::optional<int32_t> id = tokenizer.TokenToId(content);
    Require(id.has_value(), ErrorCode::kInvalidArgument,
            source + ": " + key + " '" + content + "' is not in the tokenizer's vocabulary");
    return SpecialToken{content, *id};
  };
  SpecialTokens out;
  for (const auto& [key, text, slot] : {std::tuple{"bos_token", &config.bos_token, &out.bos},
                                        std::tuple{"eos_token", &config.eos_token, &out.eos},
                                        std::tuple{"pad_token", &config.pad_token, &out.pad},
                                        std::tuple{"unk_token", &config.unk_token, &out.unk}}) {
    if (*text) *slot = resolve(**text, key);
  }
  for (const auto& t : config.additional_special_tokens) {
    out.additional.push_back(resolve(t, "additional special token"));
  }
  return out;
}

Tokenizer LoadModelTokenizer(const std::string& model_dir, const TokenizerConfig& config) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "tokenizer.json";
  std::error_code ec;
  Require(std::filesystem::is_regular_file(path, ec), ErrorCode::kNotFound,
          "the model directory " + model_dir + " has no tokenizer.json");
  Json root = Json::parse(ReadText(path), nullptr, /*allow_exceptions=*/false);
  Require(!root.is_discarded() && root.is_object(), ErrorCode::kInvalidArgument,
          path.string() + ": invalid JSON");
  if (!config.added_tokens.empty()) {
    Json& added = root["added_tokens"];
    if (added.is_null()) added = Json::array();
    Require(added.is_array(), ErrorCode::kInvalidArgument,
            path.string() + ": added_tokens must be a list");
    std::unordered_map<int64_t, std::string> content_of;
    std::unordered_map<std::string, int64_t> id_of;
    for (const auto& t : added) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string()) {
        continue;  // the tokenizer's own loader reports malformed entries
      }
      content_of[t["id"].get<int64_t>()] = t["content"].get<std::string>();
      id_of[t["content"].get<std::string>()] = t["id"].get<int64_t>();
    }
    const Json* vocab = nullptr;
    if (root.contains("model") && root["model"].is_object() && root["model"].contains("vocab") &&
        root["model"]["vocab"].is_object()) {
      vocab = &root["model"]["vocab"];
    }
    for (const auto& entry : config.added_tokens) {
      const int64_t id = entry["id"].get<int64_t>();
      const std::string& content = entry["content"].get_ref<const std::string&>();
      const std::string what = config.source + ": added_tokens_decoder id " + std::to_string(id) +
                               " ('" + content + "')";
      if (auto it = content_of.find(id); it != content_of.end()) {
        Require(it->second == content, ErrorCode::kInvalidArgument,
                what + " conflicts with " + path.string() + ", where id " + std::to_string(id) +
                    " is '" + it->second + "'");
        continue;  // already there
      }
      if (auto it = id_of.find(content); it != id_of.end()) {
        throw Error(ErrorCode::kInvalidArgument, what + " conflicts with " + path.string() +
                                                     ", where that token has id " +
                                                     std::to_string(it->second));
      }
      if (vocab && vocab->contains(content)) {
        const Json& vid = (*vocab)[content];
        Require(vid.is_number_integer() && vid.get<int64_t>() == id, ErrorCode::kInvalidArgument,
                what + " conflicts with " + path.string() + "'s vocabulary, where it has id " +
                    vid.dump());
      }
      added.push_back(entry);
      content_of[id] = content;
      id_of[content] = id;
    }
  }
  return Tokenizer::FromParsed(root, path.string());
}

}  // namespace m3::tok
