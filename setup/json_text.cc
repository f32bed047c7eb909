#include "setup/json_text.h"

#include <algorithm>
#include <exception>
#include <set>
#include <utility>
#include <vector>

namespace tmcra::setup {
namespace {

using ordered_json = nlohmann::ordered_json;

// What writing the parsed document back would lose, found before it is written: a key given
// twice (the parser keeps one of them) and an integer too large for 64 bits (it becomes a
// floating-point number). Such a file is refused rather than changed beyond our entry.
class LossCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string problem;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t& text) override {
    if (text.find_first_of(".eE") == string_t::npos && problem.empty()) {
      problem = "has an integer too large to be written back exactly";
    }
    return true;
  }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!keys_.empty() && !keys_.back().insert(k).second && problem.empty()) {
      problem = "has a key given twice in one object";
    }
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    keys_.emplace_back();  // arrays have no keys; keeps the stack in step
    return true;
  }
  bool end_array() override {
    keys_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  std::vector<std::set<std::string>> keys_;
};

// The indent of the first indented line (a tab, or that many spaces); 2 when there is none.
std::pair<int, char> DetectIndent(std::string_view text) {
  for (size_t i = text.find('\n'); i != std::string_view::npos; i = text.find('\n', i + 1)) {
    size_t j = i + 1;
    if (j < text.size() && text[j] == '\t') return {1, '\t'};
    while (j < text.size() && text[j] == ' ') ++j;
    if (j > i + 1 && j < text.size() && text[j] != '\n' && text[j] != '\r') {
      return {static_cast<int>(std::min<size_t>(j - i - 1, 8)), ' '};
    }
  }
  return {2, ' '};
}

}  // namespace

bool IsBlankText(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

std::string TextPosition(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1);
}

Result<ordered_json> ParseJsonConfig(std::string_view text) {
  if (IsBlankText(text)) return ordered_json::object();
  ordered_json doc;
  try {
    doc = ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // The exception's own message quotes the text it read: only its position is used.
    const bool with_comments =
        !ordered_json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true)
             .is_discarded();
    if (with_comments) {
      return Error::Invalid("has comments, which rewriting it would drop");
    }
    return Error::Invalid("is not valid JSON (at " +
                          TextPosition(text, e.byte > 0 ? e.byte - 1 : 0) + ")");
  }
  if (!doc.is_object()) return Error::Invalid("is not a JSON object at the top level");
  LossCheck check;
  nlohmann::json::sax_parse(text, &check);
  if (!check.problem.empty()) return Error::Invalid(check.problem);
  return doc;
}

Result<std::string> DumpJsonConfig(const ordered_json& doc, std::string_view original) {
  const auto [width, ch] = DetectIndent(original);
  std::string out;
  try {
    out = doc.dump(width, ch, /*ensure_ascii=*/false, nlohmann::json::error_handler_t::strict);
  } catch (const std::exception&) {
    return Error::Invalid("could not be written back as JSON");
  }
  if (IsBlankText(original) || original.back() == '\n') out += '\n';
  if (original.find("\r\n") != std::string_view::npos) {  // a CRLF file stays CRLF
    std::string crlf;
    crlf.reserve(out.size() + out.size() / 16);
    for (char c : out) {
      if (c == '\n') crlf += '\r';
      crlf += c;
    }
    out = std::move(crlf);
  }
  return out;
}

}  // namespace tmcra::setup
