// Runs tests/engine_server/engine_client_test.py (a Python gRPC client against the real
// server) with Debian's python3, so it is part of the doctest suite.
#include <doctest/doctest.h>

#include "tests/test_util.h"

namespace m3::test {
namespace {

TEST_CASE("the engine server from a Python gRPC client") {
  ProcessResult r = RunProcess(
      {"/usr/bin/python3", "tests/engine_server/engine_client_test.py", BinPath("m3-engine"), "."});
  INFO(r.out);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("all checks passed") != std::string::npos);
}

}  // namespace
}  // namespace m3::test
