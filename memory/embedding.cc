// Semantic recall's part of the engine (memory/engine.h, EngineOptions::embedder): the thread
// that embeds the records without a vector of the current model, the query's vector, and the
// vector ranking a recall fuses with the lexical ones (recall.cc).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/process_owner.h"
#include "base/utf8.h"
#include "memory/engine_impl.h"

namespace tmcra::memory {

namespace {

// The bytes of a record's text sent to be embedded (about 500 tokens): the start of a long
// message says what it is about, and small models read no more.
constexpr size_t kEmbedTextBytes = 2000;
// How long queries go without vectors after the service failed one.
constexpr auto kQueryPause = std::chrono::seconds(30);
constexpr size_t kQueryCacheEntries = 256;
constexpr size_t kGraphStepPoints = 64;
constexpr int64_t kLeaseSeconds = 60;

bool IsBlank(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}

// The service refused these texts (an HTTP 4xx other than 408 and 429): sent alone, a text it
// refuses is passed over. Any other failure is the service's and is retried.
bool Refused(const Error& error) { return error.code == Errc::kInvalidArgument; }

std::string EmbedText(const std::string& content) {
  if (content.size() <= kEmbedTextBytes) return content;
  size_t end = kEmbedTextBytes;
  while (end > 0 && (static_cast<unsigned char>(content[end]) & 0xC0u) == 0x80u) --end;
  return content.substr(0, end);
}

// The vectors of an answer in stored form; an error says what is wrong with the answer.
Result<std::vector<std::string>> CheckedVectors(const std::vector<std::vector<float>>& vectors,
                                                size_t expected, int64_t dimensions) {
  if (vectors.size() != expected) {
    return Error::Unavailable("the embeddings service answered " + std::to_string(vectors.size()) +
                              " vectors for " + std::to_string(expected) + " texts");
  }
  std::vector<std::string> stored;
  for (const auto& v : vectors) {
    const auto size = static_cast<int64_t>(v.size());
    if (dimensions > 0 && size != dimensions) {
      return Error::Unavailable("the embeddings service answered vectors of " +
                                std::to_string(size) + " dimensions; this model's have " +
                                std::to_string(dimensions) +
                                " (a different model under the same name needs another name)");
    }
    if (size != static_cast<int64_t>(vectors.front().size())) {
      return Error::Unavailable("the embeddings service answered vectors of different sizes");
    }
    auto encoded = EncodeVector(v);
    if (!encoded) {
      return Error::Unavailable("the embeddings service answered an unusable vector: " +
                                encoded.error().message);
    }
    stored.push_back(std::move(*encoded));
  }
  return stored;
}

}  // namespace

// A batch of records without a vector of the model: their event_seqs and texts, the last record
// looked at (records with nothing to embed are passed over), and their record ids.
struct EngineImpl::Backlog {
  std::vector<int64_t> seqs;
  std::vector<std::string> texts;
  int64_t through = 0;
  std::vector<std::string> ids;

