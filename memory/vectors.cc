#include "memory/vectors.h"

#include <hnswlib/hnswlib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace tmcra::memory {

namespace {

constexpr size_t kScaleBytes = sizeof(float);

float ScaleOf(const char* stored) {
  float scale = 0;
  std::memcpy(&scale, stored, kScaleBytes);
  return scale;
}

// The dot product of two stored vectors' quantised values, times their scales.
float Similarity(const char* a, const char* b, size_t dims) {
  const auto* qa = reinterpret_cast<const int8_t*>(a + kScaleBytes);
  const auto* qb = reinterpret_cast<const int8_t*>(b + kScaleBytes);
  int32_t dot = 0;
  for (size_t i = 0; i < dims; ++i) dot += int32_t{qa[i]} * int32_t{qb[i]};
  return ScaleOf(a) * ScaleOf(b) * static_cast<float>(dot);
}

// hnswlib's view of the stored form: distance 1 - cosine.
class StoredSpace final : public hnswlib::SpaceInterface<float> {
 public:
  explicit StoredSpace(size_t dims) : dims_(dims) {}
  size_t get_data_size() override { return kScaleBytes + dims_; }
  hnswlib::DISTFUNC<float> get_dist_func() override { return &Distance; }
  void* get_dist_func_param() override { return &dims_; }

 private:
  static float Distance(const void* a, const void* b, const void* param) {
    return 1.0f - Similarity(static_cast<const char*>(a), static_cast<const char*>(b),
                             *static_cast<const size_t*>(param));
  }
  size_t dims_;
};

// The k best of `scored` (similarity, position), best first.
void KeepBest(std::vector<std::pair<float, size_t>>& scored, size_t k) {
  const auto better = [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  };
  if (scored.size() > k) {
    std::nth_element(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(k), scored.end(),
                     better);
    scored.resize(k);
  }
  std::sort(scored.begin(), scored.end(), better);
}

}  // namespace

Result<std::string> EncodeVector(const std::vector<float>& values) {
  if (values.empty()) return Error::Invalid("the vector has no values");
  double norm = 0;
  for (float v : values) {
    if (!std::isfinite(v)) return Error::Invalid("the vector holds a value that is not finite");
    norm += static_cast<double>(v) * static_cast<double>(v);
  }
  norm = std::sqrt(norm);
  if (norm == 0 || !std::isfinite(norm)) return Error::Invalid("the vector has length zero");
  double largest = 0;
  for (float v : values) largest = std::max(largest, std::fabs(static_cast<double>(v)) / norm);
  const float scale = static_cast<float>(largest / 127.0);
  std::string out(kScaleBytes + values.size(), '\0');
  std::memcpy(out.data(), &scale, kScaleBytes);
  for (size_t i = 0; i < values.size(); ++i) {
    const double q = std::round(static_cast<double>(values[i]) / norm / scale);
    out[kScaleBytes + i] = static_cast<char>(static_cast<int8_t>(std::clamp(q, -127.0, 127.0)));
  }
  return out;
}

size_t StoredDimensions(std::string_view blob) {
  return blob.size() > kScaleBytes ? blob.size() - kScaleBytes : 0;
}

float StoredSimilarity(std::string_view a, std::string_view b) {
  return Similarity(a.data(), b.data(), std::min(StoredDimensions(a), StoredDimensions(b)));
}

struct VectorIndex::Partition {
  std::vector<int64_t> seqs;  // the records, in the order read
  std::string data;           // their stored forms, back to back
  std::unique_ptr<StoredSpace> space;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph;
  size_t graphed = 0;  // the first `graphed` vectors are in the graph
};

VectorIndex::VectorIndex(int64_t model_id, size_t dimensions, Options options)
    : model_id_(model_id), dims_(dimensions), options_(options) {}

VectorIndex::~VectorIndex() = default;

VectorIndex::Partition& VectorIndex::PartitionOf(const std::string& scope) {
  auto& slot = partitions_[scope];
  if (!slot) slot = std::make_unique<Partition>();
  return *slot;
}

Status VectorIndex::CatchUp(db::Database& db) {
  std::lock_guard one(catch_up_mu_);
  TMCRA_ASSIGN_OR_RETURN(const int64_t deletions,
                         db.QueryInt("SELECT COALESCE((SELECT value FROM maintenance WHERE name = "
                                     "'vector_deletions'), 0)"));
  int64_t after = 0;
  int64_t seen = 0;
  {
    std::shared_lock lock(mu_);
    after = through_vec_id_;
    seen = deletions_seen_;
  }
  // A recall on an older snapshot may see fewer deletions than the copy has: it never reloads.
  if (deletions > seen) return ReadRows(db, 0, deletions);
  return ReadRows(db, after, std::nullopt);
}

