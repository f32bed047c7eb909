#include "base/json_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "base/json_scan.h"
#include "base/utf8.h"

namespace tmcra {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// Json is nlohmann::json (objects are std::maps: a member's insertion finds a repeated key) or
// nlohmann::ordered_json (objects are vectors in document order, see CloseObject).
template <typename Json>
class Reader {
  static constexpr bool kOrdered = std::is_same_v<Json, ojson>;

 public:
  Reader(std::string_view text, size_t max_depth, ElidedMember* elide = nullptr,
         bool past_overflow = false)
      : begin_(reinterpret_cast<const unsigned char*>(text.data())),
        p_(begin_),
        end_(p_ + text.size()),
        max_depth_(max_depth),
        elide_(elide),
        past_overflow_(past_overflow) {
    if (elide_ != nullptr) {
      elide_->elided = false;
      elide_->found.assign(elide_->watch.size(), nullptr);
      best_paths_.assign(elide_->watch.size(), {});
    }
  }

  JsonReadResult Read(Json& out) {
    JsonReadResult result;
    Json root;
    if (!Document(root)) {
      result.duplicate_key = duplicate_;
      result.too_deep = too_deep_;
      // Read past, the numbers were not what stopped the read.
      if (!past_overflow_) NumbersOutOfRange(result);
      return result;
    }
    out = std::move(root);
    result.ok = overflow_paths_.empty();
    NumbersOutOfRange(result);
    return result;
  }

 private:
  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  bool Literal(const char* word, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    for (size_t i = 0; i < n; ++i) {
      if (p_[i] != static_cast<unsigned char>(word[i])) return false;
    }
    p_ += n;
    return true;
  }

