// ShardPlan: which slice of every decoder weight one rank of a tensor- / expert-parallel group
// holds. Attention is split by heads over the tp ranks (KV and MSA index heads split when tp
// divides them, else each rank keeps the one KV group its query heads use, as vLLM does); the
// dense MLP and the shared expert are split by their intermediate over all ranks (column- then
// row-parallel, summed by an AllReduce); the routed experts are split by expert over the ep
// ranks, or by their intermediate when ep = 1. The group has max(tp, ep) ranks, and tp and ep
// are each 1 or that size, so every rank takes part in every collective (no sub-groups). The
// LM head is split by vocabulary over all ranks (logits gathered by columns) when the ranks
// divide the vocabulary, else replicated. Embeddings, norms, the router and the vision tower
// are replicated.
#pragma once

#include <cstdint>

#include "engine/minimax_m3/m3_config.h"

namespace m3::engine::minimax_m3 {

// A contiguous range [first, first + count) of heads, channels or experts.
struct ShardRange {
  int64_t first = 0;
  int64_t count = 0;
};

struct ShardPlan {
  int tensor_parallel = 1;
  int expert_parallel = 1;
  int rank = 0;

  ShardRange q_heads;             // query heads
  ShardRange kv_heads;            // KV heads (and, on MSA layers, index heads: one per KV group)
  ShardRange dense_inter;         // dense MLP intermediate channels
  ShardRange shared_inter;        // shared expert intermediate channels
  ShardRange experts;             // routed experts this rank computes
  ShardRange expert_inter;        // intermediate channels of each of its experts
  ShardRange vocab;               // LM head rows (vocabulary entries) whose logits it computes
  bool attention_reduce = false;  // o_proj is row-parallel: its output needs an AllReduce
  bool mlp_reduce = false;        // the MLP / MoE output needs an AllReduce
  bool vocab_gather = false;      // the LM head is vocab-split: logits need an AllGather

  int world() const {
    return tensor_parallel > expert_parallel ? tensor_parallel : expert_parallel;
  }
  bool single() const { return world() == 1; }
};

// Checks that (tp, ep) can shard this config and returns rank's plan; throws kInvalidArgument
// naming the setting and the config value that conflict.
ShardPlan MakeShardPlan(const TextConfig& text, int tensor_parallel, int expert_parallel, int rank);

// The plan of a single rank: every range whole, no collectives.
ShardPlan SingleRankPlan(const TextConfig& text);

}  // namespace m3::engine::minimax_m3
