// DecodeGraphCache without a GPU: the row and width buckets decode steps are padded to, the
// fallback when the backend cannot record (the CPU backend: nothing recorded, the step left to
// run op by op, the bucket not tried again), and `m3-engine serve --cuda-graphs` refusing bad
// values and CPU devices by name.
#include <doctest/doctest.h>

#include <vector>

#include "engine/backend/decode_graph_cache.h"
#include "engine/backend/make_device.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using engine::backend::DecodeGraphCache;

TEST_CASE(
    "decode graph buckets: rows 1, 2, 4, 8, 16, 24, 32, then steps of 16; widths powers of two") {
  CHECK(DecodeGraphCache::RowBuckets(64) == std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 48, 64});
  CHECK(DecodeGraphCache::RowBuckets(1) == std::vector<int64_t>{1});
  CHECK(DecodeGraphCache::RowBuckets(3) == std::vector<int64_t>{1, 2, 4});
  CHECK(DecodeGraphCache::RowBuckets(100) ==
        std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 112});
  auto be = engine::backend::MakeDevice("cpu");
  DecodeGraphCache cache(*be, 40, 65, 16, 99, 8);
  CHECK(cache.max_rows() == 48);
  CHECK(cache.max_width() == 128);
  CHECK(cache.RowBucket(1) == 1);
  CHECK(cache.RowBucket(3) == 4);
  CHECK(cache.RowBucket(33) == 48);
  CHECK(cache.RowBucket(49) == 0);
  CHECK(cache.WidthBucket(1) == 1);
  CHECK(cache.WidthBucket(65) == 128);
  CHECK(cache.WidthBucket(128) == 128);
}

TEST_CASE("decode graphs on a backend that cannot record: the step is left to run op by op") {
  auto be = engine::backend::MakeDevice("cpu");
  const int64_t page = 16, rot = 8, vocab = 32;
  DecodeGraphCache cache(*be, 8, 4, page, 9, rot);
  // Three decodes at positions 5, 6, 7 on pages 0, 1, 2.
  engine::ForwardBatch b;
  b.max_pages_per_seq = 1;
  b.query_start = {0, 1, 2, 3};
  b.num_decodes = 3;
  for (int32_t r = 0; r < 3; ++r) {
    b.token_ids.push_back(r + 1);
    b.positions.push_back(5 + r);
    b.context_lens.push_back(5 + r);
    b.block_tables.push_back(r);
    b.slot_mapping.push_back(int64_t{r} * page + 5 + r);
    b.logits_rows.push_back(r);
  }
  std::vector<float> cos(3 * rot, 1.0f), sin(3 * rot, 0.0f);
  int forwards = 0, takes = 0;
  int64_t rows_seen = 0, width_seen = 0;
  const DecodeGraphCache::Forward forward = [&](const engine::backend::StepMetadata& meta,
                                                const engine::backend::DeviceTensor& ids) {
    ++forwards;
    rows_seen = meta.rows;
    width_seen = meta.max_pages_per_seq;
    CHECK(ids.numel() == meta.rows);
    CHECK(meta.num_decodes == meta.rows);
    CHECK(meta.max_seq_len == meta.max_pages_per_seq * page);
    return be->Alloc(DType::kF32, {meta.rows, vocab});
  };
  const auto take = [&](const engine::backend::DeviceTensor&) { ++takes; };
  CHECK_FALSE(cache.Run(b, cos, sin, forward, take));
  CHECK(forwards == 1);  // the bucket's one run op by op before its recording
  CHECK(rows_seen == 4);
  CHECK(width_seen == 1);
  CHECK(takes == 0);
  CHECK(cache.recorded() == 0);
  CHECK_FALSE(cache.Run(b, cos, sin, forward, take));
  CHECK(forwards == 1);  // a bucket that could not be recorded is not tried again
  // No bucket: more rows than the largest, or a wider table than the largest width.
  b.max_pages_per_seq = 8;
  CHECK_FALSE(cache.Run(b, cos, sin, forward, take));
  CHECK(forwards == 1);
}

TEST_CASE("m3-engine serve --cuda-graphs: on or off, on a GPU device only") {
  const std::string model = DataPath("m3-tiny/model");
  ProcessResult bad = RunProcess(
      {BinPath("m3-engine"), "serve", "--model", model, "--port", "0", "--cuda-graphs", "maybe"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--cuda-graphs must be 'on' or 'off', not 'maybe'") != std::string::npos);
  ProcessResult cpu = RunProcess(
      {BinPath("m3-engine"), "serve", "--model", model, "--port", "0", "--cuda-graphs", "on"});
  CHECK(cpu.exit_code == 2);
  CHECK(cpu.err.find("--cuda-graphs needs a GPU --device") != std::string::npos);
}

}  // namespace
}  // namespace m3::test
