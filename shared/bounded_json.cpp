// The bounded JSON parser (see bounded_json.h). JsonTextReader reads the text; this handler
// builds the value itself. nlohmann's callback parser (parse with a parser_callback_t) is not
// used: each time an object closes it scans every element of the enclosing container for a
// discarded value, which costs O(siblings) per object and O(n^2) for a body of n sibling
// objects (an array of 200k content parts, an object of 80k object-valued keys). Here each
// event does O(1) work (O(log k) for an insert into an object of k keys).
#include "shared/bounded_json.h"

#include "shared/json_text_reader.h"

#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace m3 {
namespace {

// Objects of an ordered_json with more keys than this get a hash index for duplicate-key
// lookups; below it a scan of the keys is cheaper than building one.
constexpr size_t kLinearKeyScan = 16;
// Estimated heap bytes beyond a value's own node: an object member (the key's string header and
// the map / vector slot) and a container's allocation.
constexpr size_t kMemberBytes = 64;
constexpr size_t kContainerBytes = 48;

template <class json>
class BoundedDomBuilder {
 public:
  BoundedDomBuilder(json& root, const JsonLimits& limits) : root_(root), limits_(limits) {}

  bool null() { return Value(json(nullptr)); }
  bool boolean(bool v) { return Value(json(v)); }
  bool number_integer(typename json::number_integer_t v) { return Value(json(v)); }
  bool number_unsigned(typename json::number_unsigned_t v) { return Value(json(v)); }
  bool number_float(typename json::number_float_t v) { return Value(json(v)); }
  bool string(typename json::string_t& v) {
    if (v.size() > limits_.max_string_bytes) {
      return Fail(ErrorCode::kTooLarge,
                  "a string of " + std::to_string(v.size()) + " bytes is over the limit of " +
                      std::to_string(limits_.max_string_bytes) + " bytes per string",
                  "json_too_large");
    }
    if (!Grow(v.size())) return false;
    return Value(json(std::move(v)));
  }
  bool start_object() { return Open(nlohmann::detail::value_t::object); }
  bool start_array() { return Open(nlohmann::detail::value_t::array); }

  bool key(typename json::string_t& k) {
    Frame& f = stack_.back();
    if (f.count >= limits_.max_object_keys) {
      f.key = std::move(k);  // the error names the first key over the limit
      return Fail(ErrorCode::kTooLarge,
                  "an object has more than " + std::to_string(limits_.max_object_keys) + " keys",
                  "json_too_large");
    }
    if (k.size() > limits_.max_key_bytes) {
      return Fail(ErrorCode::kTooLarge,
                  "an object key of " + std::to_string(k.size()) + " bytes is over the limit of " +
                      std::to_string(limits_.max_key_bytes) + " bytes",
                  "json_too_large");
    }
    if (!Grow(k.size() + kMemberBytes)) return false;
    ++f.count;
    f.slot = &Member(f, k);
    f.key = std::move(k);
    return true;
  }

  bool end_object() {
    stack_.pop_back();
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }

  void read_error(JsonReadFailure failure, const std::string& message) {
    const std::string field = PendingField();
    const std::string where = field.empty() ? "a number in the body" : "'" + field + "'";
    switch (failure) {
      case JsonReadFailure::kNumberOverflow:
        Fail(ErrorCode::kInvalidArgument, where + " is too large for a double (" + message + ")",
             "number_overflow");
        return;
      case JsonReadFailure::kNumberTooLong:
        Fail(ErrorCode::kInvalidArgument, where + " is not a usable number: " + message,
             "number_too_long");
        return;
      case JsonReadFailure::kCancelled:
        Fail(ErrorCode::kUnavailable, "the body's parse was abandoned: its client has left",
             "cancelled");
        return;
      case JsonReadFailure::kSyntax:
        Fail(ErrorCode::kInvalidArgument, "request body is not valid JSON: " + message,
             "invalid_json");
        return;
    }
  }

  std::optional<JsonBodyError>& error() { return error_; }

 private:
  struct Frame {
    json* value;           // the open object or array
    json* slot = nullptr;  // an object's member whose value comes next
    size_t count = 0;      // keys or items so far
    std::string key;       // an object's current key, for error messages
    // ordered_json only: key -> position, once the object outgrows kLinearKeyScan.
    std::unordered_map<std::string, size_t> index;
  };

  // ordered_map (ordered_json's object_t) is a vector of pairs underneath.
  static constexpr bool kOrdered = requires { typename json::object_t::Container; };

