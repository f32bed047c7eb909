// Sessions of tmcra-memd's MCP endpoint (Streamable HTTP, docs/remote-mcp.md). An
// Mcp-Session-Id carries the session itself: the id of the key it is bound to, the protocol
// version and client capability initialize settled, and when it began, signed with HMAC-SHA256
// under a server secret the key store keeps (KeyStore::ServerSecret). Nothing is stored per
// session, so every memd on the same store serves every session, and a session outlives a
// restart. An id that does not verify, is older than kSessionLifetime, or is shown with another
// key's credential is no session (the endpoint answers 404, and the client starts a new one).
//
// Pure functions of their inputs and the secret: tested on their own (tests/unit/memd).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tmcra::memd {

inline constexpr std::chrono::hours kSessionLifetime{24 * 30};

struct McpSession {
  std::string key_id;
  std::string version;       // the negotiated protocol version
  bool elicitation = false;  // the client declared form elicitation
  int64_t started = 0;       // Unix seconds
  std::string nonce;         // random, so two sessions begun together differ
};

// HMAC-SHA256 of `text` under `secret`, as lower-case hex (the session ids' signature, and the
// OAuth consent form's).
std::string HmacSha256Hex(std::string_view secret, std::string_view text);

class SessionSigner {
 public:
  // `secret`: the server secret (hex), never empty.
  explicit SessionSigner(std::string secret) : secret_(std::move(secret)) {}

  // "s1.<payload hex>.<HMAC hex>": visible ASCII only, as the transport requires.
  std::string Issue(const McpSession& session) const;
  // The session `id` carries, when its signature holds and it is not older than
  // kSessionLifetime at `now` (Unix seconds).
  std::optional<McpSession> Verify(std::string_view id, int64_t now) const;

 private:
  std::string Mac(std::string_view payload) const;

  std::string secret_;
};

}  // namespace tmcra::memd
