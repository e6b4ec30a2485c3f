// StepBatch: rows in sequence order, slots from each sequence's own pages.
#include "tests/cuda/paged_sequences.h"

#include <algorithm>

namespace m3::test {

engine::ForwardBatch StepBatch(const std::vector<PagedSeq*>& seqs, int64_t page, int32_t width) {
  engine::ForwardBatch b;
  b.query_start.push_back(0);
  b.max_pages_per_seq = width;
  for (const PagedSeq* s : seqs) {
    const int32_t n = static_cast<int32_t>(s->tokens.size()) - s->cached;
    if (n == 1 && b.query_start.size() - 1 == static_cast<size_t>(b.num_decodes)) ++b.num_decodes;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t pos = s->cached + i;
      b.token_ids.push_back(s->tokens[pos]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(int64_t{s->pages[pos / page]} * page + pos % page);
    }
    b.context_lens.push_back(s->cached);
    b.query_start.push_back(b.query_start.back() + n);
    b.logits_rows.push_back(b.query_start.back() - 1);
    std::vector<int32_t> table(width, -1);
    std::copy(s->pages.begin(), s->pages.end(), table.begin());
    b.block_tables.insert(b.block_tables.end(), table.begin(), table.end());
  }
  return b;
}

}  // namespace m3::test
