// The wiring of tmcra-mcp: the only place that builds concrete parts and hands them to each
// other. main() and the test server both start from here, so they serve the same tools.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "filter/content_filter.h"
#include "queue/delivery.h"
#include "src/api/memory_api.h"
#include "src/config/settings.h"
#include "src/controls/memory_controls.h"
#include "src/mcp/server.h"
#include "src/tools/content_filtering.h"
#include "src/tools/memory_tools.h"

namespace tmcra::app {

// The parts of a running tmcra-mcp. The server is declared last so it is destroyed first: its
// tool threads are joined before the memory they use goes away.
struct App {
  std::unique_ptr<api::MemoryApi> memory;
  std::unique_ptr<queue::Sender> sender;
  std::unique_ptr<controls::ControlStore> controls;
  std::unique_ptr<queue::DeliveryService> delivery;  // stopped before the memory goes
  std::unique_ptr<mcp::Server> server;
  // The content filter the tools apply to every stored text, and what it removed.
  std::unique_ptr<filter::ContentFilter> filter;
  std::unique_ptr<tools::FilterTally> filter_tally;
  // What the tools were given (pointers into the parts above), for in-process callers (hooks).
  tools::MemoryToolDeps tool_deps;
  // The scope turns are stored in when no call names one, and whether it is the project's
  // (config/project_scope.h) rather than configured or personal.
  std::string default_scope;
  bool project_scope = false;
  config::Settings settings;  // as loaded from the environment and config files
};

// What a caller other than main() may change: the fuzzer runs the tools on its own thread.
struct AppOptions {
  bool inline_tools = false;  // mcp::ServerOptions::inline_tools
  // A hook process delivers within its own deadline: no background delivery thread, and a
  // remote memory's requests bounded by `request_timeout` (when set) instead of the setting.
  bool background_delivery = true;
  std::optional<std::chrono::milliseconds> request_timeout;
};

// The production server with every tmcra_* tool registered over the memory the environment
// selects (embedded by default). When TMCRA_HOOKS names a host (setup writes it into the entry
// of a host whose hooks it installed), the hooks run the turn lifecycle: the instructions say
// so, tmcra_turn_prepare/commit answer that hooks handle it, and the default scope is the
// project's of the working directory, as the hooks compute it (unless one is configured). Opens no
// store: the memory and the outbox are opened on first use; background delivery starts at once only
// when an outbox file already exists (pending writes of an earlier run are delivered without
// waiting for the host). Fails, before anything is opened, when the settings are invalid
// (src/config/settings.h); the message names the setting or file and never holds a credential.
Result<App> BuildApp(const AppOptions& app_options = {});

// TMCRA_HOOKS: "claude-code", "codex" or "gemini-cli", else "" (another value is logged and
// ignored).
std::string HooksHost(const config::EnvLookup& env);

// The scope turns go to when a call names none: the configured one (TMCRA_DEFAULT_SCOPE or the
// config's defaultScope); else, with `use_project`, the project of `cwd`; else "personal" for
// the embedded memory (a remote one has no default).
struct ScopeChoice {
  std::string scope;
  bool project = false;  // it is the project's
};
ScopeChoice ChooseScope(const config::Settings& settings, const std::string& cwd,
                        const std::string& home, bool use_project);

}  // namespace tmcra::app