  // The member `k` of the open object, created null if new. A repeated key keeps its first
  // position and its last value, as nlohmann's own parser does. ordered_json's own insert
  // searches every key (O(k) per key, O(k^2) per object), so new keys are appended directly
  // after a lookup in the frame's index.
  json& Member(Frame& f, const std::string& k) {
    if constexpr (!kOrdered) {
      return (*f.value)[k];
    } else {
      typename json::object_t::Container& vec =
          f.value->template get_ref<typename json::object_t&>();
      if (vec.size() < kLinearKeyScan) {
        for (auto& m : vec)
          if (m.first == k) return m.second;
        if (vec.size() + 1 == kLinearKeyScan) {
          for (size_t i = 0; i < vec.size(); ++i) f.index.emplace(vec[i].first, i);
          f.index.emplace(k, vec.size());
        }
      } else {
        const auto [it, inserted] = f.index.emplace(k, vec.size());
        if (!inserted) return vec[it->second].second;
      }
      vec.emplace_back(k, json());
      return vec.back().second;
    }
  }

  // Where the value now being read sits, e.g. "messages[3].content". The innermost frame's
  // value is still pending (an array's next index, an object's last key); outer frames hold
  // their open child (an array's last element).
  std::string PendingField() const {
    std::string out;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      const bool innermost = i + 1 == stack_.size();
      if (f.value->is_object()) {
        if (f.count == 0) break;
        if (!out.empty()) out += '.';
        out += f.key;
      } else {
        const size_t index = innermost ? f.count : f.count - 1;
        out += '[' + std::to_string(index) + ']';
      }
    }
    return out;
  }

  bool Fail(ErrorCode code, const std::string& message, const char* slug) {
    // Malformed text and nesting have no one field to blame (the depth error's field would be
    // a long run of "[0]"); a number or a count over a limit names where it happened.
    if (!error_) {
      const std::string_view s = slug;
      const bool named = s == "number_overflow" || s == "number_too_long" || s == "json_too_large";
      error_.emplace(code, message, named ? PendingField() : "", slug);
    }
    return false;
  }

  // Places a value where the parser is: the root, an array's next element or an object's
  // member; returns it (null on a limit).
  json* Place(json&& v) {
    if (!Grow(sizeof(json) + (v.is_object() || v.is_array() ? kContainerBytes : 0))) return nullptr;
    if (++values_ > limits_.max_values) {
      Fail(ErrorCode::kTooLarge,
           "the body has more than " + std::to_string(limits_.max_values) + " JSON values",
           "json_too_large");
      return nullptr;
    }
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.value->is_object()) {
      *f.slot = std::move(v);
      return f.slot;
    }
    if (f.count >= limits_.max_array_items) {
      Fail(ErrorCode::kTooLarge,
           "an array has more than " + std::to_string(limits_.max_array_items) + " items",
           "json_too_large");
      return nullptr;
    }
    ++f.count;
    f.value->push_back(std::move(v));
    return &f.value->back();
  }

  bool Value(json&& v) { return Place(std::move(v)) != nullptr; }

  // Adds `bytes` to the tree's estimated memory; false (with the error) over max_tree_bytes.
  bool Grow(size_t bytes) {
    tree_bytes_ += bytes;
    if (limits_.max_tree_bytes == 0 || tree_bytes_ <= limits_.max_tree_bytes) return true;
    return Fail(ErrorCode::kTooLarge,
                "the body's JSON takes more than " + std::to_string(limits_.max_tree_bytes >> 20) +
                    " MiB of memory once parsed (many small values): send fewer",
                "json_too_large");
  }

  bool Open(nlohmann::detail::value_t type) {
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
      return Fail(
          ErrorCode::kInvalidArgument,
          "request body nests JSON deeper than " + std::to_string(limits_.max_depth) + " levels",
          "json_too_deep");
    }
    json* placed = Place(json(type));
    if (!placed) return false;
    Frame& f = stack_.emplace_back();
    f.value = placed;
    return true;
  }

  json& root_;
  const JsonLimits& limits_;
  std::vector<Frame> stack_;
  size_t values_ = 0;
  size_t tree_bytes_ = 0;
  std::optional<JsonBodyError> error_;
};

template <class Json>
Json ParseBounded(std::string_view text, const JsonLimits& limits,
                  const std::function<bool()>& cancelled) {
  Json root;
  BoundedDomBuilder<Json> builder(root, limits);
  if (!JsonTextReader(text, builder, cancelled).Read()) {
    if (builder.error()) throw *builder.error();
    throw JsonBodyError(ErrorCode::kInvalidArgument, "request body is not valid JSON", "",
                        "invalid_json");
  }
  return root;
}

}  // namespace

nlohmann::json ParseBoundedJson(std::string_view text, const JsonLimits& limits,
                                const std::function<bool()>& cancelled) {
  return ParseBounded<nlohmann::json>(text, limits, cancelled);
}

nlohmann::ordered_json ParseBoundedOrderedJson(std::string_view text, const JsonLimits& limits,
                                               const std::function<bool()>& cancelled) {
  return ParseBounded<nlohmann::ordered_json>(text, limits, cancelled);
}

}  // namespace m3
