// The goldens through the ModelRunner with the prompt split into prefill chunks of several sizes
// (chunk edges falling inside image / video placeholder runs and MSA blocks) and page sizes
// dividing the MSA block size: logits of every prompt row against the reference, and greedy
// tokens identical. The chunked path must agree with the reference as closely as the one-step
// prefill does.
#include <doctest/doctest.h>

#include <string>

#include "engine/generate.h"
#include "engine/model_registry.h"
#include "tests/engine/golden_cases.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

constexpr double kTol = 1e-5;

struct Layout {
  int64_t page_size;
  int64_t chunk;
};

void CheckSet(const std::string& set, const std::vector<Layout>& layouts) {
  const GoldenSet& g = Golden(set);
  for (const Layout& l : layouts) {
    engine::SingleSequenceOptions o;
    o.page_size = l.page_size;
    o.prefill_chunk = l.chunk;
    auto model = engine::LoadModel(DataPath(set + "/model"), o);
    for (const std::string prefix : {"text", "image", "image2", "video"}) {
      INFO(set << " " << prefix << " page_size " << l.page_size << " chunk " << l.chunk);
      auto seq = model->NewSequence();
      engine::PrefillResult r = model->Prefill(*seq, g.Inputs(prefix), {});
      REQUIRE(Shape{r.rows, model->vocab_size()} == g.ShapeOf(prefix + ".logits"));
      const double err = RelativeL2(r.logits, g.Floats(prefix + ".logits"));
      RecordParity(set + " " + prefix + ".logits (chunked prefill)", err);
      CHECK(err <= kTol);

      std::vector<int64_t> want = g.Ints(prefix + ".greedy_tokens");
      engine::GenerateOptions opt;
      opt.max_new_tokens = static_cast<int64_t>(want.size());
      opt.ignore_eos = true;
      CHECK(engine::Generate(*model, g.Inputs(prefix), opt) == want);
    }
  }
}

TEST_CASE("m3-tiny goldens with chunked prefill and pages smaller than the MSA block (8)") {
  CheckSet("m3-tiny", {{1, 3}, {2, 5}, {4, 8}, {8, 13}, {8, 1}});
}

TEST_CASE("m3-alt goldens with chunked prefill and pages smaller than the MSA block (4)") {
  CheckSet("m3-alt", {{1, 7}, {2, 4}, {4, 3}, {4, 1}});
}

TEST_CASE("a page size that does not divide the MSA block size is refused") {
  engine::SingleSequenceOptions o;
  o.page_size = 3;
  CHECK_THROWS_WITH(engine::LoadModel(DataPath("m3-tiny/model"), o),
                    doctest::Contains("does not divide the MSA block size 8"));
}

}  // namespace
}  // namespace m3::test
