// Deterministic fuzzing of the safetensors header validation (a checkpoint is untrusted input:
// a corrupt or hostile file must be an m3::Error, never a view past the buffer). Each case
// builds a header from random entries (dtypes valid and not, shapes with dimensions near 2^31,
// 2^32, 2^62 and 2^63, offsets consistent or not), then sometimes flips bytes of the file; a
// case is keyed by its number, so a failure replays. Properties of every accepted file: each
// tensor's bytes are its element count times its dtype size (counted without overflow), lie
// inside the data (every byte is read: the sanitizer build reports a view past the buffer),
// and do not overlap another's; float tensors of accepted files convert.
// M3_SAFETENSORS_FUZZ_CASES sets the number of cases (default 20000, well under a second).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "shared/dtype.h"
#include "shared/error.h"
#include "shared/safetensors.h"
#include "tests/test_util.h"

namespace {

// A dimension: mostly small, sometimes at a boundary of 32- or 64-bit arithmetic.
std::string Dim(std::mt19937_64& rng) {
  static const char* kEdges[] = {"0",
                                 "1",
                                 "2147483647",
                                 "2147483648",
                                 "4294967295",
                                 "4294967296",
                                 "1073741824",
                                 "2305843009213693952",
                                 "4611686018427387904",
                                 "9223372036854775807",
                                 "18446744073709551615",
                                 "-1",
                                 "1.5",
                                 "\"4\"",
                                 "null"};
  if (rng() % 4 == 0) return kEdges[rng() % std::size(kEdges)];
  return std::to_string(rng() % 6);
}

// The file of case `index`.
std::string MakeCase(uint64_t index) {
  std::mt19937_64 rng(0x5afe7e2u ^ (index * 0x9e3779b97f4a7c15ull));
  static const char* kDtypes[] = {"F32", "F16", "BF16", "F64", "I64",     "I32", "I16",
                                  "I8",  "U8",  "BOOL", "Q4",  "F8_E4M3", "",    "f32"};
  const int tensors = static_cast<int>(rng() % 5);
  std::string header = "{";
  uint64_t cursor = 0;
  for (int t = 0; t < tensors; ++t) {
    const std::string dtype = kDtypes[rng() % std::size(kDtypes)];
    const auto dtype_parsed = m3::ParseDType(dtype);
    const uint64_t elem = dtype_parsed ? m3::DTypeSize(*dtype_parsed) : 1;
    const int rank = static_cast<int>(rng() % 5);
    std::string shape = "[";
    uint64_t numel = 1;
    bool small = true;
    for (int r = 0; r < rank; ++r) {
      const std::string d = Dim(rng);
      if (r) shape += ',';
      shape += d;
      const bool plain = !d.empty() && d.find_first_not_of("0123456789") == std::string::npos;
      const uint64_t v = plain && d.size() < 6 ? std::stoull(d) : 1u << 20;
      numel = std::min<uint64_t>(numel * std::max<uint64_t>(v, 1), 1u << 20);
      small = small && plain && d.size() < 6;
    }
    shape += "]";
    // Offsets: the consistent ones most of the time, else something near them or wild.
    uint64_t begin = cursor, end = cursor + (small ? numel * elem : 0);
    switch (rng() % 6) {
      case 0:
        end += rng() % 3;
        break;
      case 1:
        begin = rng() % (cursor + 8);
        break;
      case 2:
        end = rng();
        break;
      default:
        break;
    }
    cursor = std::max(cursor, end < (1u << 22) ? end : cursor);
    if (t) header += ',';
    header += "\"t" + std::to_string(t) + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape;
    header += ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
  }
  if (rng() % 3 == 0) {
    if (tensors) header += ',';
    header += "\"__metadata__\":{\"a\":\"b\"}";
  }
  header += "}";
  std::string data(std::min<uint64_t>(cursor, 1u << 22) + rng() % 4, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  std::string out = m3::test::SafetensorsBytes(header, data);
  // Byte flips, sometimes in the length prefix.
  for (int flips = static_cast<int>(rng() % 4) - 1; flips > 0; --flips) {
    const size_t at =
        rng() % (rng() % 2 ? std::min<size_t>(out.size(), 8 + header.size()) : out.size());
    out[at] = static_cast<char>(rng());
  }
  if (rng() % 16 == 0) out.resize(rng() % (out.size() + 1));
  return out;
}

// Empty when the accepted file keeps the properties; otherwise what broke.
std::string CheckAccepted(const m3::SafetensorsFile& f) {
  std::vector<std::pair<const uint8_t*, const uint8_t*>> spans;
  for (const std::string& name : f.Names()) {
    const m3::TensorView v = f.Get(name);
    unsigned __int128 count = m3::DTypeSize(v.dtype);
    for (int64_t d : v.shape) {
      if (d < 0) return name + ": negative dimension";
      count *= static_cast<uint64_t>(d);
      if (count > (static_cast<unsigned __int128>(1) << 64)) return name + ": size overflows";
    }
    if (count != v.nbytes) return name + ": nbytes is not shape x dtype";
    if (v.nbytes == 0) continue;
    spans.emplace_back(v.data, v.data + v.nbytes);
    // Every byte read (past the file, the sanitizer build reports it), and the float dtypes
    // converted.
    volatile uint8_t sink = 0;  // volatile: the optimizer may not drop the reads
    for (size_t i = 0; i < v.nbytes; ++i) sink = sink ^ v.data[i];
    const bool is_float = v.dtype == m3::DType::kF32 || v.dtype == m3::DType::kF16 ||
                          v.dtype == m3::DType::kBF16 || v.dtype == m3::DType::kF64;
    if (is_float && static_cast<int64_t>(m3::ToFloat32(v, name).size()) != v.numel()) {
      return name + ": converted size differs";
    }
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) return "tensors overlap";
  }
  return "";
}

}  // namespace

TEST_CASE("safetensors headers: random and corrupted files are accepted whole or refused") {
  const char* env = std::getenv("M3_SAFETENSORS_FUZZ_CASES");
  const uint64_t cases = env && *env ? std::strtoull(env, nullptr, 10) : 20000;
  uint64_t accepted = 0, refused = 0;
  for (uint64_t i = 0; i < cases; ++i) {
    const std::string bytes = MakeCase(i);
    std::string problem;
    try {
      const m3::SafetensorsFile f = m3::SafetensorsFile::FromBytes(bytes, "fuzz.safetensors");
      problem = CheckAccepted(f);
      ++accepted;
    } catch (const m3::Error&) {
      ++refused;
    } catch (const std::exception& e) {
      problem = std::string("an exception that is not m3::Error: ") + e.what();
    }
    if (!problem.empty()) FAIL_CHECK("case " << i << ": " << problem);
  }
  MESSAGE("accepted " << accepted << ", refused " << refused);
  CHECK(accepted > cases / 20);  // the generator still reaches valid files
  CHECK(refused > cases / 20);
}
