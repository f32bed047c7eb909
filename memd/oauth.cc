#include "memd/oauth.h"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "base/clock.h"
#include "base/sha256.h"
#include "base/utf8.h"
#include "memd/mcp_session.h"
#include "memd/server_rules.h"
#include "src/config/url.h"

namespace tmcra::memd {

namespace {

using json = nlohmann::json;

constexpr const char* kAccessPrefix = "tmcra_oat_";
constexpr const char* kRefreshPrefix = "tmcra_ort_";
constexpr double kCodeSeconds = 60;
constexpr double kUnusedClientSeconds = 24 * 3600;
constexpr double kUsedClientSeconds = 90 * 24 * 3600;
constexpr size_t kMaxRedirectUris = 10;
constexpr size_t kMaxUriBytes = 2000;
constexpr int kRegistrationsPerAddress = 20;  // an hour, per peer address
// A refresh token used again this soon after its rotation is refused without revoking the grant.
constexpr double kRefreshReuseGrace = 10;
const std::set<std::string>& Permissions() {
  static const std::set<std::string> p{kPermRead, kPermWrite, kPermFeedback};
  return p;
}

// base64url without padding of the SHA-256 of `text`: PKCE's S256 challenge.
std::string S256(std::string_view text) {
  unsigned char digest[32];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  for (unsigned int i = 0; i < length; i += 3) {
    const auto byte = [&](unsigned int k) { return k < length ? unsigned{digest[k]} : 0u; };
    const unsigned int n = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out.push_back(kB64[(n >> 18) & 63]);
    out.push_back(kB64[(n >> 12) & 63]);
    if (i + 1 < length) out.push_back(kB64[(n >> 6) & 63]);
    if (i + 2 < length) out.push_back(kB64[n & 63]);
  }
  return out;
}

// The fields of an application/x-www-form-urlencoded body (or a query string).
class Form {
 public:
  explicit Form(std::string_view encoded) { req_.target = "/?" + std::string(encoded); }
  std::string Get(std::string_view name) const { return req_.Query(name).value_or(""); }
  bool Has(std::string_view name) const { return req_.Query(name).has_value(); }

 private:
  HttpRequest req_;
};

HttpResponse JsonReply(int status, const json& body) {
  HttpResponse res;
  res.status = status;
  res.Set("Content-Type", "application/json");
  res.Set("Cache-Control", "no-store");
  res.body = body.dump();
  return res;
}

HttpResponse OAuthError(int status, const std::string& error, const std::string& description) {
  return JsonReply(status, json{{"error", error}, {"error_description", description}});
}

HttpResponse Redirect(const std::string& location) {
  HttpResponse res;
  res.status = 302;
  res.Set("Location", location);
  res.Set("Cache-Control", "no-store");
  return res;
}

// The scopes a request names, split at blanks.
std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = std::min(text.find(' ', i), text.size());
    if (end > i) out.emplace_back(text.substr(i, end - i));
    i = end + 1;
  }
  return out;
}

// What a grant allows: permissions and memory scopes (empty: every scope of the key).
struct Grant {
  std::vector<std::string> permissions;
  std::vector<std::string> scope_names;

  std::string ScopeText() const {
    std::string out;
    for (const auto& p : permissions) out += (out.empty() ? "" : " ") + p;
    for (const auto& s : scope_names) out += (out.empty() ? "" : " ") + ("scope:" + s);
    return out;
  }
  json ToJson() const { return json{{"permissions", permissions}, {"scope_names", scope_names}}; }
  static Grant FromJson(const json& j) {
    return Grant{j.value("permissions", std::vector<std::string>()),
                 j.value("scope_names", std::vector<std::string>())};
  }
};

