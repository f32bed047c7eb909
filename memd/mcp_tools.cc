#include "memd/mcp_tools.h"

#include <utility>

#include "base/process_owner.h"
#include "base/sha256.h"
#include "base/version.h"
#include "src/tools/control_tool.h"
#include "src/tools/feedback_tool.h"
#include "src/tools/memory_tools.h"
#include "src/tools/outbox_sender.h"
#include "src/tools/status_tool.h"

namespace tmcra::memd {

// One key's (or grant's) tools and what they hold.
struct CallerTools::Entry {
  std::string signature;  // the key's permissions and scopes when it was built
  std::unique_ptr<CallerMemoryApi> memory;
  std::unique_ptr<tools::MemoryApiSender> sender;
  std::unique_ptr<queue::DeliveryService> delivery;  // its turn outbox
  tools::FilterTally tally;
  uint64_t last_used = 0;  // guarded by CallerTools::mu_
  mcp::ToolSet tools;
};

namespace {

// What a key (or an OAuth grant of it) may do, as text: part of its entry's name, so a key whose
// permissions or scopes change gets a new entry.
std::string Signature(const ApiKey& key) {
  return nlohmann::json{key.permissions, key.scope_names, key.scope_prefixes}.dump();
}

// The key's one scope name, when it is limited to exactly that; else "" (the call names one).
std::string DefaultScope(const ApiKey& key) {
  return key.scope_names.size() == 1 && key.scope_prefixes.empty() ? key.scope_names[0] : "";
}

}  // namespace

CallerTools::CallerTools(McpToolsOptions options)
    : options_(std::move(options)),
      controls_(options_.controls_root),
      filter_(options_.filter_rules) {}

CallerTools::~CallerTools() = default;

std::shared_ptr<const mcp::ToolSet> CallerTools::For(const ApiKey& key) {
  const std::string signature = Signature(key);
  std::lock_guard lock(mu_);
  // A key and an OAuth grant of it are told apart: each has its own tools and turns.
  std::shared_ptr<Entry>& slot = entries_[key.key_id + "|" + signature];
  if (!slot) slot = Build(key);
  slot->last_used = ++uses_;
  const std::shared_ptr<Entry> entry = slot;  // held: ForgetOldest may erase other slots
  ForgetOldest();
  // The tool set keeps its entry (the memory its handlers point to) alive while a call runs.
  return std::shared_ptr<const mcp::ToolSet>(entry, &entry->tools);
}

// The key's turn outbox and its delivery (started: committed turns go into the store in the
// background too). Its write gate re-checks the memory controls captured with a turn, as
// tmcra-mcp's does.
void CallerTools::StartDelivery(Entry& entry, const std::string& key_id) {
  queue::DeliveryOptions options;
  options.path = options_.turns_dir + "/" + key_id + "-" +
                 Sha256Hex(entry.signature).substr(0, 12) + ".sqlite3";
  options.owner = NewProcessOwnerId();
  entry.sender = std::make_unique<tools::MemoryApiSender>(*entry.memory);
  controls::ControlStore* store = &controls_;
  entry.delivery = std::make_unique<queue::DeliveryService>(
      options, *entry.sender, [store](const queue::Item& item) {
        auto allowed = store->MayWriteCaptured(item.recall_receipt);
        return allowed && *allowed;
      });
  entry.delivery->Start();
}

// Past kMaxEntries, the entry used longest ago goes (its delivery stops once its calls end; its
// turn outbox stays, and a later call of that key and grant delivers what is left in it).
void CallerTools::ForgetOldest() {
  if (entries_.size() <= kMaxEntries) return;
  auto oldest = entries_.begin();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->second->last_used < oldest->second->last_used) oldest = it;
  }
  entries_.erase(oldest);
}

std::shared_ptr<CallerTools::Entry> CallerTools::Build(const ApiKey& key) {
  auto entry = std::make_shared<Entry>();
  entry->signature = Signature(key);
  entry->memory = std::make_unique<CallerMemoryApi>(*options_.memory, key);
  StartDelivery(*entry, key.key_id);
  const std::string scope = DefaultScope(key);
  // Controls are the key's own: its id stands where tmcra-mcp's control key has the API key.
  const std::string key_id = key.key_id;
  auto control_key = [key_id](const std::string& s) {
    return controls::ControlKey("tmcra-memd", key_id, s);
  };
  queue::DeliveryService* delivery = entry->delivery.get();
  tools::ControlToolDeps control{&controls_, control_key, scope, [delivery]() -> nlohmann::json {
                                   auto outbox = delivery->outbox();
                                   if (!outbox) return {{"error", outbox.error().message}};
                                   auto counts = (*outbox)->GetCounts();
                                   if (!counts) return {{"error", counts.error().message}};
                                   return counts->StatesJson();
                                 }};
  tools::RegisterControlTool(entry->tools, control);
  tools::FeedbackToolDeps feedback;
  feedback.memory = entry->memory.get();
  feedback.controls = &controls_;
  feedback.control_key = control_key;
  feedback.default_scope = scope;
  feedback.filter = &filter_;
  tools::RegisterFeedbackTool(entry->tools, feedback);
  tools::MemoryToolDeps deps;
  deps.memory = entry->memory.get();
  deps.default_scope = scope;
  deps.version = kVersion;
  deps.controls = &controls_;
  deps.control_key = control_key;
  deps.filter = &filter_;
  deps.filter_tally = &entry->tally;
  tools::RegisterMemoryTools(entry->tools, deps);
  deps.delivery = delivery;
  tools::RegisterLifecycleTools(entry->tools, deps);
  CallerMemoryApi* memory = entry->memory.get();
  tools::StatusDeps status{
      {}, memory, nullptr, &entry->tally, [memory] { return memory->Describe(); }};
  tools::RegisterStatusTool(entry->tools, std::move(status));
  return entry;
}

}  // namespace tmcra::memd
