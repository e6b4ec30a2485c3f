// Batched equals alone: several requests (text of several lengths, an image, two images, a
// video) arrive on staggered steps and run through ModelRunner::Execute together (decodes first,
// then prefill chunks of varying sizes under a per-step row budget, pages handed out from a
// shuffled free list and recycled as requests finish). Every request's greedy tokens must equal
// those of the request run alone (the single-sequence driver), and the logits of each generated
// token must agree within 1e-4 relative L2.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>

#include "engine/model_registry.h"
#include "kernels/cpu/sampling.h"
#include "tests/engine/golden_cases.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

struct Request {
  engine::ModelInputs inputs;
  int64_t new_tokens = 6;
  int64_t arrival_step = 0;
  // Alone.
  std::vector<int64_t> want_tokens;
  std::vector<std::vector<float>> want_logits;
  // Batched.
  std::vector<std::shared_ptr<const engine::EncoderOutput>> feature_of;  // per prompt row
  std::vector<int64_t> feature_offset;
  std::vector<int32_t> pages;
  int64_t done = 0;  // tokens in the KV cache
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;
  bool finished = false;

  int64_t prompt() const { return static_cast<int64_t>(inputs.input_ids.size()); }
};

void RunAlone(const std::string& set, int64_t page_size, std::vector<Request>& reqs) {
  engine::SingleSequenceOptions o;
  o.page_size = page_size;
  auto model = engine::LoadModel(DataPath(set + "/model"), o);
  const int64_t V = model->vocab_size();
  for (Request& r : reqs) {
    auto seq = model->NewSequence();
    engine::CaptureOptions last;
    last.all_logits = false;
    std::vector<float> logits = model->Prefill(*seq, r.inputs, last).logits;
    for (int64_t i = 0; i < r.new_tokens; ++i) {
      r.want_logits.push_back(logits);
      r.want_tokens.push_back(kernels::cpu::ArgMax(logits.data(), V));
      if (i + 1 < r.new_tokens) logits = model->Decode(*seq, r.want_tokens.back());
    }
  }
}

// Encodes the request's images / videos segment by segment and records, for every placeholder
// row, which encoder output row it takes (images first, then videos, in placeholder order).
void EncodeMedia(engine::ModelRunner& runner, Request& r) {
  r.feature_of.assign(r.prompt(), nullptr);
  r.feature_offset.assign(r.prompt(), 0);
  const engine::RunnerInfo& info = runner.info();
  for (bool video : {false, true}) {
    const auto& vin = video ? r.inputs.videos : r.inputs.images;
    if (!vin) continue;
    const int64_t token = video ? info.video_token_id : info.image_token_id;
    std::vector<int64_t> slots;
    for (int64_t i = 0; i < r.prompt(); ++i)
      if (r.inputs.input_ids[i] == token) slots.push_back(i);
    size_t next = 0;
    int64_t item_patch = 0;
    for (const auto& grid : vin->grids) {
      int64_t item_rows = 0;
      for (const engine::MediaSegment& s : runner.SplitMedia(video, grid)) {
        auto f =
            runner.Encode(vin->pixels.data() + (item_patch + s.patch_offset) * info.patch_dim, s);
        for (int64_t i = 0; i < s.tokens; ++i) {
          REQUIRE(next < slots.size());
          r.feature_of[slots[next]] = f;
          r.feature_offset[slots[next]] = i;
          ++next;
        }
        item_rows += s.patch_rows;
      }
      item_patch += item_rows;
    }
    REQUIRE(next == slots.size());
  }
}

