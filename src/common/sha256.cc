#include "src/common/sha256.h"

#include <openssl/evp.h>

#include <array>
#include <cstdlib>

namespace tmcra {

namespace {

// OpenSSL 3 looks the algorithm up in its provider tables on every EVP_sha256() digest (an
// "implicit fetch", a lock and a hash-table probe), which cost more than hashing a recall's
// evidence block; the explicit fetch is done once and kept for the life of the process.
const EVP_MD* Sha256Algorithm() {
  static const EVP_MD* const md = [] {
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
    return fetched != nullptr ? fetched : EVP_sha256();
  }();
  return md;
}

// One digest context per thread, reused: EVP_Digest would allocate and free one per call.
struct DigestContext {
  DigestContext() : ctx(EVP_MD_CTX_new()) {}
  ~DigestContext() { EVP_MD_CTX_free(ctx); }
  DigestContext(const DigestContext&) = delete;
  DigestContext& operator=(const DigestContext&) = delete;
  EVP_MD_CTX* ctx;
};

}  // namespace

std::string Sha256Hex(std::string_view bytes) {
  thread_local DigestContext context;
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  // These fail only on allocation failure; there is nothing sensible to return then.
  if (context.ctx == nullptr ||
      EVP_DigestInit_ex2(context.ctx, Sha256Algorithm(), nullptr) != 1 ||
      EVP_DigestUpdate(context.ctx, bytes.data(), bytes.size()) != 1 ||
      EVP_DigestFinal_ex(context.ctx, digest.data(), &length) != 1) {
    std::abort();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(static_cast<size_t>(length) * 2, '\0');
  for (unsigned int i = 0; i < length; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0x0f];
  }
  return out;
}

}  // namespace tmcra
