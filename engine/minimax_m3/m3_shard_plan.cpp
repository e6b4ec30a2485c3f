// MakeShardPlan: validation of (tp, ep) against the config and the per-rank ranges.
#include "engine/minimax_m3/m3_shard_plan.h"

#include <algorithm>
#include <string>

#include "shared/error.h"

namespace m3::engine::minimax_m3 {
namespace {

std::string Str(int64_t v) {
  return std::to_string(v);
}

void Need(bool ok, const std::string& what) {
  Require(ok, ErrorCode::kInvalidArgument, "parallel config: " + what);
}

// `total` split evenly over `parts`; rank's piece.
ShardRange Split(int64_t total, int parts, int rank) {
  const int64_t n = total / parts;
  return {n * rank, n};
}

}  // namespace

ShardPlan SingleRankPlan(const TextConfig& t) {
  return MakeShardPlan(t, 1, 1, 0);
}

ShardPlan MakeShardPlan(const TextConfig& t, int tp, int ep, int rank) {
  Need(tp >= 1, "tensor parallel size must be >= 1, got " + Str(tp));
  Need(ep >= 1, "expert parallel size must be >= 1, got " + Str(ep));
  ShardPlan p;
  p.tensor_parallel = tp;
  p.expert_parallel = ep;
  p.rank = rank;
  const int world = p.world();
  Need(rank >= 0 && rank < world, "rank " + Str(rank) + " outside the group of " + Str(world));
  Need(tp == 1 || ep == 1 || tp == ep,
       "tensor parallel " + Str(tp) + " and expert parallel " + Str(ep) +
           ": when both are above 1 they must be equal (one group of ranks)");
  const int64_t Hq = t.num_attention_heads, Hkv = t.num_key_value_heads;
  Need(Hq % tp == 0,
       "tensor parallel " + Str(tp) + " does not divide num_attention_heads " + Str(Hq));
  Need(Hkv % tp == 0 || tp % Hkv == 0,
       "tensor parallel " + Str(tp) + " and num_key_value_heads " + Str(Hkv) +
           ": one must divide the other (KV heads are split, or replicated per KV group)");
  const bool any_moe = std::find(t.moe_mlp.begin(), t.moe_mlp.end(), true) != t.moe_mlp.end();
  const bool any_dense = std::find(t.moe_mlp.begin(), t.moe_mlp.end(), false) != t.moe_mlp.end();
  if (any_dense)
    Need(t.dense_intermediate_size % world == 0,
         Str(world) + " ranks do not divide dense_intermediate_size " +
             Str(t.dense_intermediate_size));
  if (any_moe) {
    Need(t.shared_intermediate_size % world == 0,
         Str(world) + " ranks do not divide shared_intermediate_size " +
             Str(t.shared_intermediate_size));
    Need(t.num_local_experts % ep == 0, "expert parallel " + Str(ep) +
                                            " does not divide num_local_experts " +
                                            Str(t.num_local_experts));
    if (ep == 1)
      Need(t.intermediate_size % world == 0,
           "tensor parallel " + Str(tp) +
               " (expert parallel 1 splits every expert) does not "
               "divide intermediate_size " +
               Str(t.intermediate_size));
  }

  // tp is 1 (attention whole on every rank) or the group size.
  const int tp_rank = rank % tp;
  p.q_heads = Split(Hq, tp, tp_rank);
  if (Hkv % tp == 0) {
    p.kv_heads = Split(Hkv, tp, tp_rank);
  } else {
    // More ranks than KV heads: each keeps the KV group its query heads belong to.
    p.kv_heads = {p.q_heads.first / (Hq / Hkv), 1};
  }
  p.dense_inter = Split(t.dense_intermediate_size, world, rank);
  p.shared_inter = Split(t.shared_intermediate_size, world, rank);
  if (ep > 1) {
    p.experts = Split(t.num_local_experts, ep, rank % ep);
    p.expert_inter = {0, t.intermediate_size};
  } else {
    p.experts = {0, t.num_local_experts};
    p.expert_inter = Split(t.intermediate_size, world, rank);
  }
  if (world > 1 && t.vocab_size % world == 0) {
    p.vocab = Split(t.vocab_size, world, rank);
    p.vocab_gather = true;
  } else {
    p.vocab = {0, t.vocab_size};
  }
  p.attention_reduce = tp > 1;
  p.mlp_reduce = world > 1;
  return p;
}

}  // namespace m3::engine::minimax_m3