// The grant of `requested` (OAuth scope text) within what `key` holds: asked-for permissions it
// has (none asked: all it has of read, write, feedback), and asked-for memory scopes it may use.
// std::nullopt when a named memory scope is not the key's, or nothing is left.
std::optional<Grant> GrantFor(const std::string& requested, const ApiKey& key) {
  Grant grant;
  bool asked_permission = false;
  for (const auto& word : Words(requested)) {
    if (word.rfind("scope:", 0) == 0) {
      const std::string scope = word.substr(6);
      if (!IsValidScope(scope) || !key.AllowsScope(scope)) return std::nullopt;
      grant.scope_names.push_back(scope);
    } else if (Permissions().count(word) != 0) {
      asked_permission = true;
      if (key.Has(word)) grant.permissions.push_back(word);
    } else {
      return std::nullopt;  // a scope we do not know is not silently dropped
    }
  }
  if (!asked_permission) {
    for (const auto& p : Permissions()) {
      if (key.Has(p)) grant.permissions.push_back(p);
    }
  }
  if (grant.permissions.empty()) return std::nullopt;
  return grant;
}

// A redirect URI a client may register: https, http to a loopback host, or a private-use scheme
// (with a dot, as RFC 8252 asks); never a fragment.
bool AcceptableRedirect(const std::string& uri) {
  if (uri.empty() || uri.size() > kMaxUriBytes || uri.find('#') != std::string::npos) return false;
  if (uri.find('@') != std::string::npos || !isalpha(static_cast<unsigned char>(uri[0]))) {
    return false;  // no userinfo ("http://localhost:1@evil/"); a scheme starts with a letter
  }
  for (char c : uri) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return false;
  }
  if (uri.rfind("https://", 0) == 0) return uri.size() > 8;
  for (const char* loopback : {"http://127.0.0.1", "http://localhost", "http://[::1]"}) {
    const std::string prefix = loopback;
    if (uri.rfind(prefix, 0) == 0 &&
        (uri.size() == prefix.size() || uri[prefix.size()] == ':' || uri[prefix.size()] == '/')) {
      return true;
    }
  }
  const size_t colon = uri.find(':');
  return colon != std::string::npos && uri.substr(0, colon).find('.') != std::string::npos;
}

// What a scope request asks for, in words, for the consent page.
std::string ScopeSummary(const std::string& scope) {
  std::string permissions, scopes;
  for (const auto& word : Words(scope)) {
    std::string& into = word.rfind("scope:", 0) == 0 ? scopes : permissions;
    into += (into.empty() ? "" : ", ") + (word.rfind("scope:", 0) == 0 ? word.substr(6) : word);
  }
  return (permissions.empty() ? "every permission of your key" : permissions) +
         (scopes.empty() ? ", in every memory scope your key may use"
                         : ", in memory scopes " + scopes);
}

// RFC 7636's characters of a code verifier or challenge.
bool PkceText(std::string_view text) {
  return text.size() >= 43 && text.size() <= 128 &&
         text.find_first_not_of(
             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") ==
             std::string_view::npos;
}

// A requested redirect URI the client registered: the same text, or, for a loopback http URI,
// the same but for the port (RFC 8252 section 7.3: native apps listen on a port of the moment).
bool RegisteredRedirect(const json& registered, const std::string& requested) {
  const auto without_port = [](const std::string& uri) -> std::optional<std::string> {
    for (const char* host : {"http://127.0.0.1", "http://[::1]", "http://localhost"}) {
      const std::string prefix = host;
      if (uri.rfind(prefix + ":", 0) != 0) continue;
      const size_t path = uri.find('/', prefix.size());
      return prefix + (path == std::string::npos ? "" : uri.substr(path));
    }
    return std::nullopt;
  };
  for (const auto& uri : registered) {
    if (!uri.is_string()) continue;
    const std::string text = uri.get<std::string>();
    if (text == requested) return true;
    const auto a = without_port(text), b = without_port(requested);
    if (a && b && *a == *b) return true;
  }
  return false;
}

}  // namespace

struct OAuthServer::Impl {
  OAuthOptions options;
  KeyStore& keys;
  std::string secret;
  Impl(OAuthOptions o, KeyStore& k, std::string s)
      : options(std::move(o)), keys(k), secret(std::move(s)) {}

  // Registrations per peer address in the current hour (this memd's; the store counts all).
  std::mutex registrations_mu;
  std::map<std::string, std::pair<double, int>> registrations;  // address -> (hour, count)

