// Structured output in the engine step: for each sampled row whose sequence has a grammar, the
// next-token bitmask filled on the CPU from its GrammarMatcher before sampling (the samplers,
// host and CUDA, apply it with the row's other masks), and each sampled token fed back to the
// matcher. A row whose grammar allows nothing (a dead end) or rejects the drawn token ends its
// sequence cleanly (finish "length", an error logged); it never crashes or hangs the engine.
// A request may start its grammar after a given token (a reasoning model's end-of-thinking
// tag, as vLLM's reasoning parsers do): until then its rows may draw anything but a stop token
// (the constrained answer, e.g. a forced tool call, must come).
// Masks are filled before the step is launched, on the engine thread, for the rows of that step
// only (a row's mask depends on the token the previous step drew); rows are filled in parallel
// when there are many (kernels/cpu/parallel_for), so a step of 64 constrained rows costs about
// one row's mask.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/runtime/sequence.h"
#include "engine/step/batch_sampler.h"

namespace m3::engine {

class GrammarRows {
 public:
  // `vocab`: the logits' width (the masks cover it). Sets the row of each constrained sequence
  // of `sampled` (rows[row_of[i]] is sampled[i]'s, rows[i] when row_of is empty: a step with
  // speculative rows); the masks live until the next Prepare.
  void Prepare(std::span<Sequence* const> sampled, std::span<SampleRow> rows, int64_t vocab,
               std::span<const size_t> row_of = {});

  // Feeds `token` to the sequence's matcher (true when it has none). False: the grammar does
  // not allow it (a dead end): the caller ends the sequence without the token.
  static bool Accept(Sequence& seq, int32_t token);

 private:
  std::vector<uint32_t> masks_;
};

}  // namespace m3::engine
