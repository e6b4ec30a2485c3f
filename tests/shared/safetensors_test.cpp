// Safetensors reader/writer: round trips, shards, and every kind of corrupt file.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>

#include "shared/error.h"
#include "shared/safetensors.h"
#include "tests/test_util.h"

using m3::DType;
using m3::HostTensor;

namespace {

using m3::test::SafetensorsBytes;

void ExpectError(const std::string& bytes, m3::ErrorCode code, const std::string& fragment) {
  try {
    m3::SafetensorsFile::FromBytes(bytes, "test.safetensors");
    FAIL("expected an error containing: " << fragment);
  } catch (const m3::Error& e) {
    CHECK(e.code() == code);
    CHECK_MESSAGE(std::string(e.what()).find(fragment) != std::string::npos, e.what());
  }
}

}  // namespace

TEST_CASE("write then read preserves names, dtypes, shapes and values") {
  m3::NamedTensors ts;
  ts.emplace_back("a", HostTensor::FromFloat({2, 3}, {1, 2, 3, 4, 5, 6}));
  ts.emplace_back("ids", HostTensor::FromInt64({4}, {7, -1, 0, 1ll << 40}));
  std::string dir = m3::test::TempDir();
  m3::WriteSafetensors(dir + "/x.safetensors", ts, {{"format", "pt"}});
  auto f = m3::SafetensorsFile::Open(dir + "/x.safetensors");
  CHECK(f.metadata().at("format") == "pt");
  auto a = f.Get("a");
  CHECK(a.dtype == DType::kF32);
  CHECK(a.shape == m3::Shape{2, 3});
  CHECK(m3::ToFloat32(a, "a") == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(m3::ToInt64(f.Get("ids"), "ids") == std::vector<int64_t>{7, -1, 0, 1ll << 40});
  CHECK_THROWS_AS(f.Get("missing"), m3::Error);
  // Views stay valid after the file object moves.
  auto moved = std::move(f);
  CHECK(m3::ToFloat32(moved.Get("a"), "a")[5] == 6.0f);
  auto from_bytes = m3::SafetensorsFile::FromBytes(m3::SerializeSafetensors(ts), "mem");
  auto moved_bytes = std::move(from_bytes);
  CHECK(m3::ToFloat32(moved_bytes.Get("a"), "a")[4] == 5.0f);
}

TEST_CASE("bf16 and f16 tensors convert to float32") {
  uint16_t bf[2] = {0x3f80, 0xc000};  // 1, -2
  std::string data(reinterpret_cast<char*>(bf), 4);
  auto f = m3::SafetensorsFile::FromBytes(
      SafetensorsBytes(R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", data), "bf");
  CHECK(m3::ToFloat32(f.Get("w"), "w") == std::vector<float>{1.0f, -2.0f});
  CHECK_THROWS_AS(m3::ToInt64(f.Get("w"), "w"), m3::Error);
}

TEST_CASE("corrupt files are rejected with a message naming the problem") {
  using m3::ErrorCode;
  ExpectError("abc", ErrorCode::kDataLoss, "truncated");
  ExpectError(SafetensorsBytes("{", ""), ErrorCode::kDataLoss, "malformed JSON");
  std::string big(8, '\0');
  big[7] = 0x10;
  ExpectError(big, ErrorCode::kDataLoss, "header");
  ExpectError(SafetensorsBytes(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                               std::string(8, '\0')),
              ErrorCode::kDataLoss, "past the end");
  ExpectError(SafetensorsBytes(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})",
                               std::string(16, '\0')),
              ErrorCode::kDataLoss, "expected 12");
  ExpectError(SafetensorsBytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                               std::string(12, '\0')),
              ErrorCode::kDataLoss, "overlap");
  ExpectError(SafetensorsBytes(R"({"t":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "x"),
              ErrorCode::kUnsupported, "dtype");
  ExpectError(SafetensorsBytes(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""),
              ErrorCode::kDataLoss, "shape");
  // Shapes whose byte counts wrap around 2^64 to the empty data they claim.
  ExpectError(SafetensorsBytes(R"({"t":{"dtype":"F32","shape":[4611686018427387904],)"
                               R"("data_offsets":[0,0]}})",
                               ""),
              ErrorCode::kDataLoss, "overflows");
  ExpectError(SafetensorsBytes(R"({"t":{"dtype":"F64","shape":[2147483648,1073741824],)"
                               R"("data_offsets":[0,0]}})",
                               ""),
              ErrorCode::kDataLoss, "overflows");
}

TEST_CASE("a truncated file on disk fails at open") {
  m3::NamedTensors ts;
  ts.emplace_back("w", HostTensor::FromFloat({64}, std::vector<float>(64, 1.0f)));
  std::string bytes = m3::SerializeSafetensors(ts);
  std::string dir = m3::test::TempDir();
  m3::test::WriteFile(dir + "/t.safetensors", bytes.substr(0, bytes.size() - 10));
  CHECK_THROWS_WITH_AS(m3::SafetensorsFile::Open(dir + "/t.safetensors"),
                       doctest::Contains("past the end"), m3::Error);
  CHECK_THROWS_AS(m3::SafetensorsFile::Open(dir + "/none.safetensors"), m3::Error);
}

TEST_CASE("sharded checkpoints resolve through the index") {
  std::string dir = m3::test::TempDir();
  m3::NamedTensors s1, s2;
  s1.emplace_back("x", HostTensor::FromFloat({1}, {1.0f}));
  s2.emplace_back("y", HostTensor::FromFloat({1}, {2.0f}));
  m3::WriteSafetensors(dir + "/model-00001-of-00002.safetensors", s1);
  m3::WriteSafetensors(dir + "/model-00002-of-00002.safetensors", s2);
  m3::test::WriteFile(dir + "/model.safetensors.index.json",
                      R"({"metadata":{},"weight_map":{"x":"model-00001-of-00002.safetensors",)"
                      R"("y":"model-00002-of-00002.safetensors"}})");
  auto store = m3::WeightStore::OpenDirectory(dir);
  CHECK(m3::ToFloat32(store.Get("y"), "y")[0] == 2.0f);
  CHECK(store.Names().size() == 2);
  CHECK_THROWS_WITH_AS(store.Get("z"), doctest::Contains("missing"), m3::Error);

  m3::test::WriteFile(dir + "/model.safetensors.index.json",
                      R"({"weight_map":{"x":"model-00002-of-00002.safetensors"}})");
  CHECK_THROWS_WITH_AS(m3::WeightStore::OpenDirectory(dir), doctest::Contains("does not contain"),
                       m3::Error);
  CHECK_THROWS_AS(m3::WeightStore::OpenDirectory(m3::test::TempDir()), m3::Error);
}
