// Minimal leveled logging to stderr, thread-safe per line. The level comes from M3_LOG_LEVEL
// (debug, info, warn, error; default info). Kept dependency-free so the engine core builds
// on machines with only a compiler and CUDA.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace m3 {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, std::string_view message);

template <typename... Args>
void Log(LogLevel level, const Args&... args) {
  if (!LogEnabled(level)) return;
  std::ostringstream os;
  (os << ... << args);
  LogLine(level, os.str());
}

}  // namespace m3