  // True while `address` has registered fewer than kRegistrationsPerAddress clients this hour.
  bool MayRegister(const std::string& address);

  std::string Url(const char* path) const { return options.issuer + path; }

  HttpResponse ResourceMetadata() const;
  HttpResponse ServerMetadata() const;
  HttpResponse Register(const HttpRequest& req);
  HttpResponse AuthorizePage(const HttpRequest& req);
  HttpResponse AuthorizeAnswer(const HttpRequest& req);
  HttpResponse Token(const HttpRequest& req);
  HttpResponse Revoke(const HttpRequest& req);

  // The authorization request's parameters checked: the client, its redirect URI, PKCE, the
  // resource. `fatal` is set for a client or redirect URI that is not to be trusted (an error
  // page, never a redirect); else an error to redirect with.
  struct AuthRequest {
    std::string client_id, redirect_uri, state, challenge, scope, client_name;
  };
  std::optional<std::string> CheckAuthorize(const Form& form, AuthRequest& out, bool& fatal);
  std::string Signature(const AuthRequest& r) const {
    return HmacSha256Hex(secret, r.client_id + "\n" + r.redirect_uri + "\n" + r.state + "\n" +
                                     r.challenge + "\n" + r.scope);
  }
  HttpResponse ConsentPage(const AuthRequest& r, const std::string& problem, int status) const;
  std::string Back(const AuthRequest& r, const std::string& params) const;
  HttpResponse IssueCode(const AuthRequest& r, const ApiKey& key, const Grant& grant);
  HttpResponse CodeGrant(const Form& form);
  HttpResponse RefreshGrant(const Form& form);
  HttpResponse IssueTokens(const std::string& client_id, const std::string& key_id,
                           const Grant& grant, const std::string& family);
  void TouchClient(const std::string& client_id);
  // The mark a used code or refresh token leaves (`used_kind`), naming its grant and when it was
  // used; kept `seconds`. It is not of the grant's family, so revoking the grant keeps it.
  void MarkUsed(const char* used_kind, const std::string& id, const std::string& family,
                double seconds);
  // A code or refresh token that is gone was used before: if its mark is older than
  // `grace_seconds`, the grant it named is revoked.
  void RevokeIfReused(const char* used_kind, const std::string& id, double grace_seconds);
};

OAuthServer::OAuthServer(OAuthOptions options, KeyStore& keys, std::string secret)
    : impl_(std::make_shared<Impl>(std::move(options), keys, std::move(secret))) {}

std::string OAuthServer::resource() const { return impl_->options.issuer + "/mcp"; }

std::string OAuthServer::Challenge(bool invalid_token) const {
  std::string out = "Bearer resource_metadata=\"" +
                    impl_->Url("/.well-known/oauth-protected-resource/mcp") + "\"";
  if (invalid_token) out += ", error=\"invalid_token\"";
  return out;
}

bool OAuthServer::IsAccessToken(std::string_view token) {
  return token.rfind(kAccessPrefix, 0) == 0;
}

std::optional<HttpResponse> OAuthServer::Handle(const HttpRequest& req) {
  const std::string path = req.target.substr(0, req.target.find('?'));
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  auto only = [&](bool ok, const char* allow, auto answer) -> std::optional<HttpResponse> {
    if (ok) return answer();
    HttpResponse res = OAuthError(405, "invalid_request", "method not allowed");
    res.Set("Allow", allow);
    return res;
  };
  if (path == "/.well-known/oauth-protected-resource" ||
      path == "/.well-known/oauth-protected-resource/mcp") {
    return only(get, "GET", [&] { return impl_->ResourceMetadata(); });
  }
  if (path == "/.well-known/oauth-authorization-server") {
    return only(get, "GET", [&] { return impl_->ServerMetadata(); });
  }
  if (path == "/register") return only(post, "POST", [&] { return impl_->Register(req); });
  if (path == "/authorize") {
    return only(get || post, "GET, POST",
                [&] { return post ? impl_->AuthorizeAnswer(req) : impl_->AuthorizePage(req); });
  }
  if (path == "/token") return only(post, "POST", [&] { return impl_->Token(req); });
  if (path == "/revoke") return only(post, "POST", [&] { return impl_->Revoke(req); });
  return std::nullopt;
}

