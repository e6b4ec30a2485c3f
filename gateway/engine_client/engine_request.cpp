// GenerateRequest assembly (see engine_request.h).
#include "gateway/engine_client/engine_request.h"

#include <cstring>

#include "shared/dtype.h"
#include "shared/error.h"

namespace m3::engine_client {

namespace v1 = engine::v1;

namespace {

void SetPixels(const HostTensor& pixels, std::string_view dtype, proto::Tensor* out) {
  Require(pixels.dtype() == DType::kF32 && pixels.shape().size() == 2, ErrorCode::kInvalidArgument,
          "pixel values must be an F32 [patches, patch_dim] tensor");
  for (int64_t d : pixels.shape()) out->add_shape(d);
  const auto values = pixels.as<float>();
  if (dtype == "F32") {
    out->set_dtype("F32");
    out->set_data(reinterpret_cast<const char*>(pixels.data()), pixels.nbytes());
    return;
  }
  Require(dtype == "BF16", ErrorCode::kInvalidArgument,
          "pixel dtype must be F32 or BF16, got " + std::string(dtype));
  out->set_dtype("BF16");
  std::string data(values.size() * 2, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t b = F32ToBF16(values[i]);
    std::memcpy(data.data() + 2 * i, &b, 2);  // little-endian, as the safetensors layout
  }
  out->set_data(std::move(data));
}

void SetStructured(const openai::StructuredConstraint& c, v1::StructuredOutput* out) {
  using Kind = openai::StructuredConstraint::Kind;
  switch (c.kind) {
    case Kind::kJsonSchema:
      out->set_json_schema(c.text);
      break;
    case Kind::kJsonObject:
      out->set_json_object(true);
      break;
    case Kind::kRegex:
      out->set_regex(c.text);
      break;
    case Kind::kChoice:
      for (const std::string& s : c.choices) out->mutable_choice()->add_choices(s);
      break;
    case Kind::kGrammar:
      out->set_grammar(c.text);
      break;
    case Kind::kStructural: {
      v1::StructuredOutput::Structural* st = out->mutable_structural();
      st->set_allow_free_text(c.allow_free_text);
      st->set_prefix(c.prefix);
      st->set_separator(c.separator);
      st->set_suffix(c.suffix);
      st->set_min_count(c.min_count);
      st->set_max_count(c.max_count);
      for (const openai::StructuralTagSpec& t : c.tags) {
        v1::StructuredOutput::Tag* tag = st->add_tags();
        tag->set_begin(t.begin);
        tag->set_schema_json(t.schema_json);
        tag->set_m3_xml(t.m3_xml);
        tag->set_m2_xml(t.m2_xml);
        tag->set_xml_tag_prefix(t.xml_tag_prefix);
        tag->set_end(t.end);
      }
      break;
    }
  }
  out->set_any_whitespace(c.any_whitespace);
  out->set_non_strict(!c.strict);
  if (c.start_after_token) out->set_start_after_token(*c.start_after_token);
}

}  // namespace

v1::GenerateRequest BuildGenerateRequest(std::string request_id,
                                         std::span<const int32_t> prompt_ids,
                                         std::span<const EngineMedia> media,
                                         const openai::SamplingRequest& s, int64_t max_tokens,
                                         std::string_view pixel_dtype) {
  v1::GenerateRequest r;
  r.set_request_id(std::move(request_id));
  r.mutable_token_ids()->Add(prompt_ids.begin(), prompt_ids.end());
  for (const EngineMedia& m : media) {
    Require(m.pixel_values != nullptr, ErrorCode::kInvalidArgument, "a media item has no pixels");
    v1::MultimodalItem* item = r.add_media();
    item->set_kind(m.video ? v1::MultimodalItem::KIND_VIDEO : v1::MultimodalItem::KIND_IMAGE);
    SetPixels(*m.pixel_values, pixel_dtype, item->mutable_pixel_values());
    for (int64_t g : m.grid_thw) item->add_grid_thw(g);
    item->set_placeholder_tokens(m.placeholder_tokens);
  }
  // Every field is set explicitly: the gateway already applied generation_config's defaults.
  v1::SamplingParams* p = r.mutable_sampling();
  p->set_temperature(static_cast<float>(s.temperature));
  p->set_top_p(static_cast<float>(s.top_p));
  p->set_top_k(static_cast<int32_t>(s.top_k));
  p->set_min_p(static_cast<float>(s.min_p));
  p->set_repetition_penalty(static_cast<float>(s.repetition_penalty));
  p->set_presence_penalty(static_cast<float>(s.presence_penalty));
  p->set_frequency_penalty(static_cast<float>(s.frequency_penalty));
  if (s.seed) p->set_seed(*s.seed);
  p->set_max_tokens(static_cast<int32_t>(max_tokens));
  p->mutable_stop_token_ids()->Add(s.stop_token_ids.begin(), s.stop_token_ids.end());
  p->set_ignore_eos(s.ignore_eos);
  p->set_logprobs(s.top_logprobs);
  p->set_return_logprobs(s.logprobs);
  p->set_min_tokens(static_cast<int32_t>(s.min_tokens));
  for (const auto& [id, bias] : s.logit_bias) (*p->mutable_logit_bias())[id] = bias;
  if (s.structured) SetStructured(*s.structured, r.mutable_structured());
  return r;
}

}  // namespace m3::engine_client
