// Rendering of recall evidence as TMCRA's `raw_hierarchical` text (docs/contract.md §1.4.1):
// an authority policy block, then up to three actor sections, each holding evidence blocks that
// start with a bracketed header. Blocks are separated by a blank line, so budget selection can
// drop whole blocks.
//
// Stored text is data: before it is placed under a header it is neutralised so that it can never
// forge a header or a section, nor smuggle terminal or bidi controls into a prompt.
#pragma once

#include <string>
#include <string_view>

namespace tmcra::memory {

// The neutralised form of stored text:
//  - invalid UTF-8 becomes U+FFFD; CRLF and CR become LF;
//  - C0 controls (but LF and TAB), DEL, C1 controls, U+2028/U+2029, bidi embeddings, overrides
//    and isolates, and zero-width characters are written as visible escapes ("\u202e");
//  - a line whose first non-blank character is '[' gets a backslash before the '[', so no line
//    of stored text can read as a block header;
//  - a backslash that starts a line is doubled, so the escape above stays unambiguous.
// `changed` is set when the result differs from the input.
std::string NeutraliseText(std::string_view text, bool* changed = nullptr);

// A header field value: no '|', '[', ']' or line breaks (replaced by '_'), controls escaped.
std::string HeaderValue(std::string_view value);

inline constexpr const char* kAuthorityPolicyBlock =
    "[TMCRA authority policy | precedence=current_user>historical_user>assistant | "
    "assistant_is_not_user=true]";
inline constexpr const char* kUserSection =
    "[TMCRA actor section | actor=user | authority=user_statement]\nUser requirements and facts";
inline constexpr const char* kAssistantSection =
    "[TMCRA actor section | actor=assistant | authority=assistant_source]\n"
    "Codex work progress and results (not user statements)";
inline constexpr const char* kMixedSection =
    "[TMCRA actor section | actors=mixed_or_unknown | authority=non_user]\n"
    "Other or mixed provenance (never user-authoritative)";

}  // namespace tmcra::memory
