// Secret detection: one pass of several detectors over the text, each linear, their matches
// merged (a specific format wins over a generic rule where they overlap).
//   1. tokens with a known prefix (ghp_, AKIA, sk-ant-, xoxb-, ...) at a token boundary;
//   2. private key blocks (PEM, OpenSSH, PGP; also with JSON-escaped newlines);
//   3. passwords in URLs (scheme://user:password@host);
//   4. Authorization headers and bare "Bearer <token>";
//   5. values assigned to key-like names (password=, "api_key": "...", token: ...), and
//      cloud connection-string fields (AccountKey=, SharedAccessSignature, sig=).
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>

#include "filter/content_filter.h"

namespace tmcra::filter {

namespace {

// ---- Character classes ----------------------------------------------------------------------

bool IsAlpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsAlpha(c) || IsDigit(c); }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsLowerHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f'); }
bool IsUpperAlnum(char c) { return IsDigit(c) || (c >= 'A' && c <= 'Z'); }
bool IsWordChar(char c) { return IsAlnum(c) || c == '_' || c == '-'; }  // [A-Za-z0-9_-]
bool IsBase64Char(char c) { return IsAlnum(c) || c == '+' || c == '/' || c == '='; }
bool IsBlank(char c) { return c == ' ' || c == '\t'; }
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

using CharClass = bool (*)(char);

bool StartsWith(std::string_view text, size_t at, std::string_view prefix) {
  return text.size() - at >= prefix.size() && text.compare(at, prefix.size(), prefix) == 0;
}

bool StartsWithNoCase(std::string_view text, size_t at, std::string_view prefix) {
  if (text.size() - at < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (Lower(text[at + i]) != Lower(prefix[i])) return false;
  }
  return true;
}

// The end of the run of `cls` characters from `at`.
size_t RunEnd(std::string_view text, size_t at, CharClass cls) {
  while (at < text.size() && cls(text[at])) ++at;
  return at;
}

// ---- 1. Tokens with a known prefix ----------------------------------------------------------

struct TokenFormat {
  std::string_view prefix;
  std::string_view kind;
  CharClass body;
  size_t min_body;
  size_t max_body;  // the body's run may not be longer (0: no limit)
};

constexpr size_t kAny = 0;

// Ordered so that a longer prefix comes before a shorter one that it extends.
const std::array kTokenFormats = {
    TokenFormat{"AKIA", "aws_access_key_id", IsUpperAlnum, 16, 16},
    TokenFormat{"ASIA", "aws_access_key_id", IsUpperAlnum, 16, 16},
    TokenFormat{"ABIA", "aws_access_key_id", IsUpperAlnum, 16, 16},
    TokenFormat{"ACCA", "aws_access_key_id", IsUpperAlnum, 16, 16},
    TokenFormat{"AIza", "google_api_key", IsWordChar, 35, 35},
    TokenFormat{"GOCSPX-", "google_oauth_client_secret", IsWordChar, 28, 28},
    TokenFormat{"ya29.", "google_oauth_token", IsWordChar, 30, kAny},
    TokenFormat{"github_pat_", "github_fine_grained_token", IsWordChar, 40, kAny},
    TokenFormat{"ghp_", "github_token", IsAlnum, 36, 36},
    TokenFormat{"gho_", "github_token", IsAlnum, 36, 36},
    TokenFormat{"ghu_", "github_token", IsAlnum, 36, 36},
    TokenFormat{"ghs_", "github_token", IsAlnum, 36, 36},
    TokenFormat{"ghr_", "github_token", IsAlnum, 36, 36},
    TokenFormat{"glpat-", "gitlab_token", IsWordChar, 20, kAny},
    TokenFormat{"gldt-", "gitlab_token", IsWordChar, 20, kAny},
    TokenFormat{"ATBB", "bitbucket_app_password", IsAlnum, 28, kAny},
    TokenFormat{"xoxb-", "slack_token", IsWordChar, 20, kAny},
    TokenFormat{"xoxp-", "slack_token", IsWordChar, 20, kAny},
    TokenFormat{"xoxa-", "slack_token", IsWordChar, 20, kAny},
    TokenFormat{"xoxe-", "slack_token", IsWordChar, 20, kAny},
    TokenFormat{"xoxr-", "slack_token", IsWordChar, 20, kAny},
    TokenFormat{"xoxs-", "slack_token", IsWordChar, 20, kAny},
    TokenFormat{"xapp-", "slack_token", IsWordChar, 20, kAny},
    TokenFormat{"sk_live_", "stripe_key", IsAlnum, 20, kAny},
    TokenFormat{"sk_test_", "stripe_key", IsAlnum, 20, kAny},
    TokenFormat{"rk_live_", "stripe_key", IsAlnum, 20, kAny},
    TokenFormat{"rk_test_", "stripe_key", IsAlnum, 20, kAny},
    TokenFormat{"whsec_", "stripe_webhook_secret", IsAlnum, 24, kAny},
    TokenFormat{"SK", "twilio_api_key", IsLowerHex, 32, 32},
    TokenFormat{"key-", "mailgun_api_key", IsLowerHex, 32, 32},
    TokenFormat{"npm_", "npm_token", IsAlnum, 36, 36},
    TokenFormat{"pypi-AgEIcHlwaS5vcmc", "pypi_token", IsWordChar, 40, kAny},
    TokenFormat{"dckr_pat_", "dockerhub_token", IsWordChar, 24, kAny},
    TokenFormat{"hf_", "huggingface_token", IsAlnum, 34, kAny},
    TokenFormat{"shpat_", "shopify_token", IsHex, 32, 32},
    TokenFormat{"shpca_", "shopify_token", IsHex, 32, 32},
    TokenFormat{"shppa_", "shopify_token", IsHex, 32, 32},
    TokenFormat{"shpss_", "shopify_token", IsHex, 32, 32},
    TokenFormat{"sk-ant-", "anthropic_api_key", IsWordChar, 40, kAny},
    TokenFormat{"sk-proj-", "openai_api_key", IsWordChar, 40, kAny},
    TokenFormat{"sk-svcacct-", "openai_api_key", IsWordChar, 40, kAny},
    TokenFormat{"sk-admin-", "openai_api_key", IsWordChar, 40, kAny},
    TokenFormat{"sk-", "openai_api_key", IsAlnum, 40, kAny},
    TokenFormat{"gsk_", "groq_api_key", IsAlnum, 48, kAny},
    TokenFormat{"xai-", "xai_api_key", IsAlnum, 60, kAny},
    TokenFormat{"pplx-", "perplexity_api_key", IsAlnum, 40, kAny},
    TokenFormat{"dop_v1_", "digitalocean_token", IsLowerHex, 64, 64},
    TokenFormat{"lin_api_", "linear_api_key", IsAlnum, 40, kAny},
    TokenFormat{"glc_", "grafana_token", IsBase64Char, 32, kAny},
    TokenFormat{"SG.", "sendgrid_api_key", IsWordChar, 22, 22},  // then ".", 43 more (below)
};

// A token starts here: the character before (if any) is not part of a token.
bool AtTokenStart(std::string_view text, size_t at) {
  if (at == 0) return true;
  const char before = text[at - 1];
  return !IsWordChar(before) && before != '.' && before != '+';
}

// A token ends here: the next character (if any) does not continue it.
bool AtTokenEnd(std::string_view text, size_t at) {
  return at >= text.size() || !IsWordChar(text[at]);
}

// A body needs letters and digits both when it is long: a real key is random, a word or a
// number is not ("sk-" + an English phrase, "key-" + 32 digits).
bool LooksRandom(std::string_view body) {
  bool digit = false, lower = false, upper = false;
  for (char c : body) {
    digit = digit || IsDigit(c);
    lower = lower || (c >= 'a' && c <= 'z');
    upper = upper || (c >= 'A' && c <= 'Z');
  }
  return digit && (lower || upper);
}

// SendGrid: SG.<22>.<43>.
std::optional<size_t> SendGridEnd(std::string_view text, size_t body_end) {
  if (body_end >= text.size() || text[body_end] != '.') return std::nullopt;
  const size_t end = RunEnd(text, body_end + 1, IsWordChar);
  if (end - body_end - 1 != 43) return std::nullopt;
  return end;
}

// The formats by the first character of their prefix, so a token is compared with a few.
const std::array<std::vector<const TokenFormat*>, 256>& FormatsByFirstChar() {
  static const auto table = [] {
    std::array<std::vector<const TokenFormat*>, 256> t;
    for (const TokenFormat& f : kTokenFormats) {
      t[static_cast<unsigned char>(f.prefix.front())].push_back(&f);
    }
    return t;
  }();
  return table;
}

std::optional<SecretMatch> MatchTokenFormat(std::string_view text, size_t at) {
  for (const TokenFormat* format : FormatsByFirstChar()[static_cast<unsigned char>(text[at])]) {
    const TokenFormat& f = *format;
    if (!StartsWith(text, at, f.prefix)) continue;
    const size_t body_begin = at + f.prefix.size();
    size_t end = RunEnd(text, body_begin, f.body);
    const size_t body = end - body_begin;
    if (body < f.min_body || (f.max_body != kAny && body > f.max_body)) continue;
    if (f.kind == "sendgrid_api_key") {
      auto full = SendGridEnd(text, end);
      if (!full) continue;
      end = *full;
    } else if (!AtTokenEnd(text, end) && f.body != IsWordChar) {
      continue;  // a longer word that merely starts like a key
    }
    if (f.body != IsLowerHex && f.body != IsHex && f.body != IsUpperAlnum &&
        !LooksRandom(text.substr(body_begin, end - body_begin))) {
      continue;
    }
    return SecretMatch{at, end, f.kind};
  }
  return std::nullopt;
}

// Discord bot token: [MNO] + 23..27 alnum, ".", 6 word chars, ".", 27+ word chars.
std::optional<SecretMatch> MatchDiscordToken(std::string_view text, size_t at) {
  const char c = text[at];
  if (c != 'M' && c != 'N' && c != 'O') return std::nullopt;
  const size_t first = RunEnd(text, at + 1, IsAlnum);
  if (first - at - 1 < 23 || first - at - 1 > 27 || first >= text.size() || text[first] != '.') {
    return std::nullopt;
  }
  const size_t second = RunEnd(text, first + 1, IsWordChar);
  if (second - first - 1 != 6 || second >= text.size() || text[second] != '.') {
    return std::nullopt;
  }
  const size_t third = RunEnd(text, second + 1, IsWordChar);
  if (third - second - 1 < 27) return std::nullopt;
  return SecretMatch{at, third, "discord_token"};
}

// JWT: three base64url segments, the first two starting "eyJ" (a JSON object).
std::optional<SecretMatch> MatchJwt(std::string_view text, size_t at) {
  if (!StartsWith(text, at, "eyJ")) return std::nullopt;
  const size_t header = RunEnd(text, at, IsWordChar);
  if (header - at < 10 || header >= text.size() || text[header] != '.') return std::nullopt;
  if (!StartsWith(text, header + 1, "eyJ")) return std::nullopt;
  const size_t payload = RunEnd(text, header + 1, IsWordChar);
  if (payload - header - 1 < 10 || payload >= text.size() || text[payload] != '.') {
    return std::nullopt;
  }
  const size_t signature = RunEnd(text, payload + 1, IsWordChar);
  if (signature - payload - 1 < 16) return std::nullopt;
  return SecretMatch{at, signature, "jwt"};
}

// Slack and Discord webhook URLs: the whole URL is the credential.
std::optional<SecretMatch> MatchWebhook(std::string_view text, size_t at) {
  constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kWebhooks = {{
      {"https://hooks.slack.com/services/", "slack_webhook"},
      {"https://hooks.slack.com/workflows/", "slack_webhook"},
      {"https://discord.com/api/webhooks/", "discord_webhook"},
      {"https://discordapp.com/api/webhooks/", "discord_webhook"},
  }};
  for (const auto& [prefix, kind] : kWebhooks) {
    if (!StartsWith(text, at, prefix)) continue;
    const size_t end =
        RunEnd(text, at + prefix.size(), [](char c) { return IsWordChar(c) || c == '/'; });
    if (end - at - prefix.size() < 20) continue;
    return SecretMatch{at, end, kind};
  }
  return std::nullopt;
}

void FindTokens(std::string_view text, const FilterRules& rules, std::vector<SecretMatch>& out) {
  for (size_t at = 0; at < text.size();) {
    if (!AtTokenStart(text, at) || !IsAlnum(text[at])) {
      ++at;
      continue;
    }
    std::optional<SecretMatch> m;
    if (text[at] == 'h') m = MatchWebhook(text, at);
    if (!m) m = MatchTokenFormat(text, at);
    if (!m && text[at] == 'e') m = MatchJwt(text, at);
    if (!m && (text[at] == 'M' || text[at] == 'N' || text[at] == 'O')) {
      m = MatchDiscordToken(text, at);
    }
    if (!m) {
      for (const std::string& prefix : rules.extra_prefixes) {
        if (prefix.empty() || !StartsWith(text, at, prefix)) continue;
        const size_t end =
            RunEnd(text, at + prefix.size(), [](char c) { return IsWordChar(c) || c == '.'; });
        if (end - at - prefix.size() >= 8) m = SecretMatch{at, end, "custom"};
        break;
      }
    }
    if (m) {
      out.push_back(*m);
      at = m->end;
    } else {
      at = RunEnd(text, at, IsWordChar);  // skip the rest of this token
      if (at < text.size() && !IsWordChar(text[at])) ++at;
    }
  }
}

// ---- 2. Private key blocks ------------------------------------------------------------------

void FindPrivateKeys(std::string_view text, std::vector<SecretMatch>& out) {
  size_t at = 0;
  while ((at = text.find("-----BEGIN ", at)) != std::string_view::npos) {
    const size_t label_end = text.find("-----", at + 11);
    if (label_end == std::string_view::npos || label_end - at > 80) {
      at += 11;
      continue;
    }
    const std::string_view label = text.substr(at + 11, label_end - at - 11);
    if (label.find("PRIVATE KEY") == std::string_view::npos) {
      at = label_end;
      continue;
    }
    size_t end = text.find("-----END ", label_end + 5);
    if (end != std::string_view::npos) {
      const size_t close = text.find("-----", end + 9);
      end = close == std::string_view::npos ? text.size() : close + 5;
    } else {
      // Cut off: the key's base64 (and escaped newlines) up to where it stops.
      end = RunEnd(text, label_end + 5, [](char c) {
        return IsBase64Char(c) || c == '\n' || c == '\r' || c == '\\' || c == ' ';
      });
    }
    out.push_back(SecretMatch{at, end, "private_key"});
    at = end;
  }
}

// ---- 3. Passwords in URLs -------------------------------------------------------------------

void FindUrlPasswords(std::string_view text, std::vector<SecretMatch>& out) {
  size_t at = 0;
  while ((at = text.find("://", at)) != std::string_view::npos) {
    size_t scheme = at;
    while (scheme > 0 && (IsAlnum(text[scheme - 1]) || text[scheme - 1] == '+' ||
                          text[scheme - 1] == '.' || text[scheme - 1] == '-')) {
      --scheme;
    }
    const size_t user = at + 3;
    at = user;
    if (scheme == at - 3) continue;
    // userinfo: up to '@', before any '/', '?', '#' or blank.
    size_t i = user;
    size_t colon = std::string_view::npos;
    while (i < text.size() && text[i] != '@' && text[i] != '/' && text[i] != '?' &&
           text[i] != '#' && !IsBlank(text[i]) && text[i] != '\n' && text[i] != '"' &&
           text[i] != '\'' && i - user < 512) {
      if (text[i] == ':' && colon == std::string_view::npos) colon = i;
      ++i;
    }
    if (i >= text.size() || text[i] != '@' || colon == std::string_view::npos || i == colon + 1) {
      continue;
    }
    out.push_back(SecretMatch{colon + 1, i, "url_password"});
    at = i;
  }
}

// ---- 4. Authorization headers ---------------------------------------------------------------

// A credential after "Bearer " or "Basic ": a run of token68 characters.
size_t CredentialEnd(std::string_view text, size_t at) {
  return RunEnd(text, at, [](char c) {
    return IsAlnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' ||
           c == '=';
  });
}

void FindAuthorization(std::string_view text, std::vector<SecretMatch>& out) {
  for (size_t at = 0; at < text.size(); ++at) {
    const char c = Lower(text[at]);
    if (c != 'b' && c != 't') continue;
    size_t after = 0;
    if (StartsWithNoCase(text, at, "bearer ")) {
      after = at + 7;
    } else if (StartsWithNoCase(text, at, "basic ") || StartsWithNoCase(text, at, "token ")) {
      after = at + 6;
    } else {
      continue;
    }
    if (at > 0 && IsAlnum(text[at - 1])) continue;
    // "Authorization:" before it (within a few characters), or a long random credential.
    const size_t look = at >= 24 ? at - 24 : 0;
    bool header = false;
    for (size_t i = look; i + 13 <= at && !header; ++i) {
      header = StartsWithNoCase(text, i, "authorization");
    }
    while (after < text.size() && IsBlank(text[after])) ++after;
    const size_t end = CredentialEnd(text, after);
    const std::string_view credential = text.substr(after, end - after);
    const bool bearer = Lower(text[at]) == 'b' && Lower(text[at + 1]) == 'e';
    if (credential.empty() ||
        (!header && !(bearer && credential.size() >= 20 && LooksRandom(credential)))) {
      continue;
    }
    if (header && credential.size() < 4) continue;
    out.push_back(SecretMatch{after, end, "authorization_header"});
    at = end;
  }
}

// ---- 5. Assignments to key-like names -------------------------------------------------------

// What a name says its value is.
//   kPassword: any literal value is one; kSecret: a random value (hex included) is one;
//   kKeyish (a plain "key"): a random value with letters and digits is one.
enum class NameKind { kNone, kPassword, kSecret, kKeyish, kAwsSecret };

NameKind ClassifyName(std::string_view name) {
  std::array<char, 64> buffer{};
  const size_t n = std::min(name.size(), buffer.size());
  for (size_t i = 0; i < n; ++i) buffer[i] = Lower(name[i]);
  const std::string_view lower(buffer.data(), n);
  auto has = [&](std::string_view part) { return lower.find(part) != std::string_view::npos; };
  // Every key-like name holds one of these: most names hold none and are done here.
  if (!has("pass") && !has("pwd") && !has("secret") && !has("token") && !has("key") &&
      !has("auth") && !has("cred") && !has("webhook")) {
    return NameKind::kNone;
  }
  // Names of values that are not secret though they look random.
  for (std::string_view not_secret :
       {"public", "publishable", "hash",    "sha",   "etag",      "checksum",    "digest", "cache",
        "commit", "primary",     "foreign", "sort",  "partition", "idempotency", "_id",    "-id",
        "uuid",   "expir",       "length",  "_len",  "ttl",       "timeout",     "policy", "reset",
        "count",  "hint",        "field",   "label", "prompt"}) {
    if (has(not_secret)) return NameKind::kNone;
  }
  if (has("aws") && has("secret")) return NameKind::kAwsSecret;
  if (has("password") || has("passwd") || has("passphrase") || lower == "pwd" || lower == "pass" ||
      has("_pwd") || has("_pass")) {
    return NameKind::kPassword;
  }
  if (has("secret") || has("token") || has("api_key") || has("apikey") || has("api-key") ||
      has("access_key") || has("accesskey") || has("private_key") || has("auth") ||
      has("credential") || has("signing_key") || has("encryption_key") || has("client_key") ||
      has("webhook")) {
    return NameKind::kSecret;
  }
  if (lower == "key" || has("_key") || has("-key") || has(".key")) return NameKind::kKeyish;
  return NameKind::kNone;
}

// Values that name or compute a secret rather than hold one.
bool IsReference(std::string_view v) {
  if (v.empty()) return true;
  if (v.front() == '$' || v.front() == '<' || v.front() == '{' || v.front() == '%' ||
      v.front() == '[' || v.front() == '(') {
    return true;
  }
  static constexpr std::array<std::string_view, 14> kWords = {
      "null",   "none", "nil",  "true",     "false",    "undefined", "str",
      "string", "int",  "bool", "required", "optional", "secret",    "password"};
  std::string lower(v);
  std::transform(lower.begin(), lower.end(), lower.begin(), Lower);
  if (std::find(kWords.begin(), kWords.end(), lower) != kWords.end()) return true;
  if (std::all_of(v.begin(), v.end(), [](char c) {
        return c == '*' || c == 'x' || c == 'X' || c == '.' || c == '-';
      })) {
    return true;
  }
  // An expression: a call, a member access or an environment lookup.
  return v.find('(') != std::string_view::npos || v.find('[') != std::string_view::npos ||
         lower.rfind("process.env", 0) == 0 || lower.rfind("os.environ", 0) == 0 ||
         lower.rfind("env.", 0) == 0 || lower.rfind("self.", 0) == 0 ||
         lower.rfind("this.", 0) == 0 || lower.rfind("config.", 0) == 0 ||
         lower.rfind("settings.", 0) == 0;
}

// Shannon entropy of `v` in bits per character.
double Entropy(std::string_view v) {
  std::array<int, 256> counts{};
  for (char c : v) ++counts[static_cast<unsigned char>(c)];
  double bits = 0;
  for (int n : counts) {
    if (n == 0) continue;
    const double p = static_cast<double>(n) / static_cast<double>(v.size());
    bits -= p * std::log2(p);
  }
  return bits;
}

// A value under a secret-like name that is random enough to be a key (a hex string of 24
// digits or more too, when `hex_counts`).
bool LooksLikeKey(std::string_view v, bool hex_counts) {
  if (v.size() < 16 || v.find(' ') != std::string_view::npos) return false;
  const bool hex = std::all_of(v.begin(), v.end(), IsHex);
  if (hex) return hex_counts && v.size() >= 24;
  return Entropy(v) >= 3.2 && LooksRandom(v);
}

// [A-Za-z_][A-Za-z0-9_]* (with '.' between such parts when `dotted`).
bool IsIdentifier(std::string_view v, bool dotted) {
  if (v.empty()) return false;
  bool start = true;
  for (char c : v) {
    if (start && !(IsAlpha(c) || c == '_')) return false;
    if (c == '.' && dotted) {
      start = true;
      continue;
    }
    if (!(IsAlnum(c) || c == '_')) return false;
    start = false;
  }
  return !start;
}

struct Value {
  size_t begin;
  size_t end;
};

// The value after a separator at `at` (=, :, =>, :=), quoted or bare.
std::optional<Value> ValueAfter(std::string_view text, size_t at) {
  size_t i = at;
  while (i < text.size() && IsBlank(text[i])) ++i;
  if (i < text.size() && (text[i] == '"' || text[i] == '\'' || text[i] == '`')) {
    const char quote = text[i];
    size_t end = i + 1;
    while (end < text.size() && text[end] != quote && text[end] != '\n' && end - i < 4096) {
      end += text[end] == '\\' && end + 1 < text.size() ? size_t{2} : size_t{1};
    }
    if (end >= text.size() || text[end] != quote) return std::nullopt;
    return Value{i + 1, end};
  }
  size_t end = i;
  while (end < text.size() && !IsBlank(text[end]) && text[end] != '\n' && text[end] != '\r' &&
         text[end] != ',' && text[end] != ';' && text[end] != '}' && text[end] != ')' &&
         text[end] != '"' && text[end] != '\'' && end - i < 4096) {
    ++end;
  }
  return Value{i, end};
}

// The separator after a name ending at `at`: the position after it, or npos.
size_t SeparatorEnd(std::string_view text, size_t at) {
  size_t i = at;
  if (i < text.size() && (text[i] == '"' || text[i] == '\'')) ++i;  // a quoted name's end
  while (i < text.size() && IsBlank(text[i])) ++i;
  if (StartsWith(text, i, ":=") || StartsWith(text, i, "=>")) return i + 2;
  if (i < text.size() && (text[i] == '=' || text[i] == ':')) {
    if (StartsWith(text, i, "==") || StartsWith(text, i, "::")) return std::string_view::npos;
    return i + 1;
  }
  return std::string_view::npos;
}

void FindAssignments(std::string_view text, std::vector<SecretMatch>& out) {
  auto is_name_char = [](char c) { return IsWordChar(c) || c == '.'; };
  for (size_t at = 0; at < text.size();) {
    if (!is_name_char(text[at]) || IsDigit(text[at]) || (at > 0 && is_name_char(text[at - 1]))) {
      ++at;
      continue;
    }
    const size_t name_end = RunEnd(text, at, is_name_char);
    const std::string_view name = text.substr(at, name_end - at);
    at = name_end;
    const size_t sep = SeparatorEnd(text, name_end);  // most words have none: looked at first
    if (sep == std::string_view::npos || name.size() > 64) continue;
    const NameKind kind = ClassifyName(name);
    if (kind == NameKind::kNone) continue;
    auto value = ValueAfter(text, sep);
    if (!value) continue;
    const std::string_view v = text.substr(value->begin, value->end - value->begin);
    if (IsReference(v) || v.rfind("[REDACTED:", 0) == 0) continue;
    const bool quoted =
        value->begin > 0 && (text[value->begin - 1] == '"' || text[value->begin - 1] == '\'' ||
                             text[value->begin - 1] == '`');
    // In code a bare name or member is a variable ("password = new_password",
    // "token: self.token"); in an env file or shell (NAME=value, no blank) it is the value, and
    // after a colon (YAML, an object literal) it is the value when it has a digit.
    const bool spaced = value->begin > name_end + 1;
    const bool colon = text[sep - 1] == ':';
    const bool has_digit = std::any_of(v.begin(), v.end(), IsDigit);
    if (!quoted && IsIdentifier(v, true) && !LooksLikeKey(v, false) &&
        (v.find('.') != std::string_view::npos || (spaced && !(colon && has_digit)))) {
      continue;
    }
    // A bare number under a password-like name is a setting (a length, a lifetime).
    if (!quoted && std::all_of(v.begin(), v.end(), IsDigit)) continue;
    std::string_view label;
    if (kind == NameKind::kPassword && v.size() >= 3) {
      label = "password_assignment";
    } else if (kind == NameKind::kAwsSecret && v.size() == 40 &&
               std::all_of(v.begin(), v.end(), IsBase64Char)) {
      label = "aws_secret_access_key";
    } else if (kind != NameKind::kPassword &&
               LooksLikeKey(v, kind == NameKind::kSecret || kind == NameKind::kAwsSecret)) {
      label = "generic_secret";
    } else {
      continue;
    }
    out.push_back(SecretMatch{value->begin, value->end, label});
    at = value->end;
  }
}

// Connection-string fields whose value is a key: AccountKey=..., SharedAccessKey=...,
// SharedAccessSignature=..., and a SAS URL's sig=....
void FindConnectionStringKeys(std::string_view text, std::vector<SecretMatch>& out) {
  constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kFields = {{
      {"AccountKey=", "azure_storage_key"},
      {"SharedAccessKey=", "azure_storage_key"},
      {"SharedAccessSignature=", "azure_sas_token"},
      {"sig=", "azure_sas_token"},
  }};
  for (const auto& [field, kind] : kFields) {
    size_t at = 0;
    while ((at = text.find(field, at)) != std::string_view::npos) {
      const size_t begin = at + field.size();
      at = begin;
      const size_t end = RunEnd(
          text, begin, [](char c) { return IsBase64Char(c) || c == '%' || c == '-' || c == '_'; });
      // A refused run holds no other field of this kind worth a look (inside it, the field
      // would follow a run character): the search goes on after it.
      at = std::max(at, end);
      if (end - begin < 20) continue;
      if (field == "sig=" && begin >= field.size() + 1 && text[begin - field.size() - 1] != '&' &&
          text[begin - field.size() - 1] != '?' && text[begin - field.size() - 1] != ';') {
        continue;
      }
      out.push_back(SecretMatch{begin, end, kind});
      at = end;
    }
  }
}

// ---- Merging --------------------------------------------------------------------------------

// Lower is stronger: a specific format beats a generic rule over the same characters.
int Priority(std::string_view kind) {
  if (kind == "private_key") return 0;
  if (kind == "generic_secret" || kind == "password_assignment") return 4;
  if (kind == "authorization_header") return 3;
  if (kind == "url_password") return 2;
  return 1;
}

// Spans of existing "[REDACTED:...]" markers: nothing inside one is matched again.
std::vector<std::pair<size_t, size_t>> RedactedSpans(std::string_view text) {
  std::vector<std::pair<size_t, size_t>> spans;
  size_t at = 0;
  while ((at = text.find("[REDACTED:", at)) != std::string_view::npos) {
    const size_t close = text.find(']', at);
    if (close == std::string_view::npos) break;
    spans.emplace_back(at, close + 1);
    at = close + 1;
  }
  return spans;
}

bool Allowed(std::string_view text, const SecretMatch& m, const FilterRules& rules) {
  const std::string_view found = text.substr(m.begin, m.end - m.begin);
  return std::any_of(rules.allow.begin(), rules.allow.end(),
                     [&](const std::string& a) { return a == found; });
}

std::vector<SecretMatch> Merge(std::string_view text, std::vector<SecretMatch> found,
                               const FilterRules& rules) {
  std::stable_sort(found.begin(), found.end(), [](const SecretMatch& a, const SecretMatch& b) {
    const int pa = Priority(a.kind), pb = Priority(b.kind);
    return pa != pb ? pa < pb : a.begin < b.begin;
  });
  std::map<size_t, size_t> taken;  // begin -> end, not overlapping
  for (const auto& [b, e] : RedactedSpans(text)) taken.emplace(b, e);
  auto overlaps = [&](size_t b, size_t e) {
    auto it = taken.lower_bound(b);
    if (it != taken.end() && it->first < e) return true;
    if (it != taken.begin() && std::prev(it)->second > b) return true;
    return false;
  };
  std::vector<SecretMatch> out;
  for (const SecretMatch& m : found) {
    if (m.end <= m.begin || overlaps(m.begin, m.end) || Allowed(text, m, rules)) continue;
    taken.emplace(m.begin, m.end);
    out.push_back(m);
  }
  std::sort(out.begin(), out.end(),
            [](const SecretMatch& a, const SecretMatch& b) { return a.begin < b.begin; });
  return out;
}

}  // namespace

std::vector<SecretMatch> FindSecrets(std::string_view text, const FilterRules& rules) {
  std::vector<SecretMatch> found;
  FindPrivateKeys(text, found);
  FindTokens(text, rules, found);
  FindUrlPasswords(text, found);
  FindConnectionStringKeys(text, found);
  FindAuthorization(text, found);
  FindAssignments(text, found);
  return Merge(text, std::move(found), rules);
}

const std::vector<std::string_view>& SecretKinds() {
  static const std::vector<std::string_view> kinds = [] {
    std::vector<std::string_view> out;
    for (const TokenFormat& f : kTokenFormats) {
      if (std::find(out.begin(), out.end(), f.kind) == out.end()) out.push_back(f.kind);
    }
    for (std::string_view k :
         {"discord_token", "jwt", "slack_webhook", "discord_webhook", "private_key", "url_password",
          "authorization_header", "password_assignment", "aws_secret_access_key", "generic_secret",
          "azure_storage_key", "azure_sas_token", "custom"}) {
      out.push_back(k);
    }
    return out;
  }();
  return kinds;
}

}  // namespace tmcra::filter
