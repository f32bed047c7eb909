// The content filter: every text tmcra stores passes through it first, in the client (before
// it is hashed and queued in the outbox) and again in the engine and tmcra-memd (text from any
// client). It
//   - redacts secrets (API keys and tokens of ~35 kinds, private key blocks, passwords in URLs
//     and assignments, Authorization headers, high-entropy values under key-like names): each
//     becomes "[REDACTED:<kind>]";
//   - drops private spans, "<private>…</private>" (the tags too);
//   - drops blocks of recalled memory that tmcra injected (its evidence envelope), so a quoted
//     or pasted context is never stored again.
// Applying it twice changes nothing the second time: Apply(Apply(x).text).text ==
// Apply(x).text. It runs in time linear in the text (no backtracking regular expressions), and
// never fails: invalid UTF-8 passes through unchanged around what it finds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tmcra::filter {

// What the filter does, from configuration (docs/privacy.md).
struct FilterRules {
  bool redact_secrets = true;
  // A token (a run of letters, digits and "_-.") that starts with one of these and has at least
  // 8 more token characters is a secret of kind "custom".
  std::vector<std::string> extra_prefixes;
  // Exact strings that are never redacted, even where a rule would take them.
  std::vector<std::string> allow;
  // Private spans and recalled memory are always dropped in what the product stores; these
  // two let a test of what lies beneath (e.g. the evidence renderer's escaping) store them.
  bool drop_private = true;
  bool drop_recalled = true;
};

// What one application of the filter changed (no secret text in it).
struct FilterReport {
  std::map<std::string, int64_t> redacted;  // kind -> how many
  int64_t private_spans = 0;
  int64_t recalled_blocks = 0;  // blocks of injected memory dropped
  bool changed() const { return !redacted.empty() || private_spans > 0 || recalled_blocks > 0; }
  void Add(const FilterReport& other);
};

struct FilterResult {
  std::string text;
  FilterReport report;
};

// One secret found in a text: [begin, end) and its kind (one of SecretKinds()).
struct SecretMatch {
  size_t begin = 0;
  size_t end = 0;
  std::string_view kind;
};

// Every secret in `text`, in order, not overlapping (the allow-list applied).
std::vector<SecretMatch> FindSecrets(std::string_view text, const FilterRules& rules);
// The kinds FindSecrets names.
const std::vector<std::string_view>& SecretKinds();

// What tmcra injects into a prompt (a tool's text, a hook's context) is put between these two
// lines, so that the filter finds it again wherever it is quoted or pasted, escaped or not.
inline constexpr std::string_view kRecalledBegin = "[[tmcra:recalled-memory]]";
inline constexpr std::string_view kRecalledEnd = "[[/tmcra:recalled-memory]]";
// `context` between the markers, each on a line of its own.
std::string MarkRecalled(std::string_view context);

// Removes recalled memory from `text`: everything from kRecalledBegin to kRecalledEnd (to the
// end of the text when the end marker is missing), and each block of TMCRA's evidence format
// found without markers (a header such as "[Immutable source window 2 | ...]" or "[TMCRA
// authority policy | ...]" through the end of its paragraph). Returns how many it removed.
int64_t DropRecalled(std::string& text);
// Removes "<private>...</private>" spans, tags included (an unclosed one to the end of the
// text). Returns how many it removed.
int64_t DropPrivate(std::string& text);

class ContentFilter {
 public:
  explicit ContentFilter(FilterRules rules = {});
  FilterResult Apply(std::string_view text) const;
  const FilterRules& rules() const { return rules_; }

 private:
  FilterRules rules_;
};

}  // namespace tmcra::filter
