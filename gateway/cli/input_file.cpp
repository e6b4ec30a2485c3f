// Bounded reading of regular files named on the command line (see input_file.h).
#include "gateway/cli/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "shared/error.h"

namespace m3::cli {
namespace {

std::string KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string ReadInputFile(const std::string& path, int64_t max_bytes, std::string_view what) {
  const std::string name = std::string(what) + " '" + path + "'";
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    throw Error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
                "cannot open " + name + ": " + std::strerror(err));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  Require(::fstat(fd, &st) == 0, ErrorCode::kInvalidArgument,
          "cannot stat " + name + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    throw Error(ErrorCode::kInvalidArgument,
                name + " is " + KindOf(st.st_mode) + ", not a regular file");
  }
  if (st.st_size > max_bytes) {
    throw Error(ErrorCode::kTooLarge, name + " is " + std::to_string(st.st_size) +
                                          " bytes, over the limit of " + std::to_string(max_bytes));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  for (;;) {
    if (got == bytes.size()) {
      // The file may have grown since fstat; read on, within the limit.
      if (static_cast<int64_t>(bytes.size()) >= max_bytes) break;
      bytes.resize(std::min<size_t>(static_cast<size_t>(max_bytes) + 1,
                                    std::max<size_t>(bytes.size() * 2, 4096)));
    }
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    Require(n >= 0, ErrorCode::kInvalidArgument,
            "cannot read " + name + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  Require(static_cast<int64_t>(got) <= max_bytes, ErrorCode::kTooLarge,
          name + " is over the limit of " + std::to_string(max_bytes) + " bytes");
  return bytes;
}

}  // namespace m3::cli