  void Add(Backlog& from, size_t i) {
    seqs.push_back(from.seqs[i]);
    texts.push_back(std::move(from.texts[i]));
    ids.push_back(std::move(from.ids[i]));
  }
};

void EngineImpl::SignalEmbedder() {
  {
    std::lock_guard lock(worker_mu_);
    embed_signalled_ = true;
  }
  worker_cv_.notify_all();
}

// Waits for `wait`, a signal or the engine's end; false when the engine is ending.
bool EngineImpl::WaitToEmbed(std::chrono::milliseconds wait) {
  std::unique_lock lock(worker_mu_);
  worker_cv_.wait_for(lock, wait, [this] { return embed_signalled_ || stopping_.load(); });
  embed_signalled_ = false;
  return !stopping_.load();
}

Result<EngineImpl::ModelRow> EngineImpl::ReadModel(db::Database& db, bool create) {
  const std::string& name = options_.embedder->model();
  if (create) {
    TMCRA_ASSIGN_OR_RETURN(const ModelRow known, ReadModel(db, false));
    if (known.id != 0) return known;
    TMCRA_ASSIGN_OR_RETURN(auto insert,
                           db.Prepare("INSERT OR IGNORE INTO embedding_models(name) VALUES(?)"));
    insert.Bind(1, name);
    TMCRA_RETURN_IF_ERROR(insert.Run());
  }
  TMCRA_ASSIGN_OR_RETURN(
      auto read, db.Prepare("SELECT model_id, COALESCE(dimensions, 0) FROM embedding_models "
                            "WHERE name = ?"));
  read.Bind(1, name);
  TMCRA_ASSIGN_OR_RETURN(const bool row, read.Step());
  if (!row) return ModelRow{};
  return ModelRow{read.Int(0), read.Int(1)};
}

// The first records after `after` that have no vector of the model.
Result<EngineImpl::Backlog> EngineImpl::ReadBacklog(db::Database& db, const ModelRow& model,
                                                    int64_t after) {
  TMCRA_ASSIGN_OR_RETURN(
      auto read, db.Prepare("SELECT r.event_seq, r.content, r.record_id FROM records r WHERE "
                            "r.event_seq > ? "
                            "AND NOT EXISTS (SELECT 1 FROM record_vectors v WHERE v.event_seq = "
                            "r.event_seq AND v.model_id = ?) ORDER BY r.event_seq LIMIT ?"));
  read.Bind(1, after).Bind(2, model.id).Bind(3, options_.embed_batch);
  Backlog backlog;
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, read.Step());
    if (!row) break;
    backlog.through = read.Int(0);
    std::string text = EmbedText(read.Text(1));
    if (IsBlank(text)) continue;  // nothing to embed: passed over
    backlog.seqs.push_back(read.Int(0));
    backlog.texts.push_back(std::move(text));
    backlog.ids.push_back(read.Text(2));
  }
  return backlog;
}

Result<std::vector<std::string>> EngineImpl::EmbedTexts(const Backlog& backlog,
                                                        const ModelRow& model) {
  TMCRA_ASSIGN_OR_RETURN(
      const auto vectors,
      options_.embedder->Embed(backlog.texts, options_.embed_timeout, &stopping_));
  return CheckedVectors(vectors, backlog.texts.size(), model.dimensions);
}

// Stores the batch's vectors with their model in one transaction; the model's dimensions are
// fixed by its first vectors, and a vector of other dimensions is never stored.
Status EngineImpl::StoreVectors(db::Database& db, const ModelRow& model, const Backlog& backlog,
                                const std::vector<std::string>& stored) {
  TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Immediate(db));
  const auto dims = static_cast<int64_t>(StoredDimensions(stored.front()));
  TMCRA_ASSIGN_OR_RETURN(auto fix, db.Prepare("UPDATE embedding_models SET dimensions = ? WHERE "
                                              "model_id = ? AND dimensions IS NULL"));
  fix.Bind(1, dims).Bind(2, model.id);
  TMCRA_RETURN_IF_ERROR(fix.Run());
  TMCRA_ASSIGN_OR_RETURN(const ModelRow now, ReadModel(db, false));
  if (now.dimensions != dims) {
    return Error::Unavailable("the embeddings service answered vectors of " + std::to_string(dims) +
                              " dimensions; this model's have " + std::to_string(now.dimensions));
  }
  // Another model's vector of the record makes way (the new row gets a new vec_id, so every
  // process's copy of this model reads it); a vector of this model that another process stored
  // meanwhile stays, so no copy reads a record twice. A record forgotten since the batch was
  // read gets no vector (the join finds no record).
  TMCRA_ASSIGN_OR_RETURN(
      auto replace, db.Prepare("DELETE FROM record_vectors WHERE event_seq = ? AND model_id != ?"));
  TMCRA_ASSIGN_OR_RETURN(
      auto insert, db.Prepare("INSERT OR IGNORE INTO record_vectors(event_seq, model_id, vector) "
                              "SELECT event_seq, ?, ? FROM records WHERE event_seq = ?"));
  for (size_t i = 0; i < stored.size(); ++i) {
    replace.Reset();
    replace.Bind(1, backlog.seqs[i]).Bind(2, model.id);
    TMCRA_RETURN_IF_ERROR(replace.Run());
    insert.Reset();
    insert.Bind(1, model.id).BindBlob(2, stored[i]).Bind(3, backlog.seqs[i]);
    TMCRA_RETURN_IF_ERROR(insert.Run());
  }
  return tx.Commit();
}