Status VectorIndex::ReadRows(db::Database& db, int64_t after,
                             std::optional<int64_t> reload_at_deletions) {
  TMCRA_ASSIGN_OR_RETURN(
      auto rows, db.Prepare("SELECT v.vec_id, v.event_seq, r.scope_name, v.vector "
                            "FROM record_vectors v JOIN records r ON r.event_seq = v.event_seq "
                            "WHERE v.model_id = ? AND v.vec_id > ? ORDER BY v.vec_id"));
  rows.Bind(1, model_id_).Bind(2, after);
  // Read into buffers of the index's own shape first, so the lock is held only to append.
  struct Read {
    std::vector<int64_t> seqs;
    std::string data;
  };
  std::unordered_map<std::string, Read> read;
  int64_t through = after;
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, rows.Step());
    if (!row) break;
    through = rows.Int(0);
    const std::string blob = rows.Blob(3);
    if (StoredDimensions(blob) != dims_) continue;  // never another model's shape
    Read& r = read[rows.Text(2)];
    r.seqs.push_back(rows.Int(1));
    r.data += blob;
  }
  std::unique_lock lock(mu_);
  if (reload_at_deletions) {  // the new copy replaces the old one at once
    partitions_.clear();
    through_vec_id_ = 0;
    deletions_seen_ = *reload_at_deletions;
  }
  for (auto& [scope, r] : read) {
    Partition& p = PartitionOf(scope);
    if (p.seqs.empty()) {
      r.data.shrink_to_fit();
      p.seqs = std::move(r.seqs);
      p.data = std::move(r.data);
    } else {
      p.seqs.insert(p.seqs.end(), r.seqs.begin(), r.seqs.end());
      p.data += r.data;
    }
  }
  through_vec_id_ = std::max(through_vec_id_, through);
  return Ok();
}

std::vector<std::pair<int64_t, double>> VectorIndex::Search(std::string_view scope,
                                                            std::string_view query, size_t k,
                                                            double min_similarity) const {
  std::vector<std::pair<int64_t, double>> out;
  if (StoredDimensions(query) != dims_ || k == 0) return out;
  std::shared_lock lock(mu_);
  auto it = partitions_.find(std::string(scope));
  if (it == partitions_.end()) return out;
  const Partition& p = *it->second;
  const size_t stride = kScaleBytes + dims_;
  const size_t graphed = p.graph ? p.graphed : 0;
  std::vector<std::pair<float, size_t>> scored;
  if (graphed > 0) {
    for (const auto& [distance, label] : p.graph->searchKnnCloserFirst(query.data(), k)) {
      scored.emplace_back(1.0f - distance, static_cast<size_t>(label));
    }
  }
  for (size_t i = graphed; i < p.seqs.size(); ++i) {
    scored.emplace_back(Similarity(query.data(), p.data.data() + i * stride, dims_), i);
  }
  KeepBest(scored, k);
  for (const auto& [similarity, position] : scored) {
    if (similarity < min_similarity) break;
    const int64_t seq = p.seqs[position];
    const bool seen =
        std::any_of(out.begin(), out.end(), [&](const auto& o) { return o.first == seq; });
    if (!seen) out.emplace_back(seq, static_cast<double>(similarity));
  }
  return out;
}

// Runs with the index locked (recalls wait): the caller keeps `max_points` small.
bool VectorIndex::ExtendGraphs(size_t max_points) {
  std::unique_lock lock(mu_);
  for (auto& [scope, slot] : partitions_) {
    Partition& p = *slot;
    const size_t n = p.seqs.size();
    const size_t from = p.graphed;
    if (n < options_.ann_threshold || from >= n) continue;
    try {
      if (!p.graph) {
        p.space = std::make_unique<StoredSpace>(dims_);
        p.graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(
            p.space.get(), n * 2, options_.ann_m, options_.ann_ef_construction);
        p.graph->setEf(options_.ann_ef_search);
      }
      const size_t to = std::min(n, from + max_points);
      if (to > p.graph->max_elements_) p.graph->resizeIndex(to * 2);
      const size_t stride = kScaleBytes + dims_;
      for (size_t i = from; i < to; ++i) p.graph->addPoint(p.data.data() + i * stride, i);
      p.graphed = to;
      return true;
    } catch (const std::exception& e) {
      spdlog::warn("vector index of scope {}: {}", scope, e.what());
      p.graph.reset();
      p.graphed = 0;
      return false;
    }
  }
  return false;
}

VectorIndex::Figures VectorIndex::figures() const {
  std::shared_lock lock(mu_);
  Figures f;
  for (const auto& [scope, p] : partitions_) {
    f.vectors += static_cast<int64_t>(p->seqs.size());
    if (p->graph) f.graphed += static_cast<int64_t>(p->graphed);
  }
  return f;
}

}  // namespace tmcra::memory
