// The speculative decoding flags of `m3-engine generate` and `serve`: --speculative-method
// eagle3|mtp|ngram|none, --speculative-model DIR, --num-speculative-tokens K, --ngram-min N,
// --ngram-max N, --speculative-backoff on|off; and the measuring hook M3_SPEC_FORCE_ACCEPTANCE.
#pragma once

#include "engine/cli/arg_parser.h"
#include "engine/spec/speculative_config.h"

namespace m3::engine::cli {

void AddSpeculativeOptions(ArgParser& p);
// The parsed and checked config (method none when --speculative-method is absent); throws
// kInvalidArgument naming the bad flag, or a speculation flag given without a method.
spec::SpeculativeConfig SpeculativeOptions(const ArgParser& p);

}  // namespace m3::engine::cli
