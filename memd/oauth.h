// tmcra-memd's OAuth 2.1 authorization server, for its MCP endpoint (docs/remote-mcp.md,
// "OAuth"), as MCP's authorization specification asks of a server:
//
//   GET  /.well-known/oauth-protected-resource[/mcp]   protected-resource metadata (RFC 9728)
//   GET  /.well-known/oauth-authorization-server       authorization-server metadata (RFC 8414)
//   POST /register    dynamic client registration (RFC 7591): public clients, at most 20 an hour
//                     from one address and `registrations_per_hour` in all, forgotten after a
//                     day unless used (then 90 days after their last token)
//   GET  /authorize   the consent page: the client, what it asks for, a field for a memd key (a
//                     request that is not right is an error page, never a redirect)
//   POST /authorize   the user's answer: with a valid key, a code (60 s, single use) sent to the
//                     registered redirect URI
//   POST /token       authorization_code (PKCE S256 required, the resource checked) and
//                     refresh_token (rotated: a refresh token is used once)
//   POST /revoke      token revocation (RFC 7009)
//
// Tokens are random, kept only as their SHA-256 in the key store (so every memd on it shares
// them), bound to the resource `<public URL>/mcp`, to the key that signed in (a revoked key's
// tokens stop at once) and to the grant: the permissions and memory scopes the user allowed,
// within the key's own. A code used twice, or a refresh token used more than 10 s after its
// rotation, revokes every token of its grant (sooner, it is only refused: two refreshes racing).
// Client metadata documents fetched by URL are not supported.
//
// Scopes (OAuth's `scope`): memory:read, memory:write, memory:feedback, and `scope:<name>` for
// each memory scope the token is limited to (none: every scope the key may use).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "memd/http_message.h"
#include "memd/key_store.h"

namespace tmcra::memd {

struct OAuthOptions {
  std::string issuer;  // the public origin, e.g. https://memory.example.com (no trailing '/')
  std::chrono::seconds access_lifetime{3600};
  std::chrono::seconds refresh_lifetime{30 * 24 * 3600};
  int registrations_per_hour = 100;  // in all (every memd on the store together)
};

class OAuthServer {
 public:
  // `keys` and `secret` (a server secret, for the consent form's signature) outlive this.
  OAuthServer(OAuthOptions options, KeyStore& keys, std::string secret);

  // The resource tokens are for: issuer + "/mcp".
  std::string resource() const;
  // The WWW-Authenticate value of a 401 of /mcp, pointing at the resource metadata.
  std::string Challenge(bool invalid_token) const;

  // The answer for an OAuth path (above), or nothing when the path is not one of them.
  std::optional<HttpResponse> Handle(const HttpRequest& req);

  // The grant an access token carries, as a key: the signed-in key's id, the permissions and
  // scopes the user allowed. Nothing for a token that is unknown, expired, revoked, for another
  // resource, or whose key was revoked; an Error only when the store cannot be read.
  [[nodiscard]] Result<std::optional<ApiKey>> Authenticate(std::string_view token);
  // True for a bearer token shaped like our access tokens (not a memd key).
  static bool IsAccessToken(std::string_view token);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tmcra::memd
