// RealHeadCheckpoint: one m3-make-random-checkpoint run per test process.
#include "tests/cuda/real_head_checkpoint.h"

#include <doctest/doctest.h>

#include <cstdlib>

#include "tests/test_util.h"

namespace m3::test {

const std::string& RealHeadCheckpoint() {
  static const std::string dir = [] {
    const std::string d = TempDir() + "/real-heads";
    const std::string cmd = BinPath("m3-make-random-checkpoint") + " --out " + d +
                            " --layers 2 --experts 8 --vocab 1024 --hidden 512 --heads 16"
                            " --expert-inter 256 --shared-inter 256 --dense-inter 1024"
                            " --max-position 8192 --threads 4 > /dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    return d;
  }();
  return dir;
}

}  // namespace m3::test