// One batch after record `cursor`: read, embed (no transaction is open meanwhile), store, and
// move the cursor past it. True when there may be more to do.
Result<bool> EngineImpl::EmbedStep(db::Database& db, int64_t& cursor) {
  TMCRA_ASSIGN_OR_RETURN(const ModelRow model, ReadModel(db, true));
  Backlog backlog;
  {
    TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Deferred(db));
    TMCRA_ASSIGN_OR_RETURN(backlog, ReadBacklog(db, model, cursor));
    if (backlog.through == 0) {
      // Every record of this snapshot has its vector: the next look starts after them.
      TMCRA_ASSIGN_OR_RETURN(backlog.through,
                             db.QueryInt("SELECT COALESCE(MAX(event_seq), 0) FROM records"));
      cursor = std::max(cursor, backlog.through);
      return false;
    }
    TMCRA_RETURN_IF_ERROR(tx.Commit());
  }
  if (!backlog.seqs.empty() && options_.shared) {
    TMCRA_ASSIGN_OR_RETURN(backlog, TakeSharedVectors(db, model, std::move(backlog)));
  }
  if (!backlog.seqs.empty()) {
    auto stored = EmbedTexts(backlog, model);
    if (!stored && Refused(stored.error())) return EmbedSingly(db, model, backlog, cursor);
    if (!stored) return stored.error();
    if (stopping_.load()) return false;
    TMCRA_RETURN_IF_ERROR(StoreVectors(db, model, backlog, *stored));
    ShareVectors(backlog, *stored);
  }
  cursor = backlog.through;
  return true;
}

Result<EngineImpl::Backlog> EngineImpl::TakeSharedVectors(db::Database& db, const ModelRow& model,
                                                          Backlog backlog) {
  auto known = options_.shared->VectorsOf(options_.embedder->model(), backlog.seqs);
  if (!known) {
    spdlog::warn("shared vectors: {} (this batch is embedded here)", known.error().ToString());
    return backlog;
  }
  std::map<int64_t, SharedStore::SharedVector> by_seq;
  for (auto& v : *known) by_seq.emplace(v.event_seq, std::move(v));
  Backlog found{{}, {}, backlog.through, {}};
  Backlog rest{{}, {}, backlog.through, {}};
  std::vector<std::string> vectors;
  // Vectors of the model's dimensions only (of the first one taken, for a model without any yet).
  auto dims = static_cast<size_t>(model.dimensions);
  for (size_t i = 0; i < backlog.seqs.size(); ++i) {
    auto it = by_seq.find(backlog.seqs[i]);
    bool usable = it != by_seq.end() && it->second.record_id == backlog.ids[i] &&
                  StoredDimensions(it->second.vector) > 0 &&
                  (dims == 0 || StoredDimensions(it->second.vector) == dims);
    if (usable) {
      dims = StoredDimensions(it->second.vector);
      vectors.push_back(std::move(it->second.vector));
    }
    (usable ? found : rest).Add(backlog, i);
  }
  if (!found.seqs.empty()) TMCRA_RETURN_IF_ERROR(StoreVectors(db, model, found, vectors));
  return rest;
}

void EngineImpl::ShareVectors(const Backlog& backlog, const std::vector<std::string>& stored) {
  if (!options_.shared) return;
  std::vector<SharedStore::SharedVector> vectors;
  for (size_t i = 0; i < stored.size(); ++i) {
    vectors.push_back({backlog.seqs[i], backlog.ids[i], stored[i]});
  }
  if (auto shared = options_.shared->AddVectors(options_.embedder->model(), vectors); !shared) {
    spdlog::warn("shared vectors: {} (other instances embed these records themselves)",
                 shared.error().ToString());
  }
}

// A batch the service refused, one record at a time: a record refused alone is passed over
// (logged by its event_seq, never its text); any other failure stops the batch there.
Result<bool> EngineImpl::EmbedSingly(db::Database& db, const ModelRow& model,
                                     const Backlog& backlog, int64_t& cursor) {
  for (size_t i = 0; i < backlog.seqs.size() && !stopping_.load(); ++i) {
    Backlog one{{backlog.seqs[i]}, {backlog.texts[i]}, backlog.seqs[i], {backlog.ids[i]}};
    auto stored = EmbedTexts(one, model);
    if (stored) {
      TMCRA_RETURN_IF_ERROR(StoreVectors(db, model, one, *stored));
      ShareVectors(one, *stored);
    } else if (Refused(stored.error())) {
      spdlog::warn("embedding record {}: refused, passed over: {}", one.through,
                   stored.error().message);
    } else {
      return stored.error();
    }
    cursor = one.through;
  }
  if (!stopping_.load()) cursor = std::max(cursor, backlog.through);
  return true;
}

