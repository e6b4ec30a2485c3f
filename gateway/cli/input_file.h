// Reading the files named on the command line (text to tokenize, ids, media) as an endpoint
// reads untrusted input: only regular files (a directory, FIFO, socket or device such as
// /dev/zero is refused by name instead of failing obscurely, hanging or reading forever), and
// at most a stated number of bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace m3::cli {

// Throws m3::Error: kNotFound (missing), kInvalidArgument (not a regular file, unreadable),
// kTooLarge (over max_bytes). `what` names the file in messages, e.g. "text file".
std::string ReadInputFile(const std::string& path, int64_t max_bytes, std::string_view what);

}  // namespace m3::cli