HttpResponse OAuthServer::Impl::ResourceMetadata() const {
  return JsonReply(200, json{{"resource", options.issuer + "/mcp"},
                             {"authorization_servers", {options.issuer}},
                             {"bearer_methods_supported", {"header"}},
                             {"scopes_supported", {kPermRead, kPermWrite, kPermFeedback}},
                             {"resource_name", "tmcra-memd"}});
}

HttpResponse OAuthServer::Impl::ServerMetadata() const {
  return JsonReply(200, json{{"issuer", options.issuer},
                             {"authorization_endpoint", Url("/authorize")},
                             {"token_endpoint", Url("/token")},
                             {"registration_endpoint", Url("/register")},
                             {"revocation_endpoint", Url("/revoke")},
                             {"response_types_supported", {"code"}},
                             {"grant_types_supported", {"authorization_code", "refresh_token"}},
                             {"code_challenge_methods_supported", {"S256"}},
                             {"token_endpoint_auth_methods_supported", {"none"}},
                             {"revocation_endpoint_auth_methods_supported", {"none"}},
                             {"scopes_supported", {kPermRead, kPermWrite, kPermFeedback}},
                             {"authorization_response_iss_parameter_supported", true},
                             {"client_id_metadata_document_supported", false}});
}

HttpResponse OAuthServer::Impl::Register(const HttpRequest& req) {
  auto body = ParseBodyObject(req.body, req.Get("Content-Type"));
  if (!body) return OAuthError(400, "invalid_client_metadata", "the body must be a JSON object");
  const json uris = body->value("redirect_uris", json());
  if (!uris.is_array() || uris.empty() || uris.size() > kMaxRedirectUris) {
    return OAuthError(400, "invalid_redirect_uri", "redirect_uris: 1 to 10 URIs are required");
  }
  for (const auto& uri : uris) {
    if (!uri.is_string() || !AcceptableRedirect(uri.get<std::string>())) {
      return OAuthError(400, "invalid_redirect_uri",
                        "redirect_uris: each must be https, http to a loopback host, or a "
                        "private-use scheme, without a fragment");
    }
  }
  for (const char* field : {"grant_types", "response_types"}) {
    for (const auto& v : body->value(field, json::array())) {
      if (!v.is_string() || (v != "authorization_code" && v != "refresh_token" && v != "code")) {
        return OAuthError(400, "invalid_client_metadata",
                          std::string(field) + ": only authorization_code, refresh_token, code");
      }
    }
  }
  const double now = NowSeconds();
  if (!MayRegister(req.remote_addr)) {
    HttpResponse res = OAuthError(429, "temporarily_unavailable", "too many registrations; retry");
    res.Set("Retry-After", "600");
    return res;
  }
  auto recent = keys.CountRecords("client", now - 3600);
  if (!recent) return OAuthError(503, "temporarily_unavailable", "the store cannot be read");
  if (*recent >= options.registrations_per_hour) {
    HttpResponse res = OAuthError(429, "temporarily_unavailable", "too many registrations; retry");
    res.Set("Retry-After", "60");
    return res;
  }
  (void)keys.DropExpiredRecords();
  std::string name = body->value("client_name", json("")).is_string()
                         ? body->value("client_name", std::string())
                         : std::string();
  if (!IsValidUtf8(name)) name.clear();
  if (name.size() > 200) {
    size_t cut = 200;
    while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
    name.resize(cut);
  }
  const std::string client_id = "mcp_client_" + RandomHex(16);
  const json client{{"client_id", client_id},
                    {"client_id_issued_at", static_cast<int64_t>(now)},
                    {"client_name", name},
                    {"redirect_uris", uris},
                    {"grant_types", {"authorization_code", "refresh_token"}},
                    {"response_types", {"code"}},
                    {"token_endpoint_auth_method", "none"}};
  if (auto s = keys.PutRecord(
          {"client", client_id, client.dump(), client_id, now + kUnusedClientSeconds});
      !s) {
    return OAuthError(503, "temporarily_unavailable", "the store cannot write");
  }
  return JsonReply(201, client);
}

