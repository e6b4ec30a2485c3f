// RunCapturingSelections / CompareSelections over engine::LoadModel.
#include "tests/engine/selection_run.h"

#include <doctest/doctest.h>

#include "engine/generate.h"
#include "engine/model_registry.h"

namespace m3::test {

SelectionRun RunCapturingSelections(const std::string& model_dir,
                                    const engine::RunnerOptions& options,
                                    const engine::ModelInputs& inputs, int64_t new_tokens) {
  auto model = engine::LoadModel(model_dir, {}, options);
  engine::CaptureOptions capture;
  capture.block_indices = true;
  capture.all_logits = false;
  auto seq = model->NewSequence();
  SelectionRun r;
  r.selections = model->Prefill(*seq, inputs, capture).captured;
  engine::GenerateOptions g;
  g.max_new_tokens = new_tokens;
  g.ignore_eos = true;
  r.tokens = engine::Generate(*model, inputs, g);
  return r;
}

std::pair<int64_t, int64_t> CompareSelections(const SelectionRun& a, const SelectionRun& b) {
  REQUIRE(a.selections.size() == b.selections.size());
  int64_t total = 0, differ = 0;
  for (size_t i = 0; i < a.selections.size(); ++i) {
    REQUIRE(a.selections[i].first == b.selections[i].first);
    const auto x = a.selections[i].second.as<int64_t>();
    const auto y = b.selections[i].second.as<int64_t>();
    REQUIRE(x.size() == y.size());
    for (size_t j = 0; j < x.size(); ++j) {
      // Entries past a row's visible blocks are -1 on both sides.
      CHECK((x[j] < 0) == (y[j] < 0));
      ++total;
      differ += x[j] != y[j];
    }
  }
  return {total, differ};
}

}  // namespace m3::test
