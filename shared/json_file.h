// Reading the JSON files of a model directory: the whole text of a file, and a JSON object
// parsed from text, each failing with an m3::Error that names the file.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace m3 {

// The contents of `path`; kNotFound when it cannot be read.
std::string ReadTextFile(const std::filesystem::path& path);
// `text` parsed as a JSON object; kInvalidArgument naming `source` when malformed or not an object.
nlohmann::json ParseJsonObject(const std::string& text, const std::string& source);

}  // namespace m3
