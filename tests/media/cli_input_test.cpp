// The CLI's file inputs (issue 11 row 10): directories, FIFOs, devices and out-of-range ids
// get a message naming the problem and a non-zero exit, never a hang, a crash or an empty
// success.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "tests/test_util.h"

namespace {

m3::test::ProcessResult Gateway(std::vector<std::string> args) {
  args.insert(args.begin(), m3::test::BinPath("m3-gateway"));
  return m3::test::RunProcess(args);
}

void ExpectRefused(const m3::test::ProcessResult& r, const std::string& needle) {
  CHECK(r.exit_code != 0);
  CHECK_MESSAGE(r.err.find(needle) != std::string::npos, r.err);
  CHECK(r.out.find("\"ids\"") == std::string::npos);
}

}  // namespace

TEST_CASE("cli: directories, FIFOs and devices as input files") {
  const std::string dir = m3::test::TempDir();
  const std::string tokenizer = m3::test::DataPath("tokenizer/tokenizer.json");
  const std::string fifo = dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  ExpectRefused(Gateway({"tokenize", "--tokenizer", tokenizer, "--text-file", dir}),
                "is a directory");
  ExpectRefused(Gateway({"tokenize", "--tokenizer", tokenizer, "--text-file", "/dev/zero"}),
                "character device");
  ExpectRefused(Gateway({"tokenize", "--tokenizer", tokenizer, "--text-file", fifo}), "FIFO");
  ExpectRefused(Gateway({"tokenize", "--tokenizer", tokenizer, "--text-file", dir + "/none"}),
                "No such file");
  ExpectRefused(Gateway({"preprocess", "--image", dir, "--output", dir + "/o.safetensors"}),
                "is a directory");
  ExpectRefused(Gateway({"preprocess", "--image", "/dev/zero", "--output", dir + "/o.st"}),
                "character device");
  ExpectRefused(Gateway({"preprocess", "--video", fifo, "--output", dir + "/o.st"}), "FIFO");
  ExpectRefused(Gateway({"detokenize", "--tokenizer", tokenizer, "--ids-file", dir}),
                "is a directory");
}

TEST_CASE("cli: detokenize refuses ids outside the int32 range by value") {
  const std::string dir = m3::test::TempDir();
  const std::string tokenizer = m3::test::DataPath("tokenizer/tokenizer.json");
  for (const std::string& id :
       {std::string("18446744073709551615"), std::string("2147483648"), std::string("-1")}) {
    CAPTURE(id);
    m3::test::WriteFile(dir + "/ids.json", "[1, " + id + "]");
    const auto r =
        Gateway({"detokenize", "--tokenizer", tokenizer, "--ids-file", dir + "/ids.json"});
    ExpectRefused(r, "out of range");
    CHECK(r.err.find(id) != std::string::npos);
  }
  m3::test::WriteFile(dir + "/ids.json", "[1, 2]");
  CHECK(Gateway({"detokenize", "--tokenizer", tokenizer, "--ids-file", dir + "/ids.json"})
            .exit_code == 0);
}
