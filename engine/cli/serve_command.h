// `m3-engine serve`: the engine as a gRPC server (engine/server/). Declared apart from main.cpp
// so the offline commands build without gRPC.
#pragma once

#include <string>
#include <vector>

namespace m3::engine::cli {

int RunServe(const std::vector<std::string>& args);

}  // namespace m3::engine::cli
