// Local media files under the operator's allowed directories (see local_media.h).
#include "gateway/net/local_media.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "gateway/net/url.h"
#include "shared/error.h"

namespace m3::net {
namespace {

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

std::string PercentDecodePath(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

LocalMediaPolicy::LocalMediaPolicy(std::vector<std::string> allowed_dirs) {
  for (const auto& d : allowed_dirs) {
    std::string real = RealPath(d);
    struct stat st {};
    if (real.empty() || ::stat(real.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "allowed local media directory '" + d + "' does not exist or is not a directory");
    }
    dirs_.push_back(real);
  }
}

bool LocalMediaPolicy::IsLocalReference(std::string_view ref) {
  return UrlScheme(ref) == "file" || (!ref.empty() && ref.front() == '/');
}

std::string LocalMediaPolicy::Resolve(std::string_view ref) const {
  std::string path;
  if (UrlScheme(ref) == "file") {
    std::string_view rest = ref.substr(5);
    if (rest.substr(0, 2) != "//") {
      throw Error(ErrorCode::kInvalidArgument, "invalid file URL: expected file:///path");
    }
    rest.remove_prefix(2);
    size_t slash = rest.find('/');
    std::string_view host = rest.substr(0, slash);
    if (!host.empty() && host != "localhost") {
      throw Error(ErrorCode::kInvalidArgument, "file URLs must not name a host");
    }
    if (slash == std::string_view::npos) {
      throw Error(ErrorCode::kInvalidArgument, "invalid file URL: missing path");
    }
    path = PercentDecodePath(rest.substr(slash));
  } else {
    path = std::string(ref);
  }
  if (path.empty() || path.front() != '/') {
    throw Error(ErrorCode::kInvalidArgument, "local media paths must be absolute");
  }
  if (path.find('\0') != std::string::npos) {
    throw Error(ErrorCode::kInvalidArgument, "local media path contains a NUL byte");
  }
  if (!enabled()) {
    throw Error(ErrorCode::kPermissionDenied,
                "local media files are disabled (start the server with --allow-local-media DIR)");
  }
  std::string real = RealPath(path);
  if (real.empty()) {
    // Do not tell a caller whether a path outside the allowed directories exists.
    bool lexically_inside = false;
    for (const auto& d : dirs_) {
      if (path.rfind(d + "/", 0) == 0 && path.find("/../") == std::string::npos)
        lexically_inside = true;
    }
    if (lexically_inside) throw Error(ErrorCode::kNotFound, "local media file not found: " + path);
    throw Error(ErrorCode::kPermissionDenied,
                "local media path is outside the allowed directories: " + path);
  }
  for (const auto& d : dirs_) {
    if (real.size() > d.size() && real.compare(0, d.size(), d) == 0 &&
        (d == "/" || real[d.size()] == '/')) {
      return real;
    }
  }
  throw Error(ErrorCode::kPermissionDenied,
              "local media path is outside the allowed directories: " + path);
}

std::string LocalMediaPolicy::ReadFile(std::string_view ref, int64_t max_bytes) const {
  std::string path = Resolve(ref);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) {
    throw Error(ErrorCode::kNotFound,
                "cannot open local media file " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::kInvalidArgument, "local media path is not a regular file: " + path);
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    throw Error(ErrorCode::kTooLarge, "local media file " + path + " is " +
                                          std::to_string(st.st_size) +
                                          " bytes, over the limit of " + std::to_string(max_bytes));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(got);
  return bytes;
}

}  // namespace m3::net
