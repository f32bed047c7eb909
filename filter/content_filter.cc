#include "filter/content_filter.h"

#include <algorithm>
#include <array>

namespace tmcra::filter {

namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// The headers of TMCRA's evidence format (our engine's and the hosted service's), each followed
// on its line by " | " fields or ";" and a closing "]".
constexpr std::array<std::string_view, 7> kHeaders = {
    "[TMCRA authority policy",       "[TMCRA actor section", "[Immutable source window",
    "[Immutable neighboring source", "[Slow memory ",        "[Fast memory context",
    "[Fast memory override"};

constexpr size_t kMaxHeaderLine = 1024;

// The header starting at `at`, if one does: the rest of its line holds " | " or ";" and "]".
bool HeaderAt(std::string_view text, size_t at) {
  for (std::string_view h : kHeaders) {
    if (text.compare(at, h.size(), h) != 0) continue;
    // A header line is short: its end is looked for within kMaxHeaderLine characters only.
    const std::string_view window = text.substr(at, kMaxHeaderLine);
    const size_t eol = std::min(window.find('\n'), window.find("\\n"));
    const std::string_view line = window.substr(0, eol);
    const size_t close = line.find(']');
    if (close == std::string_view::npos) return false;
    const std::string_view inside = line.substr(0, close);
    return inside.find(" | ") != std::string_view::npos ||
           inside.find(';') != std::string_view::npos;
  }
  return false;
}

// The end of the paragraph from `at`: the next blank line (real or JSON-escaped newlines) or
// the next header, whichever comes first; the blank line itself goes with the block.
size_t ParagraphEnd(std::string_view text, size_t at) {
  size_t i = at + 1;
  while (i < text.size()) {
    if (text[i] == '[' && HeaderAt(text, i)) return i;
    if (text.compare(i, 2, "\n\n") == 0) {
      size_t j = i;
      while (j < text.size() && text[j] == '\n') ++j;
      return j;
    }
    if (text.compare(i, 4, "\\n\\n") == 0) {
      size_t j = i;
      while (text.compare(j, 2, "\\n") == 0) j += 2;
      return j;
    }
    ++i;
  }
  return text.size();
}

// Removes marked regions; returns how many.
int64_t DropMarked(std::string& text) {
  int64_t dropped = 0;
  size_t at = 0;
  while ((at = text.find(kRecalledBegin, at)) != std::string::npos) {
    const size_t end_marker = text.find(kRecalledEnd, at + kRecalledBegin.size());
    size_t end = end_marker == std::string::npos ? text.size() : end_marker + kRecalledEnd.size();
    if (end < text.size() && text[end] == '\n') ++end;
    text.erase(at, end - at);
    ++dropped;
  }
  // An end marker left alone (its beginning cut off by whoever quoted it) goes too.
  while ((at = text.find(kRecalledEnd)) != std::string::npos) {
    text.erase(at, kRecalledEnd.size());
  }
  return dropped;
}

// Removes unmarked evidence blocks; returns how many.
int64_t DropBlocks(std::string& text) {
  int64_t dropped = 0;
  std::string out;
  size_t copied = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t open = text.find('[', i);
    if (open == std::string::npos) break;
    if (!HeaderAt(text, open)) {
      i = open + 1;
      continue;
    }
    const size_t end = ParagraphEnd(text, open);
    out.append(text, copied, open - copied);
    copied = end;
    i = end;
    ++dropped;
  }
  if (dropped == 0) return 0;
  out.append(text, copied, std::string::npos);
  text = std::move(out);
  return dropped;
}

bool EndsWithNoCase(const std::string& s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    if (Lower(s[s.size() - suffix.size() + i]) != suffix[i]) return false;
  }
  return true;
}

}  // namespace

void FilterReport::Add(const FilterReport& other) {
  for (const auto& [kind, n] : other.redacted) redacted[kind] += n;
  private_spans += other.private_spans;
  recalled_blocks += other.recalled_blocks;
}

std::string MarkRecalled(std::string_view context) {
  std::string out;
  out.reserve(context.size() + kRecalledBegin.size() + kRecalledEnd.size() + 2);
  out += kRecalledBegin;
  out += '\n';
  out += context;
  if (!context.empty() && context.back() != '\n') out += '\n';
  out += kRecalledEnd;
  return out;
}

int64_t DropRecalled(std::string& text) {
  int64_t dropped = DropMarked(text);
  dropped += DropBlocks(text);
  return dropped;
}

// Copies `text` to the output a character at a time; when the output ends with "<private>"
// the span opens there, and when it ends with "</private>" the output goes back to where the
// span opened. Working on the output, a tag made by joining what a removal left is found too,
// so a second pass finds nothing.
int64_t DropPrivate(std::string& text) {
  constexpr std::string_view kOpen = "<private>";
  constexpr std::string_view kClose = "</private>";
  if (text.find('<') == std::string::npos) return 0;
  std::string out;
  out.reserve(text.size());
  int64_t dropped = 0;
  size_t open = std::string::npos;
  for (char c : text) {
    out.push_back(c);
    if (c != '>') continue;
    if (open == std::string::npos && EndsWithNoCase(out, kOpen)) {
      open = out.size() - kOpen.size();
    } else if (open != std::string::npos && EndsWithNoCase(out, kClose)) {
      out.resize(open);
      open = std::string::npos;
      ++dropped;
    }
  }
  if (open != std::string::npos) {
    out.resize(open);
    ++dropped;
  }
  if (dropped > 0) text = std::move(out);
  return dropped;
}

ContentFilter::ContentFilter(FilterRules rules) : rules_(std::move(rules)) {}

FilterResult ContentFilter::Apply(std::string_view input) const {
  FilterResult result;
  result.text.assign(input);
  if (rules_.drop_private) result.report.private_spans = DropPrivate(result.text);
  if (rules_.drop_recalled) result.report.recalled_blocks = DropRecalled(result.text);
  if (!rules_.redact_secrets) return result;
  const std::vector<SecretMatch> secrets = FindSecrets(result.text, rules_);
  if (secrets.empty()) return result;
  std::string out;
  out.reserve(result.text.size());
  size_t copied = 0;
  for (const SecretMatch& m : secrets) {
    out.append(result.text, copied, m.begin - copied);
    out += "[REDACTED:";
    out += m.kind;
    out += ']';
    copied = m.end;
    ++result.report.redacted[std::string(m.kind)];
  }
  out.append(result.text, copied, std::string::npos);
  result.text = std::move(out);
  return result;
}

}  // namespace tmcra::filter
