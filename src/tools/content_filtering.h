// The content filter as the tools apply it (filter/content_filter.h): every text a tool stores
// is filtered before its idempotency key is derived and before it reaches the outbox, so the
// outbox never holds what the filter removes and a replay of the same turn is still a replay.
// What each write removed goes into its receipt (`content_filter`), and into a tally for
// tmcra_status, as counts only, never the text.
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "filter/content_filter.h"

namespace tmcra::tools {

// What one write's filtering did: the filter's report and the messages it left empty (which are
// not stored).
struct Filtering {
  filter::FilterReport report;
  int64_t dropped_messages = 0;
  nlohmann::json ToJson() const;  // {"redacted": {kind: n}, "private_spans", "recalled_blocks",
                                  //  "dropped_messages"}
};

// The counts of every write of this process (thread-safe).
class FilterTally {
 public:
  void Add(const Filtering& filtering);
  nlohmann::json ToJson() const;

 private:
  mutable std::mutex mu_;
  filter::FilterReport total_;    // guarded by mu_
  int64_t dropped_messages_ = 0;  // guarded by mu_
};

// `text` filtered, its report added to `filtering` (a null filter leaves the text as it is).
std::string FilterText(const filter::ContentFilter* filter, std::string_view text,
                       Filtering& filtering);
// Each message's "content" filtered; messages left empty are removed and counted.
void FilterMessages(const filter::ContentFilter* filter, nlohmann::json& messages,
                    Filtering& filtering);

}  // namespace tmcra::tools