bool OAuthServer::Impl::MayRegister(const std::string& address) {
  const double hour = std::floor(NowSeconds() / 3600);
  std::lock_guard lock(registrations_mu);
  if (registrations.size() > 10000) registrations.clear();  // bounded
  auto& [at, count] = registrations[address];
  if (at != hour) at = hour, count = 0;
  return ++count <= kRegistrationsPerAddress;
}

std::optional<std::string> OAuthServer::Impl::CheckAuthorize(const Form& form, AuthRequest& out,
                                                             bool& fatal) {
  fatal = true;
  out.client_id = form.Get("client_id");
  auto client = keys.GetRecord("client", out.client_id);
  if (!client || !*client) return "unknown client_id";
  const json meta = json::parse((*client)->data, nullptr, false);
  out.client_name = meta.value("client_name", std::string());
  out.redirect_uri = form.Get("redirect_uri");
  if (!RegisteredRedirect(meta.value("redirect_uris", json::array()), out.redirect_uri)) {
    return "redirect_uri is not one the client registered";
  }
  fatal = false;
  out.state = form.Get("state");
  out.challenge = form.Get("code_challenge");
  out.scope = form.Get("scope");
  if (form.Get("response_type") != "code") return "unsupported_response_type";
  if (!PkceText(out.challenge) || form.Get("code_challenge_method") != "S256") {
    return "invalid_request: PKCE with code_challenge_method S256 is required";
  }
  if (form.Has("resource") && form.Get("resource") != options.issuer + "/mcp") {
    return "invalid_target: resource must be " + options.issuer + "/mcp";
  }
  for (const auto& word : Words(out.scope)) {
    if (Permissions().count(word) == 0 &&
        (word.rfind("scope:", 0) != 0 || !IsValidScope(word.substr(6)))) {
      return "invalid_scope: unknown scope " + word;
    }
  }
  return std::nullopt;
}

HttpResponse OAuthServer::Impl::AuthorizePage(const HttpRequest& req) {
  const std::string query =
      req.target.find('?') == std::string::npos ? "" : req.target.substr(req.target.find('?') + 1);
  AuthRequest r;
  bool fatal = false;
  // Any problem is an error page: the server redirects only once the user has answered, so it
  // never sends a browser on to a URI unasked (RFC 9700 section 4.11.2).
  if (auto problem = CheckAuthorize(Form(query), r, fatal)) return ConsentPage(r, *problem, 400);
  return ConsentPage(r, "", 200);
}

// The redirect URI with the answer's parameters: `params` ("code=..."), state when the request
// had one, and iss (RFC 9207).
std::string OAuthServer::Impl::Back(const AuthRequest& r, const std::string& params) const {
  std::string out =
      r.redirect_uri + (r.redirect_uri.find('?') == std::string::npos ? "?" : "&") + params;
  if (!r.state.empty()) out += "&state=" + config::QuoteSegment(r.state);
  return out + "&iss=" + config::QuoteSegment(options.issuer);
}

