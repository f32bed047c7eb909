// What the memory engine needs of an embeddings service: a model name and texts turned into
// vectors. The engine never speaks HTTP itself; the application hands it an implementation
// (src/api/embeddings_client.h talks to Ollama's /api/embed or an OpenAI-compatible
// /v1/embeddings), tests a deterministic one.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "base/result.h"

namespace tmcra::memory {

class Embedder {
 public:
  virtual ~Embedder() = default;
  // The model the vectors come from. Vectors of different models are never compared: the store
  // keeps each vector with its model, and recall searches only the current model's.
  [[nodiscard]] virtual const std::string& model() const = 0;
  // One vector per text, in order, within `timeout`. Errors are values: kInvalidArgument when
  // the service refused the texts (e.g. one too long for the model): the engine then sends them
  // one at a time and passes over a text refused alone. Anything else (the service down, slow,
  // overloaded, or answering nonsense) is retried later with the same texts.
  // Checking the answer (count, dimensions, finite values) is the engine's job as well. A call
  // given `stop` ends soon after it becomes true (the engine closing), with an error.
  [[nodiscard]] virtual Result<std::vector<std::vector<float>>> Embed(
      const std::vector<std::string>& texts, std::chrono::milliseconds timeout,
      const std::atomic<bool>* stop = nullptr) = 0;
};

}  // namespace tmcra::memory
