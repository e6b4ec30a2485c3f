// SpeculativeConfig: parsing, checks and the proposer factory.
#include "engine/spec/speculative_config.h"

#include <cstdlib>
#include <string>

#include "engine/spec/eagle3_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "shared/error.h"

namespace m3::engine::spec {

SpeculativeMethod ParseSpeculativeMethod(const std::string& name) {
  if (name == "none") return SpeculativeMethod::kNone;
  if (name == "ngram") return SpeculativeMethod::kNgram;
  if (name == "mtp") return SpeculativeMethod::kMtp;
  if (name == "eagle3") return SpeculativeMethod::kEagle3;
  throw Error(ErrorCode::kInvalidArgument,
              "--speculative-method must be one of eagle3, mtp, ngram, none; not '" + name + "'");
}

std::string SpeculativeMethodName(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::kNgram:
      return "ngram";
    case SpeculativeMethod::kMtp:
      return "mtp";
    case SpeculativeMethod::kEagle3:
      return "eagle3";
    case SpeculativeMethod::kNone:
      break;
  }
  return "none";
}

void ValidateSpeculativeConfig(const SpeculativeConfig& c) {
  if (!c.enabled()) return;
  Require(c.num_speculative_tokens >= 1 && c.num_speculative_tokens <= 16,
          ErrorCode::kInvalidArgument,
          "--num-speculative-tokens must be in [1, 16], not " +
              std::to_string(c.num_speculative_tokens));
  Require(c.ngram_min >= 1 && c.ngram_min <= c.ngram_max && c.ngram_max <= 64,
          ErrorCode::kInvalidArgument,
          "n-gram lookup needs 1 <= --ngram-min (" + std::to_string(c.ngram_min) +
              ") <= --ngram-max (" + std::to_string(c.ngram_max) + ") <= 64");
  Require(c.forced_acceptance <= 1, ErrorCode::kInvalidArgument,
          "the forced acceptance rate must be in [0, 1]");
  Require(c.method != SpeculativeMethod::kEagle3 || !c.model_dir.empty(),
          ErrorCode::kInvalidArgument, "--speculative-method eagle3 needs --speculative-model DIR");
}

double ForcedAcceptanceFromEnv() {
  const char* env = std::getenv("M3_SPEC_FORCE_ACCEPTANCE");
  if (env == nullptr || *env == '\0') return -1;
  char* end = nullptr;
  const double r = std::strtod(env, &end);
  Require(end != env && *end == '\0' && r >= 0 && r <= 1, ErrorCode::kInvalidArgument,
          std::string("M3_SPEC_FORCE_ACCEPTANCE must be a number in [0, 1], not '") + env + "'");
  return r;
}

std::unique_ptr<DraftProposer> MakeDraftProposer(const SpeculativeConfig& c, int64_t target_layers,
                                                 int64_t target_hidden, int64_t target_vocab) {
  ValidateSpeculativeConfig(c);
  switch (c.method) {
    case SpeculativeMethod::kNgram:
      return std::make_unique<NgramProposer>(c.ngram_min, c.ngram_max);
    case SpeculativeMethod::kEagle3:
      return std::make_unique<Eagle3Proposer>(LoadEagle3Draft(
          c.model_dir, c.target_model_dir, target_layers, target_hidden, target_vocab));
    case SpeculativeMethod::kMtp:
      throw Error(ErrorCode::kUnsupported,
                  "--speculative-method mtp is not available in this build yet (eagle3 and ngram "
                  "are)");
    case SpeculativeMethod::kNone:
      break;
  }
  return nullptr;
}

}  // namespace m3::engine::spec