HttpResponse OAuthServer::Impl::ConsentPage(const AuthRequest& r, const std::string& problem,
                                            int status) const {
  std::string html =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>tmcra-memd: allow access"
      "</title><style>body{font:15px system-ui,sans-serif;max-width:34em;margin:3em auto;"
      "padding:0 1em}code{background:#eee;padding:0 .2em}input{width:100%;padding:.4em;margin:"
      ".3em 0 1em}button{padding:.5em 1.2em;margin-right:1em}.problem{color:#a00}</style>"
      "</head><body><h1>Allow access to team memory?</h1>";
  if (status != 200) {
    return [&] {
      HttpResponse res;
      res.status = status;
      res.Set("Content-Type", "text/html; charset=utf-8");
      res.Set("Cache-Control", "no-store");
      res.body = html +
                 "<p class=\"problem\">This request cannot be answered: " + HtmlEscape(problem) +
                 ".</p></body></html>";
      return res;
    }();
  }
  html += "<p><b>" + HtmlEscape(r.client_name.empty() ? r.client_id : r.client_name) +
          "</b> asks to use this memory server as you, with: <code>" +
          HtmlEscape(ScopeSummary(r.scope)) + "</code>. It will be sent back to <code>" +
          HtmlEscape(r.redirect_uri) + "</code>.</p>";
  if (!problem.empty()) html += "<p class=\"problem\">" + HtmlEscape(problem) + "</p>";
  html += "<form method=\"post\" action=\"/authorize\">";
  for (const auto& [name, value] : {std::pair{"client_id", r.client_id},
                                    {"redirect_uri", r.redirect_uri},
                                    {"state", r.state},
                                    {"code_challenge", r.challenge},
                                    {"scope", r.scope},
                                    {"request_mac", Signature(r)}}) {
    html += "<input type=\"hidden\" name=\"" + std::string(name) + "\" value=\"" +
            HtmlEscape(value) + "\">";
  }
  html +=
      "<label>Your tmcra-memd key (<code>tmcra_…</code>; it is checked, never stored)<input "
      "type=\"password\" name=\"key\" autocomplete=\"off\" required></label>"
      "<button type=\"submit\" name=\"decision\" value=\"allow\">Allow</button>"
      "<button type=\"submit\" name=\"decision\" value=\"deny\" formnovalidate>Deny</button>"
      "</form></body></html>";
  HttpResponse res;
  res.status = 200;
  res.Set("Content-Type", "text/html; charset=utf-8");
  res.Set("Cache-Control", "no-store");
  res.Set("Content-Security-Policy",
          "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'");
  res.Set("X-Frame-Options", "DENY");
  res.Set("Referrer-Policy", "no-referrer");
  res.body = std::move(html);
  return res;
}

HttpResponse OAuthServer::Impl::AuthorizeAnswer(const HttpRequest& req) {
  const Form form(req.body);
  AuthRequest r{form.Get("client_id"),      form.Get("redirect_uri"), form.Get("state"),
                form.Get("code_challenge"), form.Get("scope"),        ""};
  bool fatal = false;
  AuthRequest checked;
  // The form is ours, unchanged: its fields are those the page showed, signed.
  if (CheckAuthorize(form, checked, fatal) && fatal)
    return ConsentPage(checked, "unknown client", 400);
  if (!ConstantTimeEquals(Signature(r), form.Get("request_mac"))) {
    return ConsentPage(r, "the form was changed", 400);
  }
  r.client_name = checked.client_name;
  if (form.Get("decision") != "allow") return Redirect(Back(r, "error=access_denied"));
  auto outcome = keys.Authenticate(form.Get("key"));
  if (!outcome) return ConsentPage(r, "the key store cannot be read; try again", 503);
  if (!outcome->key) {
    spdlog::info("oauth: sign-in refused ({})", LogSafe(outcome->reason));
    return ConsentPage(r, "That key is not valid. Try again.", 200);
  }
  auto grant = GrantFor(r.scope, *outcome->key);
  if (!grant) return Redirect(Back(r, "error=invalid_scope"));
  return IssueCode(r, *outcome->key, *grant);
}

HttpResponse OAuthServer::Impl::IssueCode(const AuthRequest& r, const ApiKey& key,
                                          const Grant& grant) {
  const std::string code = RandomHex(32);
  const std::string family = "grant_" + RandomHex(16);
  const json data{{"client_id", r.client_id},
                  {"redirect_uri", r.redirect_uri},
                  {"challenge", r.challenge},
                  {"key_id", key.key_id},
                  {"grant", grant.ToJson()}};
  if (auto s = keys.PutRecord(
          {"code", Sha256Hex(code), data.dump(), family, NowSeconds() + kCodeSeconds});
      !s) {
    return ConsentPage(r, "the store cannot write; try again", 503);
  }
  spdlog::info("oauth: key {} allowed client {} ({})", LogSafe(key.key_id, 64),
               LogSafe(r.client_id, 64), LogSafe(grant.ScopeText()));
  return Redirect(Back(r, "code=" + code));
}

