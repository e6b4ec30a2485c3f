// SpeculationBackoff: how many drafts to verify per sequence this step, from the acceptance
// measured so far and the batch. A verify step of B sequences with k drafts runs B (k + 1)
// rows; while B (k + 1) stays below the rows a step can take at about the cost of one row
// (decode is bound by weight and KV reads there, `free_rows`), extra drafts cost little, and
// beyond it the step's cost grows with its rows. With per-draft acceptance a, k drafts yield
// (1 - a^(k+1)) / (1 - a) tokens; k maximizes tokens per unit of step cost, 0 (plain decode)
// included. The acceptance estimate is an exponential average of the steps' outcomes; while k is
// 0 it drifts back toward its prior, so speculation is retried when the batch shrinks again.
#pragma once

#include <cstdint>

namespace m3::engine::spec {

class SpeculationBackoff {
 public:
  // max_k: the configured draft count; free_rows: rows of a step costing about one row's
  // time (0: speculation never backs off for batch size); prior: the starting acceptance.
  SpeculationBackoff(int64_t max_k, int64_t free_rows, double prior = 0.6);
  // k for a step of `decodes` decode-ready sequences (0 .. max_k).
  int64_t DraftsFor(int64_t decodes) const;
  // Outcome of a step: drafts verified and accepted over all its sequences (0, 0: none ran).
  void Record(int64_t proposed, int64_t accepted);
  double acceptance() const { return acceptance_; }

 private:
  int64_t max_k_, free_rows_;
  double prior_, acceptance_;
};

}  // namespace m3::engine::spec
