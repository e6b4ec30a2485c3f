// The verify forward on the CPU reference: a sequence carrying its last token and k drafts as
// 1 + k query rows (causal among them, each row's MSA blocks selected under its own position),
// beside a plain decode in the same batch, gives each row the logits decoding it alone gives.
#include <doctest/doctest.h>

#include "tests/runtime/verify_forward.h"
#include "tests/test_util.h"

namespace m3::test {

TEST_CASE("verify forward (CPU): 1 + k rows equal decoding the same positions one by one") {
  const VerifyRun cpu = RunVerify("cpu");
  REQUIRE(cpu.verify.size() == static_cast<size_t>(kVerifyDrafts + 1));
  for (int32_t j = 0; j <= kVerifyDrafts; ++j) {
    CAPTURE(j);
    CHECK(RelativeL2(cpu.verify[static_cast<size_t>(j)], cpu.sequential[static_cast<size_t>(j)]) <=
          1e-5);
  }
  // Rows far apart in the context select differently: the selection is per row.
  int64_t blocks = 0;
  for (const auto& [name, t] : cpu.selections.selections) {
    CHECK(t.shape()[1] == 2 + kVerifyDrafts);
    blocks += t.numel();
  }
  CHECK(blocks > 0);
}

TEST_CASE("verify steps at a decode bucket's shape (padded sequences) equal the plain step (CPU)") {
  // The CPU cannot record graphs: with buckets on, the verify step still runs at its bucket's
  // padded shape (4 sequences for 3), op by op: the path a GPU records and replays.
  const BucketRun plain = RunUniformVerify("cpu", false, false);
  const BucketRun bucket = RunUniformVerify("cpu", true, false);
  CHECK(plain.bucket_steps == 0);
  CHECK(bucket.bucket_steps == 1);
  REQUIRE(bucket.logits.size() == plain.logits.size());
  CHECK(RelativeL2(bucket.logits, plain.logits) <= 1e-5);
}

TEST_CASE("a bucketed verify step keeps a draft's hidden states (CPU): those of the plain step") {
  const BucketRun plain = RunUniformVerify("cpu", false, false, true);
  const BucketRun bucket = RunUniformVerify("cpu", true, false, true);
  CHECK(bucket.bucket_steps == 1);
  REQUIRE(plain.hidden.size() == 3);
  REQUIRE(bucket.hidden.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(plain.hidden[i].first);
    CHECK(bucket.hidden[i].first == plain.hidden[i].first);
    CHECK(bucket.hidden[i].second.shape() == plain.hidden[i].second.shape());
    CHECK(RelativeL2(bucket.hidden[i].second.as<float>(), plain.hidden[i].second.as<float>()) <=
          1e-5);
  }
  CHECK(RelativeL2(bucket.logits, plain.logits) <= 1e-5);
}

}  // namespace m3::test
