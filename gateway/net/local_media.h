// The local-file policy: media may be read from disk only when the operator named directories
// (--allow-local-media DIR), and only files whose real path (symlinks and '..' resolved) lies
// inside one of them. Accepts file:// URLs and absolute paths.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace m3::net {

class LocalMediaPolicy {
 public:
  explicit LocalMediaPolicy(std::vector<std::string> allowed_dirs);

  bool enabled() const { return !dirs_.empty(); }
  // True for file:// URLs and absolute paths: what ReadFile would handle.
  static bool IsLocalReference(std::string_view ref);
  // The real path of the referenced file after the policy check. Throws kPermissionDenied
  // when local media is off or the file is outside the allowed directories, kNotFound when it
  // does not exist, kInvalidArgument for malformed references or non-regular files.
  std::string Resolve(std::string_view ref) const;
  // Resolve + read, refusing files over max_bytes with kTooLarge before reading them.
  std::string ReadFile(std::string_view ref, int64_t max_bytes) const;

 private:
  std::vector<std::string> dirs_;  // real paths
};

}  // namespace m3::net
