#include "setup/setup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "setup/config_file.h"

namespace tmcra::setup {
namespace {

// Every variable tmcra-mcp reads (docs/configuration.md), and the TLS and proxy ones libcurl
// honours for a remote memory.
const std::vector<std::string>& PassedVariables() {
  static const std::vector<std::string> names = {"TMCRA_API_KEY",
                                                 "TMCRA_BASE_URL",
                                                 "TMCRA_CONFIG_FILE",
                                                 "TMCRA_LOCAL_BINDING_FILE",
                                                 "TMCRA_DATA_DIR",
                                                 "TMCRA_MCP_QUEUE_FILE",
                                                 "TMCRA_MEMORY_STATE_DIR",
                                                 "TMCRA_DEFAULT_SCOPE",
                                                 "TMCRA_AGENT_ID",
                                                 "TMCRA_INTEGRATION_ID",
                                                 "TMCRA_LOG_LEVEL",
                                                 "TMCRA_REQUEST_TIMEOUT_SECONDS",
                                                 "TMCRA_MAX_ATTEMPTS",
                                                 "TMCRA_REDACT_SECRETS",
                                                 "TMCRA_REDACT_EXTRA_PREFIXES",
                                                 "TMCRA_REDACT_ALLOW",
                                                 "TMCRA_CA_FILE",
                                                 "TMCRA_CONFIRMATION_TIMEOUT_MS",
                                                 "SSL_CERT_FILE",
                                                 "SSL_CERT_DIR",
                                                 "HTTPS_PROXY",
                                                 "NO_PROXY"};
  return names;
}

std::string Describe(EditOutcome outcome, const HostTarget& target, const std::string& name,
                     bool created, bool dry_run) {
  const std::string would = dry_run ? "would be " : "";
  switch (outcome) {
    case EditOutcome::kAdded:
      return name + " " + would + "registered in " + target.path +
             (created ? (dry_run ? " (a new file)" : " (created)") : "");
    case EditOutcome::kUpdated:
      return name + " " + would + "updated in " + target.path;
    case EditOutcome::kUnchanged:
      return name + " is already registered in " + target.path + "; nothing changed";
    case EditOutcome::kRemoved:
      return name + " " + would + "removed from " + target.path;
    case EditOutcome::kAbsent:
      return name + " is not registered in " + target.path + "; nothing changed";
  }
  return {};
}

template <class Edit>
HostReport Change(const HostTarget& target, const std::string& name, bool dry_run,
                  std::chrono::system_clock::time_point now, Edit edit, std::string snippet) {
  HostReport report;
  auto file = ReadConfigFile(target.path);
  if (!file) {
    report.message = file.error().message;
    return report;
  }
  auto edited = edit(file->text);
  if (!edited) {
    report.message = target.path + " " + edited.error().message +
                     (snippet.empty() ? "; remove the entry by hand"
                                      : "; nothing changed, add the entry by hand");
    report.snippet = std::move(snippet);
    return report;
  }
  report.ok = true;
  const bool changes =
      edited->outcome != EditOutcome::kUnchanged && edited->outcome != EditOutcome::kAbsent;
  report.changed = changes;
  if (changes) {
    if (auto s = CheckReplaceable(*file); !s) {
      report.ok = false;
      report.changed = false;
      report.message = s.error().message + "; nothing changed";
      return report;
    }
  }
  if (changes && !dry_run) {
    auto written = WriteConfigFile(*file, edited->text, now);
    if (!written) {
      report.ok = false;
      report.message = written.error().message;
      return report;
    }
    report.backup_path = written->backup_path;
  }
  report.message = Describe(edited->outcome, target, name, !file->exists, dry_run);
  if (file->real_path != file->path && changes) {
    report.message += " (through its link, in " + file->real_path + ")";
  }
  return report;
}

}  // namespace

ServerEntry EntryFor(const HostTarget& target, std::string name, std::string command) {
  ServerEntry entry;
  entry.name = std::move(name);
  entry.command = std::move(command);
  entry.typed = target.typed;
  if (target.format == ConfigFormat::kCodexToml) {
    entry.env_vars = PassedVariables();
    entry.tool_timeout_sec = 180;
  }
  return entry;
}

HostReport Install(const HostTarget& target, const ServerEntry& entry, bool dry_run,
                   std::chrono::system_clock::time_point now) {
  return Change(
      target, entry.name, dry_run, now,
      [&](const std::string& text) { return AddServer(text, target.format, entry); },
      EntrySnippet(target.format, entry));
}

HostReport Remove(const HostTarget& target, std::string_view name, bool dry_run,
                  std::chrono::system_clock::time_point now) {
  return Change(
      target, std::string(name), dry_run, now,
      [&](const std::string& text) { return RemoveServer(text, target.format, name); }, "");
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

HostStatus Inspect(const HostTarget& target, std::string_view name, std::string_view our_command) {
  HostStatus status;
  auto file = ReadConfigFile(target.path);
  if (!file) {
    status.state = "unreadable";
    status.detail = file.error().message;
    return status;
  }
  if (!file->exists) {
    status.state = "no config file";
    return status;
  }
  auto reg = FindServer(file->text, target.format, name);
  if (!reg) {
    status.state = "unreadable";
    status.detail = target.path + " " + reg.error().message;
    return status;
  }
  if (!reg->present) {
    status.state = "not registered";
    return status;
  }
  status.state = "registered";
  status.command = reg->command;
  if (reg->command) {
    status.command_is_ours = *reg->command == our_command;
    status.command_runs = IsExecutableFile(*reg->command);
  }
  return status;
}

}  // namespace tmcra::setup
