// Log sink: one fprintf per line so concurrent lines never interleave.
#include "shared/log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace m3 {
namespace {

LogLevel ThresholdFromEnv() {
  const char* env = std::getenv("M3_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(env, "warn") == 0) return LogLevel::kWarn;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

}  // namespace

bool LogEnabled(LogLevel level) {
  static const LogLevel threshold = ThresholdFromEnv();
  return level >= threshold;
}

void LogLine(LogLevel level, std::string_view message) {
  static const char* const kNames[] = {"D", "I", "W", "E"};
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  std::fprintf(stderr, "%s %s.%03d %.*s\n", kNames[static_cast<int>(level)], stamp, millis,
               static_cast<int>(message.size()), message.data());
}

}  // namespace m3