// Whether this process may embed now: one process at a time embeds a store (so several
// sessions do not each pay for the same vectors), holding a lease in `maintenance` that it
// renews while it runs and that lapses a minute after its process ends.
Result<bool> EngineImpl::HoldEmbeddingLease(db::Database& db,
                                            std::chrono::steady_clock::time_point& renew_at) {
  if (std::chrono::steady_clock::now() < renew_at) return true;
  const std::string mine = "embedding_lease:" + owner_;
  const auto now = static_cast<int64_t>(NowSeconds());
  TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Immediate(db));
  TMCRA_ASSIGN_OR_RETURN(auto expired,
                         db.Prepare("DELETE FROM maintenance WHERE name LIKE 'embedding_lease:%' "
                                    "AND value < ?"));
  expired.Bind(1, now);
  TMCRA_RETURN_IF_ERROR(expired.Run());
  TMCRA_ASSIGN_OR_RETURN(auto others, db.Prepare("SELECT name FROM maintenance WHERE name "
                                                 "LIKE 'embedding_lease:%' AND name != ?"));
  others.Bind(1, mine);
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, others.Step());
    if (!row) break;
    // A holder whose process has died (killed) gives way at once, not at its expiry.
    if (!ProcessOwnerIsDead(others.Text(0).substr(std::strlen("embedding_lease:")))) return false;
  }
  TMCRA_ASSIGN_OR_RETURN(
      auto take, db.Prepare("INSERT OR REPLACE INTO maintenance(name, value) VALUES(?, ?)"));
  take.Bind(1, mine).Bind(2, now + kLeaseSeconds);
  TMCRA_RETURN_IF_ERROR(take.Run());
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  renew_at = std::chrono::steady_clock::now() + std::chrono::seconds(kLeaseSeconds / 2);
  return true;
}

void EngineImpl::ReleaseEmbeddingLease(db::Database& db) {
  auto drop = db.Prepare("DELETE FROM maintenance WHERE name = ?");
  if (drop) {
    drop->Bind(1, "embedding_lease:" + owner_);
    (void)drop->Run();
  }
}

void EngineImpl::NoteEmbedding(const Status& outcome, bool elsewhere) {
  std::lock_guard lock(vectors_mu_);
  EngineStats::EmbeddingFigures& s = embedding_state_;
  if (outcome) {
    s.state = elsewhere ? "elsewhere" : "ok";
    s.failures = 0;
    return;
  }
  s.state = "failing";
  s.last_error = outcome.error().message;
  s.last_error_at = NowSeconds();
  ++s.failures;
}

void EngineImpl::EmbedLoop() {
  if (!WaitToEmbed(std::chrono::milliseconds(options_.embed_start_ms))) return;
  auto opened = db::Database::Open({options_.path});
  if (!opened) {
    spdlog::warn("embedding thread: {}", opened.error().ToString());
    return;
  }
  db::Database& db = **opened;
  auto backoff = std::chrono::milliseconds(1000);
  int64_t cursor = 0;  // the records up to it have vectors (or had none to give)
  auto renew_at = std::chrono::steady_clock::time_point::min();
  bool elsewhere = false;
  while (!stopping_.load()) {
    Result<bool> more = false;
    try {
      auto leased = HoldEmbeddingLease(db, renew_at);
      elsewhere = leased && !*leased;  // another process embeds: look again later
      more = !leased   ? Result<bool>(leased.error())
             : *leased ? EmbedStep(db, cursor)
                       : Result<bool>(false);
    } catch (const std::exception& e) {
      more = Error::Internal(std::string("embedding failed: ") + e.what());
    }
    if (!more && stopping_.load()) break;  // an aborted request: the engine is closing
    if (!more) {
      NoteEmbedding(more.error());
      spdlog::warn("embedding records: {} (again in {} s)", more.error().message,
                   backoff.count() / 1000);
      if (!WaitToEmbed(backoff)) break;
      backoff = std::min(backoff * 2, std::chrono::milliseconds(60000));
      continue;
    }
    backoff = std::chrono::milliseconds(1000);
    NoteEmbedding(Ok(), elsewhere);
    std::shared_ptr<VectorIndex> index;
    {
      std::lock_guard lock(vectors_mu_);
      index = vector_index_;
    }
    if (*more || (index && index->ExtendGraphs(kGraphStepPoints))) continue;
    if (!WaitToEmbed(std::chrono::milliseconds(options_.idle_poll_ms))) break;
  }
  ReleaseEmbeddingLease(db);
}