  static int Hex(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  bool Hex4(uint32_t* out) {
    if (end_ - p_ < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = Hex(p_[i]);
      if (h < 0) return false;
      v = (v << 4) | static_cast<uint32_t>(h);
    }
    p_ += 4;
    *out = v;
    return true;
  }

  static void AppendUtf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      s.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  // At the opening quote.
  bool String(std::string& s) {
    ++p_;
    for (;;) {
      const unsigned char* run = p_;
      p_ += PlainJsonRun(p_, static_cast<size_t>(end_ - p_));
      s.append(reinterpret_cast<const char*>(run), static_cast<size_t>(p_ - run));
      if (p_ >= end_) return false;
      const unsigned char c = *p_;
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      if (c >= 0x80) {
        const size_t n = Utf8SequenceLength(
            std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(end_ - p_)), 0);
        if (n == 0) return false;
        s.append(reinterpret_cast<const char*>(p_), n);
        p_ += n;
        continue;
      }
      // A backslash.
      ++p_;
      if (p_ >= end_) return false;
      const unsigned char e = *p_++;
      switch (e) {
        case '"':
          s.push_back('"');
          break;
        case '\\':
          s.push_back('\\');
          break;
        case '/':
          s.push_back('/');
          break;
        case 'b':
          s.push_back('\b');
          break;
        case 'f':
          s.push_back('\f');
          break;
        case 'n':
          s.push_back('\n');
          break;
        case 'r':
          s.push_back('\r');
          break;
        case 't':
          s.push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t low = 0;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
            p_ += 2;
            if (!Hex4(&low) || low < 0xdc00 || low > 0xdfff) return false;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            return false;
          }
          AppendUtf8(s, cp);
          break;
        }
        default:
          return false;
      }
    }
  }

  bool Number(Json& out) {
    const unsigned char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ >= end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    } else {
      return false;
    }
    bool is_float = false;
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      if (p_ >= end_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
      is_float = true;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ >= end_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
      is_float = true;
    }
    const char* first = reinterpret_cast<const char*>(start);
    const char* last = reinterpret_cast<const char*>(p_);
    if (!is_float) {
      if (negative) {
        int64_t v = 0;
        const auto r = std::from_chars(first, last, v);
        if (r.ec == std::errc() && r.ptr == last) {
          out = v;
          return true;
        }
      } else {
        uint64_t v = 0;
        const auto r = std::from_chars(first, last, v);
        if (r.ec == std::errc() && r.ptr == last) {
          out = v;
          return true;
        }
      }
      // Out of range: a double, as nlohmann does.
    }
    // from_chars is exact and ignores the locale. Out of range it says so where strtod gives
    // 0 or infinity: nlohmann keeps an underflow (0 or a subnormal) and refuses infinity.
    double d = 0;
    const auto r = std::from_chars(first, last, d);
    if (r.ec == std::errc::result_out_of_range) {
      const std::string token(first, last);  // strtod needs a terminated copy
      d = std::strtod(token.c_str(), nullptr);
    } else if (r.ec != std::errc() || r.ptr != last) {
      return false;
    }
    if (!std::isfinite(d)) return OutOfRange(out);
    out = d;
    return true;
  }

  // A number no double holds, to be read into `out`: refused, or (past_overflow_) null. Its
  // path is kept when it is the text's first, or the first in a top-level array's element.
  bool OutOfRange(Json& out) {
    const bool in_array = !stack_.empty() && stack_[0]->is_array();
    const size_t element = in_array ? stack_[0]->size() - 1 : 0;
    if (overflow_paths_.empty() || (in_array && element != overflow_element_)) {
      overflow_paths_.push_back(PathTo(&out));
      overflow_element_ = element;
    }
    if (!past_overflow_) return false;
    out = nullptr;
    return true;
  }

  void NumbersOutOfRange(JsonReadResult& result) {
    result.number_out_of_range = !overflow_paths_.empty();
    result.number_paths = std::move(overflow_paths_);
  }

  // The keys and indices from the root down to the value being read into `slot` (number_
  // inside the elided member). Only for an error: an object's key is looked up by its member's
  // address.
  json PathTo(const Json* slot) const {
    const bool eliding = slot == &number_;
    json path = json::array();
    size_t objects = 0;  // kOrdered: the open objects' members are in members_, in this order
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Json& container = *stack_[i];
      if (container.is_array()) {
        path.push_back(container.size() - 1);
        continue;
      }
      if constexpr (kOrdered) {
        path.push_back(members_[objects++].back().first);
      } else {
        const Json* child = i + 1 < stack_.size() ? stack_[i + 1] : eliding ? elided_at_ : slot;
        const auto& members = container.template get_ref<const typename Json::object_t&>();
        for (const auto& [key, value] : members) {
          if (&value == child) {
            path.push_back(key);
            break;
          }
        }
      }
    }
    if (!eliding) return path;
    for (size_t i = 0; i < frames_.size(); ++i) {
      if (frames_[i].object) {
        path.push_back(std::string(KeyAt(current_key_[i])));
      } else {
        path.push_back(frames_[i].index);
      }
    }
    return path;
  }

  // Containers are built in place: `stack_` holds the open ones.
  bool Document(Json& root) {
    SkipSpace();
    Json* slot = &root;  // where the next value goes
    for (;;) {
      // A value into *slot.
      if (p_ >= end_) return false;
      const unsigned char c = *p_;
      bool opened = false;
      if ((c == '{' || c == '[') && max_depth_ > 0 && stack_.size() >= max_depth_) {
        too_deep_ = true;
        return false;
      }
      bool elided = false;  // then the value, read whole, is one value like a scalar
      if constexpr (!kOrdered) {
        // The member to elide, when its value is an object (otherwise it is built).
        if (c == '{' && slot == elided_at_) {
          if (!ElideObject()) return false;
          *slot = Json::object();
          elide_->elided = true;
          elided = true;
        }
      }
      if (!elided) switch (c) {
          case '{':
            ++p_;
            *slot = Json::object();
            stack_.push_back(slot);
            if constexpr (kOrdered) members_.emplace_back();
            opened = true;
            break;
          case '[':
            ++p_;
            *slot = Json::array();
            stack_.push_back(slot);
            opened = true;
            break;
          case '"': {
            std::string s;
            if (!String(s)) return false;
            *slot = std::move(s);
            break;
          }
          case 't':
            if (!Literal("true", 4)) return false;
            *slot = true;
            break;
          case 'f':
            if (!Literal("false", 5)) return false;
            *slot = false;
            break;
          case 'n':
            if (!Literal("null", 4)) return false;
            *slot = nullptr;
            break;
          default:
            if (c != '-' && (c < '0' || c > '9')) return false;
            if (!Number(*slot)) return false;
        }
      SkipSpace();
      if (opened) {
        // The first member or element, or the end of an empty container.
        Json& container = *stack_.back();
        const bool object = container.is_object();
        if (p_ < end_ && *p_ == static_cast<unsigned char>(object ? '}' : ']')) {
          ++p_;
          if (object && !CloseObject(container)) return false;
          stack_.pop_back();
        } else {
          slot = object ? Key(container) : Element(container);
          if (slot == nullptr) return false;
          continue;
        }
      }
      // After a value: a comma, or closing brackets, or the end.
      for (;;) {
        SkipSpace();
        if (stack_.empty()) return p_ == end_;
        Json& container = *stack_.back();
        const bool object = container.is_object();
        if (p_ >= end_) return false;
        if (*p_ == ',') {
          ++p_;
          SkipSpace();
          slot = object ? Key(container) : Element(container);
          if (slot == nullptr) return false;
          break;
        }
        if (*p_ != static_cast<unsigned char>(object ? '}' : ']')) return false;
        ++p_;
        if (object && !CloseObject(container)) return false;
        stack_.pop_back();
      }
    }
  }

  // Reads `"key" :` and returns the new member's slot; nullptr on an error or a repeated key.
  Json* Key(Json& object) {
    if (p_ >= end_ || *p_ != '"') return nullptr;
    std::string key;
    if (!String(key)) return nullptr;
    SkipSpace();
    if (p_ >= end_ || *p_ != ':') return nullptr;
    ++p_;
    SkipSpace();
    if constexpr (kOrdered) {
      // Gathered apart until the object closes (CloseObject).
      (void)object;
      auto& members = members_.back();
      members.emplace_back(std::move(key), nullptr);
      return &members.back().second;
    } else {
      auto& members = object.template get_ref<typename Json::object_t&>();
      const bool elide = elide_ != nullptr && stack_.size() == 1 && key == elide_->key;
      auto [it, inserted] = members.emplace(std::move(key), nullptr);
      if (!inserted) {
        duplicate_ = true;
        return nullptr;
      }
      if (elide) elided_at_ = &it->second;
      return &it->second;
    }
  }

  // An ordered object's members go into it once it closes. ordered_map's emplace looks for the
  // key first, member by member (n^2/2 comparisons for n keys), and its elements, pairs with a
  // const key, are copied, not moved, whenever its vector grows; the members are gathered in a
  // vector of movable pairs instead, checked for a repeated key once (sorted), and moved in.
  bool CloseObject(Json& object) {
    if constexpr (kOrdered) {
      auto& members = members_.back();
      if (members.size() > 1) {
        std::vector<const std::string*> keys;
        keys.reserve(members.size());
        for (const auto& member : members) keys.push_back(&member.first);
        std::sort(keys.begin(), keys.end(),
                  [](const std::string* a, const std::string* b) { return *a < *b; });
        for (size_t i = 1; i < keys.size(); ++i) {
          if (*keys[i - 1] == *keys[i]) {
            duplicate_ = true;
            return false;
          }
        }
      }
      auto& target = object.template get_ref<typename Json::object_t&>();
      target.reserve(members.size());
      for (auto& [key, value] : members) target.emplace_back(std::move(key), std::move(value));
      members_.pop_back();
    } else {
      (void)object;
    }
    return true;
  }

  Json* Element(Json& array) {
    auto& elements = array.template get_ref<typename Json::array_t&>();
    elements.emplace_back(nullptr);
    return &elements.back();
  }

  // ---- the elided member (ElidedMember) ----
  // One open container of the elided value. An object's keys are kept (decoded) in
  // `key_bytes_`, from `bytes_begin`, and listed in `keys_`, from `keys_begin`, until it closes.
  static constexpr size_t kSearched = 16;
  struct Span {
    size_t offset = 0;
    size_t size = 0;
  };
  // Orders spans by the keys they hold (bytes, as std::map orders std::string); spans stay
  // valid as key_bytes_ grows. An ordered set: no hash for a hostile server to collide.
  struct SpanLess {
    const std::string* bytes;
    bool operator()(const Span& a, const Span& b) const {
      return std::string_view(*bytes).substr(a.offset, a.size) <
             std::string_view(*bytes).substr(b.offset, b.size);
    }
  };
  struct Frame {
    bool object = false;
    size_t index = 0;  // an array's current element
    size_t keys_begin = 0;
    size_t bytes_begin = 0;
    std::unique_ptr<std::set<Span, SpanLess>> seen;  // a large object's keys
  };
  // A place in the elided value, as a walk of the built value orders it: a key or an index.
  struct Step {
    bool index = false;
    size_t at = 0;
    std::string key;
  };

  std::string_view KeyAt(const Span& span) const {
    return std::string_view(key_bytes_).substr(span.offset, span.size);
  }

  // At `"key"`: reads it and the colon, and records it as the innermost object's current key;
  // false on an error or on a key the object already holds (as Key(): after the colon).
  bool ElidedKey() {
    if (p_ >= end_ || *p_ != '"') return false;
    scratch_.clear();
    if (!String(scratch_)) return false;
    SkipSpace();
    if (p_ >= end_ || *p_ != ':') return false;
    ++p_;
    SkipSpace();
    Frame& frame = frames_.back();
    const Span span{key_bytes_.size(), scratch_.size()};
    key_bytes_ += scratch_;
    if (!frame.seen) {
      // Small objects are searched; from kSearched keys on, a set of the object's keys is kept.
      for (size_t i = frame.keys_begin; i < keys_.size(); ++i) {
        if (KeyAt(keys_[i]) == scratch_) {
          duplicate_ = true;
          return false;
        }
      }
      if (keys_.size() - frame.keys_begin + 1 >= kSearched) {
        frame.seen = std::make_unique<std::set<Span, SpanLess>>(SpanLess{&key_bytes_});
        for (size_t i = frame.keys_begin; i < keys_.size(); ++i) frame.seen->insert(keys_[i]);
        frame.seen->insert(span);
      }
    } else if (!frame.seen->insert(span).second) {
      duplicate_ = true;
      return false;
    }
    keys_.push_back(span);
    current_key_.back() = span;
    return true;
  }

  // Whether the object at frames_[depth] comes before the one whose path is `best` in a
  // pre-order walk (members in key order): the first differing step decides; an ancestor
  // comes first.
  bool Before(size_t depth, const std::vector<Step>& best) {
    for (size_t i = 0; i < depth && i < best.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.object) {
        const std::string_view key = KeyAt(current_key_[i]);
        work_ += std::min(key.size(), best[i].key.size()) + 1;
        if (key != best[i].key) return key < best[i].key;
      } else if (f.index != best[i].at) {
        return f.index < best[i].at;
      }
    }
    return depth < best.size();
  }

  // A number was read as the value of the innermost object's current key. Comparing and
  // copying paths is counted in `work_`: a hostile answer (a long key above many candidates)
  // could make it quadratic, so past a budget the elision is given up (ReadJsonStrict then
  // reads the text again, building the member).
  void Consider(const Json& number) {
    if (!number.is_number_integer() || frames_.empty() || !frames_.back().object) return;
    const std::string_view key = KeyAt(current_key_.back());
    const size_t depth = frames_.size() - 1;  // the path of the object holding the key
    for (size_t w = 0; w < elide_->watch.size(); ++w) {
      if (key != elide_->watch[w]) continue;
      if (!elide_->found[w].is_null() && !Before(depth, best_paths_[w])) continue;
      elide_->found[w] = number;
      std::vector<Step>& path = best_paths_[w];
      path.clear();
      for (size_t i = 0; i < depth; ++i) {
        const Frame& f = frames_[i];
        if (f.object) {
          const std::string_view step = KeyAt(current_key_[i]);
          work_ += step.size() + 1;
          path.push_back({false, 0, std::string(step)});
        } else {
          path.push_back({true, f.index, {}});
        }
      }
    }
  }

 public:
  // The paths compared and copied for the elided member outgrew twice the text: its result
  // is not to be used (ReadJsonStrict reads again without eliding).
  bool elision_over_budget() const { return work_ > 2 * static_cast<size_t>(end_ - begin_) + 4096; }

 private:
  void Open(bool object) {
    Frame f;
    f.object = object;
    f.keys_begin = keys_.size();
    f.bytes_begin = key_bytes_.size();
    frames_.push_back(std::move(f));
    current_key_.emplace_back();
  }

  void Close() {
    const Frame& f = frames_.back();
    keys_.resize(f.keys_begin);
    key_bytes_.resize(f.bytes_begin);
    frames_.pop_back();
    current_key_.pop_back();
  }

  // At the `{` of the elided member's value: reads to its end, building nothing.
  bool ElideObject() {
    frames_.clear();
    keys_.clear();
    key_bytes_.clear();
    current_key_.clear();
    for (;;) {
      // A value.
      if (p_ >= end_) return false;
      const unsigned char c = *p_;
      if (c == '{' || c == '[') {
        if (max_depth_ > 0 && stack_.size() + frames_.size() >= max_depth_) {
          too_deep_ = true;
          return false;
        }
        ++p_;
        Open(c == '{');
        SkipSpace();
        if (p_ < end_ && *p_ == static_cast<unsigned char>(c == '{' ? '}' : ']')) {
          ++p_;
          Close();
        } else {
          if (c == '{' && !ElidedKey()) return false;
          continue;
        }
      } else if (c == '"') {
        scratch_.clear();
        if (!String(scratch_)) return false;
      } else if (c == 't') {
        if (!Literal("true", 4)) return false;
      } else if (c == 'f') {
        if (!Literal("false", 5)) return false;
      } else if (c == 'n') {
        if (!Literal("null", 4)) return false;
      } else {
        if (c != '-' && (c < '0' || c > '9')) return false;
        if (!Number(number_)) return false;
        Consider(number_);
      }
      // After a value: a comma, or closing brackets; done when the elided object closes.
      for (;;) {
        SkipSpace();
        if (frames_.empty()) return true;
        Frame& f = frames_.back();
        if (p_ >= end_) return false;
        if (*p_ == ',') {
          ++p_;
          SkipSpace();
          if (f.object) {
            if (!ElidedKey()) return false;
          } else {
            ++f.index;
          }
          break;
        }
        if (*p_ != static_cast<unsigned char>(f.object ? '}' : ']')) return false;
        ++p_;
        Close();
      }
    }
  }

  const unsigned char* begin_;
  const unsigned char* p_;
  const unsigned char* end_;
  const size_t max_depth_;
  ElidedMember* const elide_;
  Json* elided_at_ = nullptr;  // the slot of the member to elide, once its key is read
  size_t work_ = 0;            // see Consider
  std::vector<Frame> frames_;
  std::vector<Span> current_key_;  // per frame: an object's current key
  std::vector<Span> keys_;
  std::string key_bytes_;
  std::string scratch_;
  Json number_;
  std::vector<std::vector<Step>> best_paths_;
  std::vector<Json*> stack_;
  // kOrdered: the members of each open object, innermost last.
  std::vector<std::vector<std::pair<std::string, Json>>> members_;
  bool duplicate_ = false;
  bool too_deep_ = false;
  const bool past_overflow_;
  std::vector<json> overflow_paths_;  // see OutOfRange
  size_t overflow_element_ = 0;
};

}  // namespace

JsonReadResult ReadJsonStrict(std::string_view text, json& out, size_t max_depth,
                              ElidedMember* elide) {
  Reader<json> reader(text, max_depth, elide);
  JsonReadResult result = reader.Read(out);
  if (elide == nullptr || !reader.elision_over_budget()) return result;
  // Too much work to pick the watched integers: read the member whole instead.
  out = json();
  Reader<json> again(text, max_depth);
  elide->elided = false;
  elide->found.assign(elide->watch.size(), nullptr);
  return again.Read(out);
}

JsonReadResult ReadJsonStrictPastOverflow(std::string_view text, json& out, size_t max_depth) {
  return Reader<json>(text, max_depth, nullptr, /*past_overflow=*/true).Read(out);
}

JsonReadResult ReadOrderedJsonStrict(std::string_view text, ojson& out) {
  return Reader<ojson>(text, 0).Read(out);
}

ojson ParseOrderedJsonLenient(std::string_view text) {
  ojson value;
  if (ReadOrderedJsonStrict(text, value).ok) return value;
  return ojson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

json ParseJsonLenient(std::string_view text) {
  json value;
  if (ReadJsonStrict(text, value).ok) return value;
  return json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

}  // namespace tmcra
