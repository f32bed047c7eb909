#include "memd/mcp_session.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <nlohmann/json.hpp>

#include "base/ids.h"
#include "memd/key_store.h"

namespace tmcra::memd {

namespace {

using json = nlohmann::json;

constexpr std::string_view kPrefix = "s1.";

std::string Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0x0f]);
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::optional<std::string> Unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexDigit(hex[i]);
    const int lo = HexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::optional<McpSession> SessionFromJson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  McpSession s;
  const auto k = j.find("k"), v = j.find("v"), e = j.find("e"), t = j.find("t"), n = j.find("n");
  if (k == j.end() || !k->is_string() || v == j.end() || !v->is_string() || e == j.end() ||
      !e->is_boolean() || t == j.end() || !t->is_number_integer() || n == j.end() ||
      !n->is_string()) {
    return std::nullopt;
  }
  s.key_id = k->get<std::string>();
  s.version = v->get<std::string>();
  s.elicitation = e->get<bool>();
  s.started = t->get<int64_t>();
  s.nonce = n->get<std::string>();
  return s;
}

}  // namespace

std::string HmacSha256Hex(std::string_view secret, std::string_view text) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), out, &length);
  return Hex(std::string_view(reinterpret_cast<const char*>(out), length));
}

std::string SessionSigner::Mac(std::string_view payload) const {
  return HmacSha256Hex(secret_, payload);
}

std::string SessionSigner::Issue(const McpSession& session) const {
  const json payload{{"k", session.key_id},
                     {"v", session.version},
                     {"e", session.elicitation},
                     {"t", session.started},
                     {"n", session.nonce.empty() ? UuidV4() : session.nonce}};
  const std::string hex = Hex(payload.dump());
  return std::string(kPrefix) + hex + "." + Mac(hex);
}

std::optional<McpSession> SessionSigner::Verify(std::string_view id, int64_t now) const {
  if (id.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  id.remove_prefix(kPrefix.size());
  const size_t dot = id.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view hex = id.substr(0, dot);
  if (!ConstantTimeEquals(Mac(hex), id.substr(dot + 1))) return std::nullopt;
  auto text = Unhex(hex);
  if (!text) return std::nullopt;
  auto session = SessionFromJson(*text);
  if (!session || now - session->started > kSessionLifetime.count() * 3600 ||
      session->started > now + 300) {
    return std::nullopt;
  }
  return session;
}

}  // namespace tmcra::memd
