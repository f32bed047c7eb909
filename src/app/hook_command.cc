#include "src/app/hook_command.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/time.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <string>

#include "base/failpoint.h"
#include "src/app/app_wiring.h"
#include "src/hooks/hook_event.h"
#include "src/hooks/hook_runner.h"

namespace tmcra::app {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The most stdin a hook reads: a prompt of 200,000 characters is at most 800 kB, and payloads
// with tool results are larger, but nothing a hook stores comes near this.
constexpr size_t kMaxInputBytes = 16u << 20;
// The most context a hook gives: Claude Code shows a hook's context whole up to about 10,000
// characters and only a short preview of a longer one.
constexpr long long kMaxContextBytes = 9000;
// Work stops this long before the hard deadline, so that the answer is written in time.
constexpr milliseconds kMargin{150};

// Each event's hard deadline, below the `timeout` tmcra-mcp-setup writes for it (10 s; 2 s for
// SessionEnd and Interrupt, which the hosts give 1 to 3 s).
milliseconds DefaultDeadline(hooks::Event event) {
  switch (event) {
    case hooks::Event::kPreCompact:
      return milliseconds(5000);
    case hooks::Event::kSessionEnd:
    case hooks::Event::kInterrupt:
      return milliseconds(800);
    default:
      return milliseconds(2000);
  }
}

std::optional<long long> EnvNumber(const char* name, long long min, long long max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  long long value = 0;
  const char* end = text + std::char_traits<char>::length(text);
  const auto [stop, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || stop != end || value < min || value > max) {
    spdlog::warn("{} must be a whole number from {} to {}; ignored", name, min, max);
    return std::nullopt;
  }
  return value;
}

bool EnvFlag(const char* name) {
  const char* text = std::getenv(name);
  return text != nullptr && (std::string_view(text) == "1" || std::string_view(text) == "true");
}

// Set while the host (Gemini CLI) is owed one JSON object on stdout and none was written: a
// hook that ends without output has its stderr shown to the user there.
volatile sig_atomic_t g_owes_json = 0;

// Writes `{}` when the host is owed a JSON object (async-signal-safe).
void PayJsonDebt() {
  if (g_owes_json == 0) return;
  g_owes_json = 0;
  ssize_t ignored = write(1, "{}", 2);
  (void)ignored;
}

extern "C" void ExitAtDeadline(int) {
  PayJsonDebt();
  _exit(0);
}

void SetTimer(milliseconds after);

// The hard deadline: SIGALRM ends the process silently, whatever it is doing. The stores are
// crash-safe (SQLite with a write-ahead log), so this is no worse than SIGKILL.
void ArmDeadline(milliseconds deadline) {
  struct sigaction action {};
  action.sa_handler = ExitAtDeadline;
  sigemptyset(&action.sa_mask);
  sigaction(SIGALRM, &action, nullptr);
  SetTimer(deadline);
}

void SetTimer(milliseconds after) {
  itimerval timer{};
  timer.it_value.tv_sec = static_cast<time_t>(after.count() / 1000);
  timer.it_value.tv_usec = static_cast<suseconds_t>((after.count() % 1000) * 1000);
  setitimer(ITIMER_REAL, &timer, nullptr);
}

// Writes the whole answer with the deadline stopped (a signal mask would hold it off for this
// thread only), so the host never reads half of it; then the deadline runs again for what is
// left of the budget (at least 100 ms, to finish and close the stores).
void WriteAnswer(const std::string& text, Clock::time_point hard_deadline) {
  if (text.empty()) return;
  SetTimer(milliseconds(0));
  g_owes_json = 0;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(1, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const auto left = std::chrono::duration_cast<milliseconds>(hard_deadline - Clock::now());
  SetTimer(std::max(left, milliseconds(100)));
}

std::optional<std::string> ReadStdin() {
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(0, buffer, sizeof buffer);
    if (n == 0) return text;
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxInputBytes) return std::nullopt;
  }
}

std::string HomeDir() {
  const char* home = std::getenv("HOME");
  return home != nullptr ? std::string(home) : std::string();
}

std::string CurrentDir() {
  char buffer[4096];
  return getcwd(buffer, sizeof buffer) != nullptr ? std::string(buffer) : std::string();
}

// The hook's options: scopes from the settings and the payload's cwd, caps from the environment.
Result<hooks::HookOptions> Options(const hooks::HookInput& input, const config::Settings& settings,
                                   Clock::time_point deadline) {
  const std::string cwd = input.cwd.empty() ? CurrentDir() : input.cwd;
  const ScopeChoice scope = ChooseScope(settings, cwd, HomeDir(), /*use_project=*/true);
  if (scope.scope.empty()) {
    return Error::Invalid(
        "no scope: set TMCRA_DEFAULT_SCOPE for a remote memory outside a project");
  }
  hooks::HookOptions options;
  options.store_scope = scope.scope;
  options.recall_scopes = {scope.scope};
  // Memory stored before the project scope existed stays in reach.
  if (scope.project && !settings.remote()) options.recall_scopes.push_back("personal");
  if (auto bytes = EnvNumber("TMCRA_HOOK_CONTEXT_BYTES", 0, kMaxContextBytes)) {
    options.context_bytes = static_cast<size_t>(*bytes);
  }
  if (auto chars = EnvNumber("TMCRA_HOOK_MIN_PROMPT_CHARS", 0, 100000)) {
    options.min_prompt_chars = static_cast<size_t>(*chars);
  }
  options.session_brief = EnvFlag("TMCRA_HOOK_SESSION_BRIEF");
  // Installing the PostToolUse hook (setup's --observe-tools) is the opt-in; the variable can
  // turn an installed one off.
  const char* observe = std::getenv("TMCRA_HOOK_OBSERVE_TOOLS");
  options.observe_tools = observe == nullptr || std::string_view(observe) != "0";
  options.deadline = deadline;
  return options;
}