// Returns how many steps mixed decodes with prefill chunks of other requests.
int64_t RunBatched(const std::string& set, int64_t page_size, int64_t num_pages,
                   std::vector<Request>& reqs, uint32_t seed) {
  auto runner = engine::LoadModelRunner(DataPath(set + "/model"));
  runner->AllocateKvCache(num_pages, page_size);
  const int64_t V = runner->info().vocab_size;
  std::mt19937 rng(seed);
  std::vector<int32_t> free_pages(num_pages);
  for (int64_t i = 0; i < num_pages; ++i) free_pages[i] = static_cast<int32_t>(i);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  for (Request& r : reqs) EncodeMedia(*runner, r);

  constexpr int64_t kRowBudget = 40;
  int64_t mixed_steps = 0;
  for (int64_t step = 0; step < 1000; ++step) {
    // Decodes first, then prefill chunks while the row budget lasts.
    std::vector<Request*> decodes, prefills;
    for (Request& r : reqs) {
      if (r.finished || step < r.arrival_step) continue;
      (r.done >= r.prompt() ? decodes : prefills).push_back(&r);
    }
    if (decodes.empty() && prefills.empty()) {
      bool all = std::all_of(reqs.begin(), reqs.end(), [](const Request& r) { return r.finished; });
      if (all) break;
      continue;
    }
    engine::ForwardBatch b;
    b.query_start.push_back(0);
    std::vector<std::pair<Request*, int64_t>> rows_of;  // (request, rows) per sequence
    int64_t budget = kRowBudget;
    for (Request* r : decodes) rows_of.push_back({r, 1}), --budget;
    for (Request* r : prefills) {
      if (budget <= 0) break;
      const int64_t chunk = std::uniform_int_distribution<int64_t>(1, 24)(rng);
      const int64_t n = std::min({chunk, budget, r->prompt() - r->done});
      rows_of.push_back({r, n});
      budget -= n;
    }
    b.num_decodes = static_cast<int32_t>(decodes.size());
    mixed_steps += b.num_decodes > 0 && static_cast<int64_t>(rows_of.size()) > b.num_decodes;
    int64_t max_pages = 0;
    for (auto& [r, n] : rows_of) {
      const int64_t need = (r->done + n + page_size - 1) / page_size;
      while (static_cast<int64_t>(r->pages.size()) < need) {
        REQUIRE(!free_pages.empty());
        r->pages.push_back(free_pages.back());
        free_pages.pop_back();
      }
      max_pages = std::max<int64_t>(max_pages, static_cast<int64_t>(r->pages.size()));
    }
    b.max_pages_per_seq = static_cast<int32_t>(max_pages);
    for (auto& [r, n] : rows_of) {
      const int64_t row0 = b.num_rows();
      b.context_lens.push_back(static_cast<int32_t>(r->done));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t pos = r->done + i;
        const bool prompt_row = pos < r->prompt();
        b.token_ids.push_back(static_cast<int32_t>(prompt_row ? r->inputs.input_ids[pos]
                                                              : r->tokens[pos - r->prompt()]));
        b.positions.push_back(static_cast<int32_t>(pos));
        b.slot_mapping.push_back(int64_t{r->pages[pos / page_size]} * page_size + pos % page_size);
        if (prompt_row && r->feature_of[pos]) {
          engine::MediaSpan* last = b.media.empty() ? nullptr : &b.media.back();
          const int64_t row = row0 + i;
          if (last && last->features == r->feature_of[pos] && last->row + last->length == row &&
              last->offset + last->length == r->feature_offset[pos])
            ++last->length;
          else
            b.media.push_back({row, 1, r->feature_of[pos], r->feature_offset[pos]});
        }
      }
      if (r->done + n >= r->prompt()) b.logits_rows.push_back(static_cast<int32_t>(row0 + n - 1));
      b.query_start.push_back(static_cast<int32_t>(row0 + n));
      for (int64_t j = 0; j < max_pages; ++j)
        b.block_tables.push_back(j < static_cast<int64_t>(r->pages.size()) ? r->pages[j] : -1);
    }
    std::vector<float> logits;
    runner->Execute(b, logits);
    REQUIRE(logits.size() == b.logits_rows.size() * V);
    size_t next_logits = 0;
    for (auto& [r, n] : rows_of) {
      r->done += n;
      if (r->done < r->prompt()) continue;
      std::vector<float> row(logits.begin() + next_logits * V,
                             logits.begin() + (next_logits + 1) * V);
      ++next_logits;
      r->tokens.push_back(kernels::cpu::ArgMax(row.data(), V));
      r->logits.push_back(std::move(row));
      if (static_cast<int64_t>(r->tokens.size()) == r->new_tokens) {
        r->finished = true;
        // Recycle the pages at random places of the free list.
        for (int32_t p : r->pages) {
          auto at = std::uniform_int_distribution<size_t>(0, free_pages.size())(rng);
          free_pages.insert(free_pages.begin() + static_cast<int64_t>(at), p);
        }
        r->pages.clear();
      }
    }
  }
  return mixed_steps;
}

std::vector<Request> Requests(const GoldenSet& g) {
  std::vector<Request> reqs;
  auto add = [&](engine::ModelInputs in, int64_t new_tokens) {
    Request r;
    r.inputs = std::move(in);
    r.new_tokens = new_tokens;
    r.arrival_step = static_cast<int64_t>(reqs.size()) / 2;
    reqs.push_back(std::move(r));
  };
  engine::ModelInputs text = g.Inputs("text");
  for (int64_t len : {5, 21, 47}) {
    engine::ModelInputs t;
    t.input_ids.assign(text.input_ids.begin(), text.input_ids.begin() + len);
    add(t, 7);
  }
  add(g.Inputs("image"), 6);
  add(text, 5);
  add(g.Inputs("video"), 6);
  add(g.Inputs("image2"), 4);
  return reqs;
}

void CheckBatchedEqualsAlone(const std::string& set, int64_t page_size, uint32_t seed) {
  const GoldenSet& g = Golden(set);
  std::vector<Request> reqs = Requests(g);
  RunAlone(set, page_size, reqs);
  const int64_t mixed = RunBatched(set, page_size, /*num_pages=*/256 / page_size * 8, reqs, seed);
  CHECK(mixed >= 3);
  double worst = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Request& r = reqs[i];
    INFO(set << " request " << i << " (prompt " << r.prompt() << ")");
    REQUIRE(r.finished);
    CHECK(r.tokens == r.want_tokens);
    for (size_t j = 0; j < r.logits.size(); ++j)
      worst = std::max(worst, RelativeL2(r.logits[j], r.want_logits[j]));
  }
  RecordParity(set + " batched-vs-alone", worst);
  CHECK(worst <= 1e-4);
}

TEST_CASE("batched steps equal each request run alone (m3-tiny, pages of 2 and 8)") {
  CheckBatchedEqualsAlone("m3-tiny", 2, 7);
  CheckBatchedEqualsAlone("m3-tiny", 8, 11);
}

TEST_CASE("batched steps equal each request run alone (m3-alt, pages of 1 and 4)") {
  CheckBatchedEqualsAlone("m3-alt", 1, 3);
  CheckBatchedEqualsAlone("m3-alt", 4, 5);
}

}  // namespace
}  // namespace m3::test
