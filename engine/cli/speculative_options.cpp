// Speculative decoding flags -> SpeculativeConfig.
#include "engine/cli/speculative_options.h"

#include "shared/error.h"

namespace m3::engine::cli {

void AddSpeculativeOptions(ArgParser& p) {
  for (const char* o : {"speculative-method", "speculative-model", "num-speculative-tokens",
                        "ngram-min", "ngram-max", "speculative-backoff"})
    p.AddOption(o);
}

spec::SpeculativeConfig SpeculativeOptions(const ArgParser& p) {
  spec::SpeculativeConfig c;
  c.method = spec::ParseSpeculativeMethod(p.Get("speculative-method").value_or("none"));
  if (!c.enabled()) {
    for (const char* o : {"speculative-model", "num-speculative-tokens", "ngram-min", "ngram-max",
                          "speculative-backoff"})
      Require(!p.Has(o), ErrorCode::kInvalidArgument,
              std::string("--") + o + " needs --speculative-method");
    return c;
  }
  c.model_dir = p.Get("speculative-model").value_or("");
  c.num_speculative_tokens = p.IntIn("num-speculative-tokens", 3, 1, 16);
  c.ngram_min = p.IntIn("ngram-min", 1, 1, 64);
  c.ngram_max = p.IntIn("ngram-max", 4, 1, 64);
  c.backoff = p.Choice("speculative-backoff", {"on", "off"}, "on") == "on";
  c.forced_acceptance = spec::ForcedAcceptanceFromEnv();
  spec::ValidateSpeculativeConfig(c);
  return c;
}

}  // namespace m3::engine::cli