std::optional<std::string> EngineImpl::QueryVector(const std::string& asked, std::string& note) {
  if (!options_.embedder) return std::nullopt;
  if (IsBlank(asked)) {
    note = "the query is empty";
    return std::nullopt;
  }
  const std::string query = EmbedText(asked);  // a long query's start, as for a record
  {
    std::lock_guard lock(vectors_mu_);
    if (auto it = query_vectors_.find(query); it != query_vectors_.end()) return it->second;
    if (std::chrono::steady_clock::now() < queries_resume_at_) {
      note =
          "queries are not embedded for a while after a failure: " + embedding_state_.query_error;
      return std::nullopt;
    }
  }
  auto vectors = options_.embedder->Embed({query}, options_.query_embed_timeout);
  auto stored =
      vectors ? CheckedVectors(*vectors, 1, 0) : Result<std::vector<std::string>>(vectors.error());
  std::lock_guard lock(vectors_mu_);
  if (!stored) {
    note = "the query could not be embedded: " + stored.error().message;
    embedding_state_.query_error = stored.error().message;
    queries_resume_at_ = std::chrono::steady_clock::now() + kQueryPause;
    return std::nullopt;
  }
  embedding_state_.query_error.clear();
  if (query_vectors_.size() >= kQueryCacheEntries) query_vectors_.clear();
  query_vectors_[query] = stored->front();
  return stored->front();
}

using VectorRanking = std::optional<std::vector<std::pair<int64_t, double>>>;

Result<VectorRanking> EngineImpl::VectorHits(db::Database& db, std::string_view scope,
                                             const std::string& query_vector, std::string& note) {
  TMCRA_ASSIGN_OR_RETURN(const ModelRow model, ReadModel(db, false));
  if (model.dimensions == 0) {
    note = "no record has a vector of " + options_.embedder->model() + " yet";
    return VectorRanking{};
  }
  if (static_cast<size_t>(model.dimensions) != StoredDimensions(query_vector)) {
    note = "the query's vector has " + std::to_string(StoredDimensions(query_vector)) +
           " dimensions; the model's records have " + std::to_string(model.dimensions);
    return VectorRanking{};
  }
  std::shared_ptr<VectorIndex> index;
  {
    std::lock_guard lock(vectors_mu_);
    if (!vector_index_ || vector_index_->model_id() != model.id ||
        static_cast<int64_t>(vector_index_->dimensions()) != model.dimensions) {
      VectorIndex::Options options;
      options.ann_threshold = options_.ann_threshold;
      vector_index_ =
          std::make_shared<VectorIndex>(model.id, static_cast<size_t>(model.dimensions), options);
    }
    index = vector_index_;
  }
  TMCRA_RETURN_IF_ERROR(index->CatchUp(db));
  return VectorRanking{
      index->Search(scope, query_vector, options_.vector_hits, options_.vector_min_similarity)};
}

Result<EngineStats::EmbeddingFigures> EngineImpl::EmbeddingFigures(db::Database& db) {
  EngineStats::EmbeddingFigures figures;
  {
    std::lock_guard lock(vectors_mu_);
    figures = embedding_state_;
    if (vector_index_) figures.graphed = vector_index_->figures().graphed;
  }
  figures.model = options_.embedder->model();
  TMCRA_ASSIGN_OR_RETURN(const ModelRow model, ReadModel(db, false));
  figures.dimensions = model.dimensions;
  TMCRA_ASSIGN_OR_RETURN(auto count,
                         db.Prepare("SELECT (SELECT COUNT(*) FROM record_vectors WHERE model_id "
                                    "= ?1), (SELECT COUNT(*) FROM records)"));
  count.Bind(1, model.id);
  TMCRA_ASSIGN_OR_RETURN(const bool row, count.Step());
  if (row) {
    figures.vectors = count.Int(0);
    figures.backlog = std::max<int64_t>(0, count.Int(1) - figures.vectors);
  }
  return figures;
}

}  // namespace tmcra::memory