HttpResponse OAuthServer::Impl::Token(const HttpRequest& req) {
  const Form form(req.body);
  const std::string type = form.Get("grant_type");
  if (type == "authorization_code") return CodeGrant(form);
  if (type == "refresh_token") return RefreshGrant(form);
  return OAuthError(400, "unsupported_grant_type", "authorization_code or refresh_token");
}

HttpResponse OAuthServer::Impl::CodeGrant(const Form& form) {
  (void)keys.DropExpiredRecords();
  const std::string id = Sha256Hex(form.Get("code"));
  auto taken = keys.TakeRecord("code", id);
  if (!taken) return OAuthError(503, "temporarily_unavailable", "the store cannot be read");
  if (!*taken) {
    // A code used before: every token of its grant is revoked (RFC 6749 section 4.1.2).
    RevokeIfReused("used_code", id, 0);
    return OAuthError(400, "invalid_grant", "the code is unknown, expired or already used");
  }
  const ServerRecord& code = **taken;
  MarkUsed("used_code", id, code.family, 600);
  const json data = json::parse(code.data, nullptr, false);
  if (form.Get("client_id") != data.value("client_id", "") ||
      form.Get("redirect_uri") != data.value("redirect_uri", "")) {
    return OAuthError(400, "invalid_grant", "client_id or redirect_uri does not match the code");
  }
  const std::string verifier = form.Get("code_verifier");
  if (!PkceText(verifier) || !ConstantTimeEquals(S256(verifier), data.value("challenge", ""))) {
    return OAuthError(400, "invalid_grant", "code_verifier does not match the code_challenge");
  }
  if (form.Has("resource") && form.Get("resource") != options.issuer + "/mcp") {
    return OAuthError(400, "invalid_target", "resource must be " + options.issuer + "/mcp");
  }
  return IssueTokens(data.value("client_id", ""), data.value("key_id", ""),
                     Grant::FromJson(data.value("grant", json::object())), code.family);
}

HttpResponse OAuthServer::Impl::RefreshGrant(const Form& form) {
  const std::string id = Sha256Hex(form.Get("refresh_token"));
  auto taken = keys.TakeRecord("refresh", id);
  if (!taken) return OAuthError(503, "temporarily_unavailable", "the store cannot be read");
  if (!*taken) {
    // A refresh token used after its rotation: the grant is revoked (OAuth 2.1 section 4.3.1),
    // unless its rotation was moments ago (two refreshes racing, or a retry after an answer
    // that was lost): that one is refused and the grant kept.
    RevokeIfReused("used_refresh", id, kRefreshReuseGrace);
    return OAuthError(400, "invalid_grant", "the refresh token is unknown, expired or used");
  }
  const ServerRecord& refresh = **taken;
  MarkUsed("used_refresh", id, refresh.family,
           static_cast<double>(options.refresh_lifetime.count()));
  const json data = json::parse(refresh.data, nullptr, false);
  if (form.Get("client_id") != data.value("client_id", "")) {
    return OAuthError(400, "invalid_grant", "client_id does not match the refresh token");
  }
  auto key = keys.Find(data.value("key_id", ""));
  if (!key) return OAuthError(503, "temporarily_unavailable", "the store cannot be read");
  if (!*key || (*key)->revoked_at) {
    (void)keys.DropRecordFamily(refresh.family);
    return OAuthError(400, "invalid_grant", "the key this grant was made with is revoked");
  }
  return IssueTokens(data.value("client_id", ""), data.value("key_id", ""),
                     Grant::FromJson(data.value("grant", json::object())), refresh.family);
}

