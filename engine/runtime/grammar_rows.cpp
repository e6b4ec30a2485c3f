// GrammarRows: per-step bitmasks of the constrained rows and the token feedback.
#include "engine/runtime/grammar_rows.h"

#include <algorithm>

#include "kernels/cpu/parallel_for.h"

namespace m3::engine {

void GrammarRows::Prepare(std::span<Sequence* const> sampled, std::span<SampleRow> rows,
                          int64_t vocab, std::span<const size_t> row_of) {
  std::vector<int64_t> constrained;
  for (size_t i = 0; i < sampled.size(); ++i)
    if (sampled[i]->grammar) constrained.push_back(static_cast<int64_t>(i));
  if (constrained.empty()) return;
  const size_t words = static_cast<size_t>((vocab + 31) / 32);
  masks_.assign(constrained.size() * words, 0u);
  auto fill = [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const Sequence& seq = *sampled[static_cast<size_t>(constrained[k])];
      grammar::GrammarMatcher& m = *seq.grammar;
      // A grammar over a smaller vocabulary than the logits leaves the tail disallowed.
      const size_t own = m.grammar().vocab().mask_words();
      uint32_t* row = masks_.data() + static_cast<size_t>(k) * words;
      if (!seq.grammar_active) {
        // Before the answer (the reasoning): anything but a stop token, so the constrained
        // answer must come.
        std::fill(row, row + words, ~0u);
        for (int32_t t : m.grammar().vocab().stop_ids())
          if (t >= 0 && static_cast<size_t>(t) < words * 32) row[t >> 5] &= ~(1u << (t & 31));
      } else if (own <= words) {
        m.FillNextTokenBitmask(row);
      } else {
        std::vector<uint32_t> wide(own);
        m.FillNextTokenBitmask(wide.data());
        std::copy(wide.begin(), wide.begin() + static_cast<std::ptrdiff_t>(words), row);
      }
    }
  };
  const int64_t n = static_cast<int64_t>(constrained.size());
  if (n >= 4) {
    kernels::cpu::ParallelFor(n, 1, fill);
  } else {
    fill(0, n);
  }
  for (size_t k = 0; k < constrained.size(); ++k) {
    const size_t i = static_cast<size_t>(constrained[k]);
    rows[row_of.empty() ? i : row_of[i]].allowed =
        std::span<const uint32_t>(masks_.data() + k * words, words);
  }
}

bool GrammarRows::Accept(Sequence& seq, int32_t token) {
  if (!seq.grammar) return true;
  if (!seq.grammar_active) {
    seq.grammar_active = token == seq.request().grammar_start_after;
    return true;
  }
  return seq.grammar->AcceptToken(token);
}

}  // namespace m3::engine