struct Invocation {
  hooks::Event event;
  hooks::Host host = hooks::Host::kClaudeCode;
};

// The host the arguments name (`--host NAME`, also where the event is missing); Claude Code when
// they name none or no known one.
hooks::Host NamedHost(const std::vector<std::string_view>& args) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--host")
      return hooks::ParseHost(args[i + 1]).value_or(hooks::Host::kClaudeCode);
  }
  return hooks::Host::kClaudeCode;
}

std::optional<Invocation> ParseArgs(const std::vector<std::string_view>& args) {
  if (args.empty()) return std::nullopt;
  for (size_t i = 1; i < args.size(); i += 2) {
    if (args[i] != "--host" || i + 1 >= args.size() || !hooks::ParseHost(args[i + 1])) {
      return std::nullopt;
    }
  }
  const hooks::Host host = NamedHost(args);
  auto event = hooks::ParseEventName(args[0], host);
  if (!event) return std::nullopt;
  return Invocation{*event, host};
}

// The event's work, with every failure a logged line. The answer is written as soon as it is
// known, before the stores are closed.
void RunEvent(const Invocation& call, Clock::time_point start, milliseconds budget) {
  const Clock::time_point hard_deadline = start + budget;
  const Clock::time_point deadline = hard_deadline - kMargin;
  const char* event = hooks::EventName(call.event, call.host);
  auto text = ReadStdin();
  if (!text) {
    spdlog::warn("hook {}: stdin could not be read or is over {} bytes; nothing done", event,
                 kMaxInputBytes);
    return;
  }
  TMCRA_FAILPOINT_STALL("hook.stall");
  auto input = hooks::ParseHookInput(call.host, call.event, *text);
  if (!input) {
    spdlog::warn("hook {}: {}; nothing done", event, input.error().message);
    return;
  }
  AppOptions app_options;
  app_options.background_delivery = false;
  app_options.request_timeout = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  auto app = BuildApp(app_options);
  if (!app) {
    spdlog::warn("hook {}: {}; nothing done", event, app.error().message);
    return;
  }
  auto options = Options(*input, app->settings, deadline);
  if (!options) {
    spdlog::warn("hook {}: {}; nothing done", event, options.error().message);
    return;
  }
  hooks::HookDeps deps{app->tool_deps, *options};
  auto answer = hooks::RunHook(*input, deps);
  if (!answer) {
    spdlog::warn("hook {}: {}", event, answer.error().message);
    return;
  }
  WriteAnswer(answer->output, hard_deadline);
  hooks::RecordGiven(*answer, deps);
}

}  // namespace

int RunHookCommand(const std::vector<std::string_view>& args) {
  const Clock::time_point start = Clock::now();
  // Gemini CLI takes a hook's stdout as JSON, and shows its stderr when the stdout is empty.
  g_owes_json = NamedHost(args) == hooks::Host::kGeminiCli ? 1 : 0;
  auto call = ParseArgs(args);
  if (!call) {
    std::fprintf(stderr,
                 "usage: tmcra-mcp hook EVENT [--host claude-code|codex|gemini-cli]\n"
                 "EVENT: SessionStart, UserPromptSubmit, Stop, StopFailure, SubagentStart, "
                 "SubagentStop, PreCompact, PostCompact, SessionEnd, Interrupt, PostToolUse\n"
                 "EVENT for gemini-cli: SessionStart, BeforeAgent, AfterAgent, SessionEnd, "
                 "AfterTool\n");
    PayJsonDebt();
    return 0;  // a host must never see a hook fail
  }
  milliseconds budget = DefaultDeadline(call->event);
  if (auto ms = EnvNumber("TMCRA_HOOK_DEADLINE_MS", 200, 60000)) budget = milliseconds(*ms);
  ArmDeadline(budget);
  try {
    RunEvent(*call, start, budget);
  } catch (const std::exception& e) {
    spdlog::error("hook {}: {}", hooks::EventName(call->event, call->host), e.what());
  }
  if (g_owes_json != 0) WriteAnswer("{}", start + budget);
  return 0;
}

int RunStatusline() {
  ArmDeadline(milliseconds(1500));
  (void)ReadStdin();  // Claude Code's session JSON: not needed
  std::string line = "tmcra: ";
  try {
    AppOptions app_options;
    app_options.background_delivery = false;
    app_options.request_timeout = milliseconds(1000);
    auto app = BuildApp(app_options);
    if (!app) {
      WriteAnswer("tmcra: configuration problem (see tmcra-mcp-setup status)\n",
                  Clock::now() + milliseconds(500));
      return 0;
    }
    const bool ready = static_cast<bool>(app->memory->Ready());
    line += ready ? "memory ok" : "memory unreachable";
    if (auto outbox = app->delivery->outbox()) {
      if (auto counts = (*outbox)->GetCounts()) {
        const int64_t queued = counts->pending + counts->submitted;
        if (queued > 0) line += " · " + std::to_string(queued) + " queued";
        if (counts->dead_letter > 0)
          line += " · " + std::to_string(counts->dead_letter) + " failed";
      }
      if (auto note = (*outbox)->GetNote(std::string(tools::kLastRecallNote));
          note && note->is_object()) {
        line += " · last prompt: " + std::to_string(note->value("given_blocks", 0)) +
                " memories (" + std::to_string(note->value("bytes", 0)) + " B)";
      }
    }
  } catch (const std::exception& e) {
    line += "error";
  }
  WriteAnswer(line + "\n", Clock::now() + milliseconds(500));
  return 0;
}

}  // namespace tmcra::app
