// Record vectors: how one is stored, and the in-memory index recall searches.
//
// A vector is stored normalised to unit length and quantised to one signed byte per dimension
// with a scale (4 + dim bytes: 388 for 384 dimensions): the dot product of two stored vectors is
// their cosine similarity within about 0.01. Values that are not finite, or a vector of length
// zero, are refused.
//
// VectorIndex holds one model's vectors per scope, read from the store's record_vectors rows
// (schema 6, memory/engine.cc): CatchUp reads the rows added since it last looked, and reads
// them all again when the store's vector-deletion count has moved (a forget, in any process),
// so a forgotten record's vector leaves this memory too. Search is exact (every vector of the
// scope) below `ann_threshold` vectors; above it, an HNSW graph (hnswlib) that the engine's
// embedding thread builds in the background covers the vectors it has reached and the rest
// are searched exactly. The graph lives in memory only: no file but the store ever holds a
// vector. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/sqlite_db.h"

namespace tmcra::memory {

// `values` normalised and quantised as stored; kInvalidArgument naming what is wrong (a value
// that is not finite, a zero vector, no values).
[[nodiscard]] Result<std::string> EncodeVector(const std::vector<float>& values);
// The dimensions of a stored vector (its bytes less the scale).
size_t StoredDimensions(std::string_view blob);
// The cosine similarity of two stored vectors of equal dimensions.
float StoredSimilarity(std::string_view a, std::string_view b);

class VectorIndex {
 public:
  struct Options {
    size_t ann_threshold = 20000;  // a scope's vectors from which the HNSW graph is built
    size_t ann_m = 16;             // hnswlib's M
    size_t ann_ef_construction = 100;
    size_t ann_ef_search = 96;
  };
  VectorIndex(int64_t model_id, size_t dimensions, Options options);
  ~VectorIndex();
  VectorIndex(const VectorIndex&) = delete;
  VectorIndex& operator=(const VectorIndex&) = delete;

  int64_t model_id() const { return model_id_; }
  size_t dimensions() const { return dims_; }

  // Brings the copy up to `db`'s current snapshot (the caller holds a read transaction).
  [[nodiscard]] Status CatchUp(db::Database& db);
  // The `k` records of `scope` most similar to the stored-form `query`, best first, with their
  // similarity, those below `min_similarity` left out.
  std::vector<std::pair<int64_t, double>> Search(std::string_view scope, std::string_view query,
                                                 size_t k, double min_similarity) const;
  // Extends one scope's HNSW graph by up to `max_points` vectors; false when no graph needs
  // work. The embedding thread calls it between its batches.
  bool ExtendGraphs(size_t max_points);

  struct Figures {
    int64_t vectors = 0;
    int64_t graphed = 0;  // vectors an HNSW graph covers
  };
  Figures figures() const;

 private:
  struct Partition;
  Partition& PartitionOf(const std::string& scope);
  // Reads the rows above `after`, read without the lock and then added under it; with
  // `reload_at_deletions`, all rows, replacing the copy.
  Status ReadRows(db::Database& db, int64_t after, std::optional<int64_t> reload_at_deletions);

  const int64_t model_id_;
  const size_t dims_;
  const Options options_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Partition>> partitions_;  // guarded by mu_
  int64_t through_vec_id_ = 0;                                              // guarded by mu_
  int64_t deletions_seen_ = -1;                                             // guarded by mu_
  std::mutex catch_up_mu_;                                                  // one CatchUp at a time
};

}  // namespace tmcra::memory
