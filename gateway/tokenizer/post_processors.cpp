// Post-processor implementations (single-sequence templates only: the gateway never encodes
// sentence pairs).
#include "gateway/tokenizer/post_processors.h"

#include <map>
#include <string>

namespace m3::tok {
namespace {

class TemplateProcessor : public PostProcessor {
 public:
  explicit TemplateProcessor(const Json& j) {
    std::map<std::string, std::vector<int32_t>> specials;
    const Json& sp = Field<Json>(j, "special_tokens", Json::object());
    Require(sp.is_object(), ErrorCode::kInvalidArgument,
            "TemplateProcessing special_tokens is not an object");
    for (const auto& [name, entry] : sp.items()) {
      specials[name] = Required<std::vector<int32_t>>(entry, "ids", "TemplateProcessing token");
    }
    const Json& single = Child(j, "single", "TemplateProcessing");
    Require(single.is_array(), ErrorCode::kInvalidArgument,
            "TemplateProcessing single is not a list");
    for (const auto& piece : single) {
      if (auto it = piece.find("SpecialToken"); it != piece.end()) {
        const auto name = Required<std::string>(*it, "id", "TemplateProcessing SpecialToken");
        auto found = specials.find(name);
        Require(found != specials.end(), ErrorCode::kInvalidArgument,
                "TemplateProcessing uses special token '" + name + "' it does not define");
        items_.push_back({false, found->second});
      } else if (piece.contains("Sequence")) {
        items_.push_back({true, {}});
      } else {
        throw Error(ErrorCode::kInvalidArgument,
                    "TemplateProcessing piece is neither "
                    "SpecialToken nor Sequence");
      }
    }
  }
  void Process(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 8);
    for (const auto& item : items_) {
      if (item.is_sequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.insert(out.end(), item.ids.begin(), item.ids.end());
      }
    }
    ids.swap(out);
  }

 private:
  struct Item {
    bool is_sequence;
    std::vector<int32_t> ids;
  };
  std::vector<Item> items_;
};

// Bert/Roberta processors: [cls] A [sep], where cls/sep are ["token", id] pairs.
class ClsSepProcessor : public PostProcessor {
 public:
  explicit ClsSepProcessor(const Json& j) : cls_(IdOf(j, "cls")), sep_(IdOf(j, "sep")) {}
  void Process(std::vector<int32_t>& ids) const override {
    ids.insert(ids.begin(), cls_);
    ids.push_back(sep_);
  }

 private:
  static int32_t IdOf(const Json& j, const char* key) {
    const Json& pair = Child(j, key, "Bert/Roberta post-processor");
    Require(pair.is_array() && pair.size() == 2 && pair[1].is_number_integer(),
            ErrorCode::kInvalidArgument,
            std::string("post-processor '") + key + "' is not [token, id]");
    return pair[1].get<int32_t>();
  }
  int32_t cls_, sep_;
};

class IdentityProcessor : public PostProcessor {
 public:
  void Process(std::vector<int32_t>&) const override {}
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  void Process(std::vector<int32_t>& ids) const override {
    for (const auto& p : parts_) p->Process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

}  // namespace

std::unique_ptr<PostProcessor> MakePostProcessor(const Json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = TypeOf(j);
  if (type == "TemplateProcessing") return std::make_unique<TemplateProcessor>(j);
  if (type == "ByteLevel") return std::make_unique<IdentityProcessor>();  // only moves offsets
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    return std::make_unique<ClsSepProcessor>(j);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const auto& p : Child(j, "processors", "Sequence post-processor")) {
      if (auto q = MakePostProcessor(p)) parts.push_back(std::move(q));
    }
    return std::make_unique<SequenceProcessor>(std::move(parts));
  }
  throw Error(ErrorCode::kUnsupported, "unsupported tokenizer post-processor type '" + type + "'");
}

}  // namespace m3::tok
