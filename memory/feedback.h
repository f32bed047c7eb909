// Feedback effects as recall applies them (docs/contract.md §1.4.5, §8.7). Internal to memory/.
//
// For each record of a scope, the newest ignore/correct/restore feedback that targets it decides
// its state: ignore and correct hide it, restore shows it again. A correction's own record (the
// replacement, stored in session `correction-<feedback_id>`) is shown only while that correction
// is still the newest feedback of at least one of its targets, so a later restore, ignore or
// re-correct of the originals withdraws it too. A correction record can itself be ignored like
// any record. Notes change nothing.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/sqlite_db.h"
#include "memory/shared_store.h"

namespace tmcra::memory {

struct FeedbackEffects {
  std::set<std::string> hidden_records;   // record ids
  std::set<std::string> hidden_sessions;  // sessions of withdrawn corrections

  bool empty() const { return hidden_records.empty() && hidden_sessions.empty(); }
  bool Hides(const std::string& record_id, const std::string& session_id) const {
    return hidden_records.count(record_id) > 0 || hidden_sessions.count(session_id) > 0;
  }
};

// The effects stored for `scope`, read inside the caller's transaction.
[[nodiscard]] Result<FeedbackEffects> LoadFeedbackEffects(db::Database& db, std::string_view scope);

// The session a correction's replacement is stored in (and the Idempotency-Key of its ingest).
std::string CorrectionSession(std::string_view feedback_id);

// A feedback with its targets (a shared store's, or an imported one) added to or deleted from a
// store, in the caller's transaction; AddSharedFeedback leaves one whose id (or key) is held as
// it is and answers false.
[[nodiscard]] Result<bool> AddSharedFeedback(db::Database& db,
                                             const SharedStore::FeedbackRow& feedback);
[[nodiscard]] Status DeleteSharedFeedback(db::Database& db, std::string_view feedback_id);

}  // namespace tmcra::memory
