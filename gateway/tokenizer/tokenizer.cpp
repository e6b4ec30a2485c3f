// Tokenizer loading and the encode/decode pipelines.
#include "gateway/tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "gateway/tokenizer/tokenizer_impl.h"
#include "gateway/unicode/utf8.h"

namespace m3::tok {

TokenizerImpl::TokenizerImpl(const Json& root) {
  Require(root.is_object(), ErrorCode::kInvalidArgument, "tokenizer.json is not a JSON object");
  normalizer_ = MakeNormalizer(Field<Json>(root, "normalizer", Json()));
  pre_tokenizers_ = MakePreTokenizers(Field<Json>(root, "pre_tokenizer", Json()));
  model_ = std::make_unique<BpeModel>(Child(root, "model", "tokenizer.json"));
  post_processor_ = MakePostProcessor(Field<Json>(root, "post_processor", Json()));
  decoder_ = MakeDecoder(Field<Json>(root, "decoder", Json()));
  added_ = AddedVocabulary(Field<Json>(root, "added_tokens", Json()), normalizer_.get());
  vocab_size_ = std::max(model_->IdLimit(), static_cast<size_t>(added_.MaxId() + 1));
}

namespace {

// Thrown out of the pre-tokenizer's callback once an encoding passes its max_ids.
struct OverMaxIds {};

}  // namespace

void TokenizerImpl::EncodePlain(std::string_view text, bool at_origin, std::vector<int32_t>& out,
                                size_t max_ids) const {
  const bool raw_bytes = pre_tokenizers_.output_raw_bytes();
  const size_t per_id = model_->MaxPieceBytesPerId();
  pre_tokenizers_.Run(Piece{text, at_origin}, [&](const Piece& piece) {
    std::string_view t = piece.text;
    // A piece longer than the ids left can spell is over max_ids whatever it encodes to: only a
    // prefix long enough to pass max_ids is encoded (a 40 MB word's BPE symbols took ~1 GB).
    const size_t left = max_ids - std::min(max_ids, out.size());
    if (max_ids != SIZE_MAX && per_id > 0 && t.size() / per_id > left) {
      size_t cut = (left + 1) * per_id;
      while (cut < t.size() && (static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) ++cut;
      t = t.substr(0, cut);
    }
    model_->Tokenize(t, raw_bytes, out);
    if (out.size() > max_ids) throw OverMaxIds{};
  });
}

void TokenizerImpl::Encode(std::string_view input, bool add_special_tokens,
                           std::vector<int32_t>& out, size_t max_ids) const {
  std::string repaired;
  std::string_view text = input;
  if (!unicode::IsValidUtf8(input)) {
    repaired = unicode::RepairUtf8(input);
    text = repaired;
  }
  std::vector<TextSplit> raw_splits, norm_splits;
  added_.SplitRaw(text, raw_splits);
  std::string normalized;
  for (const TextSplit& rs : raw_splits) {
    if (rs.id >= 0) {
      out.push_back(rs.id);
      continue;
    }
    if (rs.end == rs.start) continue;
    std::string_view part = text.substr(rs.start, rs.end - rs.start);
    if (normalizer_) {
      normalized.assign(part);
      normalizer_->Normalize(normalized);
      part = normalized;
    }
    norm_splits.clear();
    added_.SplitNormalized(part, norm_splits);
    for (const TextSplit& ns : norm_splits) {
      if (ns.id >= 0) {
        out.push_back(ns.id);
      } else if (ns.end > ns.start) {
        try {
          EncodePlain(part.substr(ns.start, ns.end - ns.start), rs.start == 0 && ns.start == 0, out,
                      max_ids);
        } catch (const OverMaxIds&) {
          return;
        }
      }
      if (out.size() > max_ids) return;
    }
    if (out.size() > max_ids) return;
  }
  if (add_special_tokens && post_processor_) post_processor_->Process(out);
}

std::string TokenizerImpl::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= vocab_size_) {
      throw Error(ErrorCode::kInvalidArgument, "token id " + std::to_string(id) +
                                                   " is outside the vocabulary [0, " +
                                                   std::to_string(vocab_size_) + ")");
    }
    if (const AddedToken* added = added_.ById(id)) {
      if (skip_special_tokens && added->special) continue;
      tokens.push_back(added->decode_form);
    } else if (const std::string* t = model_->IdToToken(id)) {
      if (skip_special_tokens && added_.IsSpecialContent(*t)) continue;
      tokens.push_back(*t);
    }  // an id inside the range that names no token is skipped, as `tokenizers` does
  }
  if (!decoder_) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) joined.push_back(' ');
      joined += tokens[i];
    }
    return joined;
  }
  decoder_->DecodeChain(tokens);
  std::string result;
  for (const auto& t : tokens) result += t;
  return result;
}

std::optional<int32_t> TokenizerImpl::TokenToId(std::string_view token) const {
  if (auto id = added_.IdOf(token)) return id;
  return model_->TokenToId(token);
}

const std::string* TokenizerImpl::IdToToken(int32_t id) const {
  if (const AddedToken* added = added_.ById(id)) return &added->content;
  return model_->IdToToken(id);
}

bool TokenizerImpl::IsSpecial(int32_t id) const {
  const AddedToken* added = added_.ById(id);
  return added != nullptr && added->special;
}

Tokenizer Tokenizer::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Require(static_cast<bool>(in), ErrorCode::kNotFound, "cannot open tokenizer file '" + path + "'");
  std::ostringstream buf;
  buf << in.rdbuf();
  try {
    return FromJson(buf.str());
  } catch (const Error& e) {
    throw Error(e.code(), path + ": " + e.what());
  }
}

Tokenizer Tokenizer::FromJson(std::string_view json_text) {
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("tokenizer JSON is malformed: ") + e.what());
  }
  return FromParsed(root, "tokenizer JSON");
}

Tokenizer Tokenizer::FromParsed(const Json& root, const std::string& source) {
  try {
    return Tokenizer(std::make_shared<const TokenizerImpl>(root));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, source + " is invalid: " + e.what());
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens,
                                       size_t max_ids) const {
  std::vector<int32_t> ids;
  ids.reserve(std::min(text.size() / 3, max_ids) + 4);
  impl_->Encode(text, add_special_tokens, ids, max_ids);
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->Decode(ids, skip_special_tokens);
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  return impl_->TokenToId(token);
}

std::string Tokenizer::IdToToken(int32_t id) const {
  const std::string* t = impl_->IdToToken(id);
  return t ? *t : std::string();
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return impl_->IsSpecial(id);
}

size_t Tokenizer::VocabSize() const {
  return impl_->VocabSize();
}

}  // namespace m3::tok
