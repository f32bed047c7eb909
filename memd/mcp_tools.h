// The tools tmcra-memd's /mcp endpoint offers one caller: tmcra-mcp's tools (src/tools), the
// same code, over the server's memory as the caller's key may use it (memd/caller_memory.h).
// A call that names no scope uses the key's scope when the key is limited to exactly one
// scope name (and no prefix); otherwise the scope is required, as with TMCRA's service. Memory
// controls (modes, budget, tasks) are kept per key on the server, under `controls_root`.
//
// The turn lifecycle (tmcra_turn_prepare, tmcra_turn_commit, tmcra_reconcile) keeps each key's
// prepared and committed turns in an outbox of the server (`<turns_dir>/<key id>-<grant>.sqlite3`,
// one per key and per OAuth grant of it),
// delivered into the store by a delivery thread of that key's, through the key's memory: the
// same code and receipts as tmcra-mcp's local outbox, kept where the memory is.
//
// A key's tool set is built on its first call and kept while the key is unchanged; thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "filter/content_filter.h"
#include "memd/caller_memory.h"
#include "memd/key_store.h"
#include "src/controls/memory_controls.h"
#include "src/mcp/tool_set.h"
#include "src/tools/content_filtering.h"

namespace tmcra::memd {

struct McpToolsOptions {
  api::MemoryApi* memory = nullptr;  // the server's memory; not owned, outlives the tools
  std::string controls_root;         // a private directory for the memory controls
  std::string turns_dir;             // a private directory for the keys' turn outboxes
  filter::FilterRules filter_rules;  // the content filter of what the tools store
};

// Tool sets kept at most: one per key and OAuth grant in use.
inline constexpr size_t kMaxEntries = 256;

class CallerTools {
 public:
  explicit CallerTools(McpToolsOptions options);
  ~CallerTools();
  CallerTools(const CallerTools&) = delete;
  CallerTools& operator=(const CallerTools&) = delete;

  // The tools for `key` (never null).
  std::shared_ptr<const mcp::ToolSet> For(const ApiKey& key);

 private:
  struct Entry;
  std::shared_ptr<Entry> Build(const ApiKey& key);
  void StartDelivery(Entry& entry, const std::string& key_id);
  void ForgetOldest();  // REQUIRES: mu_ held

  McpToolsOptions options_;
  controls::ControlStore controls_;
  filter::ContentFilter filter_;
  std::mutex mu_;
  // By key id and what the key (or an OAuth grant of it) allows; guarded by mu_.
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  uint64_t uses_ = 0;  // guarded by mu_
};

}  // namespace tmcra::memd
