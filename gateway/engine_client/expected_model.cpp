// The engine compatibility check (see expected_model.h).
#include "gateway/engine_client/expected_model.h"

#include "shared/model_config_view.h"

namespace m3::engine_client {
namespace {

std::string Ids(const std::vector<int64_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

void Compare(std::string& out, const char* what, int64_t want, int64_t got) {
  if (want == got) return;
  if (!out.empty()) out += "; ";
  out.append(what).append(" is ").append(std::to_string(got)).append(", the model directory has ");
  out += std::to_string(want);
}

}  // namespace

ExpectedModel LoadExpectedModel(const std::string& model_dir, int64_t tokenizer_vocab_size) {
  const ModelConfigView c = LoadModelConfigView(model_dir);
  ExpectedModel m;
  m.vocab_size = c.text.vocab_size;
  m.tokenizer_vocab_size = tokenizer_vocab_size;
  m.eos_token_ids = c.eos_token_ids();
  m.bos_token_id = c.text.bos_token_id;
  m.image_token_id = c.image_token_id;
  m.video_token_id = c.video_token_id;
  return m;
}

std::string ModelMismatch(const ExpectedModel& expected,
                          const engine::v1::ModelInfoResponse& info) {
  std::string out;
  Compare(out, "vocab_size", expected.vocab_size, info.vocab_size());
  Compare(out, "bos_token_id", expected.bos_token_id, info.bos_token_id());
  Compare(out, "image_token_id", expected.image_token_id, info.image_token_id());
  Compare(out, "video_token_id", expected.video_token_id, info.video_token_id());
  const std::vector<int64_t> eos(info.eos_token_ids().begin(), info.eos_token_ids().end());
  if (eos != expected.eos_token_ids) {
    if (!out.empty()) out += "; ";
    out += "eos_token_ids are " + Ids(eos) + ", the model directory has " +
           Ids(expected.eos_token_ids);
  }
  if (expected.tokenizer_vocab_size > info.vocab_size()) {
    if (!out.empty()) out += "; ";
    out += "the tokenizer has " + std::to_string(expected.tokenizer_vocab_size) +
           " ids, more than the engine's vocabulary of " + std::to_string(info.vocab_size());
  }
  return out;
}

}  // namespace m3::engine_client