HttpResponse OAuthServer::Impl::IssueTokens(const std::string& client_id, const std::string& key_id,
                                            const Grant& grant, const std::string& family) {
  const std::string access = kAccessPrefix + RandomHex(32);
  const std::string refresh = kRefreshPrefix + RandomHex(32);
  const double now = NowSeconds();
  const json data{{"client_id", client_id},
                  {"key_id", key_id},
                  {"resource", options.issuer + "/mcp"},
                  {"grant", grant.ToJson()}};
  auto put_access = keys.PutRecord({"access", Sha256Hex(access), data.dump(), family,
                                    now + static_cast<double>(options.access_lifetime.count())});
  auto put_refresh = keys.PutRecord({"refresh", Sha256Hex(refresh), data.dump(), family,
                                     now + static_cast<double>(options.refresh_lifetime.count())});
  if (!put_access || !put_refresh) {
    return OAuthError(503, "temporarily_unavailable", "the store cannot write");
  }
  TouchClient(client_id);
  return JsonReply(200, json{{"access_token", access},
                             {"token_type", "Bearer"},
                             {"expires_in", options.access_lifetime.count()},
                             {"refresh_token", refresh},
                             {"scope", grant.ScopeText()}});
}

void OAuthServer::Impl::MarkUsed(const char* used_kind, const std::string& id,
                                 const std::string& family, double seconds) {
  const double now = NowSeconds();
  (void)keys.PutRecord({used_kind, id, json{{"family", family}, {"at", now}}.dump(),
                        family + "_used", now + seconds});
}

void OAuthServer::Impl::RevokeIfReused(const char* used_kind, const std::string& id,
                                       double grace_seconds) {
  auto used = keys.GetRecord(used_kind, id);
  if (!used || !*used) return;
  const json mark = json::parse((*used)->data, nullptr, false);
  if (!mark.is_object() || NowSeconds() - mark.value("at", 0.0) <= grace_seconds) return;
  (void)keys.DropRecordFamily(mark.value("family", ""));
}

// A client that got a token is kept 90 days from then.
void OAuthServer::Impl::TouchClient(const std::string& client_id) {
  auto client = keys.GetRecord("client", client_id);
  if (!client || !*client) return;
  ServerRecord record = **client;
  record.expires_at = NowSeconds() + kUsedClientSeconds;
  (void)keys.PutRecord(record);
}

HttpResponse OAuthServer::Impl::Revoke(const HttpRequest& req) {
  const Form form(req.body);
  const std::string token = form.Get("token");
  const std::string id = Sha256Hex(token);
  // A revoked refresh token ends its grant; an access token ends itself (RFC 7009 section 2.1).
  for (const char* kind : {"access", "refresh"}) {
    auto taken = keys.TakeRecord(kind, id);
    if (!taken) return OAuthError(503, "temporarily_unavailable", "the store cannot be read");
    if (*taken && std::string(kind) == "refresh") (void)keys.DropRecordFamily((*taken)->family);
  }
  return JsonReply(200, json::object());
}

Result<std::optional<ApiKey>> OAuthServer::Authenticate(std::string_view token) {
  if (!IsAccessToken(token)) return std::optional<ApiKey>();
  TMCRA_ASSIGN_OR_RETURN(auto record, impl_->keys.GetRecord("access", Sha256Hex(token)));
  if (!record) return std::optional<ApiKey>();
  const json data = json::parse(record->data, nullptr, false);
  if (!data.is_object() || data.value("resource", "") != resource()) {
    return std::optional<ApiKey>();
  }
  TMCRA_ASSIGN_OR_RETURN(auto key, impl_->keys.Find(data.value("key_id", "")));
  if (!key || key->revoked_at) return std::optional<ApiKey>();
  const Grant grant = Grant::FromJson(data.value("grant", json::object()));
  ApiKey granted = *key;
  granted.permissions.clear();
  for (const auto& p : grant.permissions) {
    if (key->Has(p)) granted.permissions.push_back(p);
  }
  if (!grant.scope_names.empty()) {
    granted.scope_names.clear();
    granted.scope_prefixes.clear();
    for (const auto& s : grant.scope_names) {
      if (key->AllowsScope(s)) granted.scope_names.push_back(s);
    }
    if (granted.scope_names.empty()) return std::optional<ApiKey>();
  }
  return std::optional<ApiKey>(std::move(granted));
}

}  // namespace tmcra::memd
