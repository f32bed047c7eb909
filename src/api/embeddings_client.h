// EmbeddingsClient: the memory engine's Embedder (memory/embedder.h) over HTTP, for an
// embeddings service the user runs or pays for (docs/recall.md, "Vectors"):
//   * Ollama's POST /api/embed {"model", "input": [texts]} -> {"embeddings": [[...], ...]};
//   * the OpenAI-compatible POST .../embeddings {"model", "input": [texts],
//     "encoding_format": "float"} -> {"data": [{"index", "embedding": [...]}, ...]} (OpenAI,
//     llama.cpp's server, LM Studio, vLLM, Ollama's /v1/embeddings).
// The URL is the endpoint itself, and its path says which of the two it is. HTTPS to any host;
// plain HTTP only to loopback (`localhost`, 127.0.0.1, [::1]), where proxies are never used.
// The key, when given, is sent only as "Authorization: Bearer <key>" and never appears in an
// error or a log. libcurl is loaded at run time (src/config/libcurl.h), as for the Memory API.
//
// Errors (values): the service unreachable, a timeout, or HTTP 408/429/5xx: kUnavailable or
// kTimeout, retryable; any other status: not retryable, with the service's message (scrubbed
// of the key, at most 300 bytes); an answer that is not the expected JSON shape: kProtocol.
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "memory/embedder.h"

namespace tmcra::api {

struct EmbeddingsOptions {
  std::string url;
  std::string model;
  std::string api_key;        // SECRET; empty: no Authorization header
  std::string ca_file;        // CA bundle replacing the system one, for https
  bool allow_keylog = false;  // tolerate SSLKEYLOGFILE (debugging only)
  size_t max_response_bytes = 64u * 1024u * 1024u;
};

class EmbeddingsClient final : public memory::Embedder {
 public:
  // Checks the options and loads libcurl; never touches the network.
  [[nodiscard]] static Result<std::unique_ptr<EmbeddingsClient>> Create(EmbeddingsOptions options);
  ~EmbeddingsClient() override;
  EmbeddingsClient(const EmbeddingsClient&) = delete;
  EmbeddingsClient& operator=(const EmbeddingsClient&) = delete;

  const std::string& model() const override;
  Result<std::vector<std::vector<float>>> Embed(const std::vector<std::string>& texts,
                                                std::chrono::milliseconds timeout,
                                                const std::atomic<bool>* stop) override;

 private:
  struct Impl;
  explicit EmbeddingsClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tmcra::api
