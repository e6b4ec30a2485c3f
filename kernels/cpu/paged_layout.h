// PagedLayout: how the rows of one flat batch map onto sequences and their KV pages, as the
// paged kernels read it. Sequence s owns rows [query_start[s], query_start[s + 1]); row r of s
// is at position context_lens[s] + (r - query_start[s]); key position j of s lives in page
// block_tables[s * max_pages + j / page_size], at offset j % page_size.
#pragma once

#include <algorithm>
#include <cstdint>

namespace m3::kernels::cpu {

struct PagedLayout {
  int64_t seqs = 0;
  const int32_t* query_start = nullptr;   // [seqs + 1]
  const int32_t* context_lens = nullptr;  // [seqs]
  const int32_t* block_tables = nullptr;  // [seqs, max_pages]
  int64_t max_pages = 0;
  int64_t page_size = 0;

  int64_t rows() const { return seqs == 0 ? 0 : query_start[seqs]; }
  // The sequence owning row r.
  int64_t SeqOf(int64_t r) const {
    return std::upper_bound(query_start, query_start + seqs + 1, static_cast<int32_t>(r)) -
           query_start - 1;
  }
  int64_t PositionOf(int64_t s, int64_t r) const { return context_lens[s] + (r - query_start[s]); }
  const int32_t* Pages(int64_t s) const { return block_tables + s * max_pages; }
};

}  // namespace m3::kernels::cpu
