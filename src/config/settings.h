// The settings of tmcra-mcp: which memory it uses and how it reaches it (docs/contract.md §5,
// docs/reliability.md §4.3 and §4.4). docs/configuration.md is the user-facing description
// of every setting, file and rule implemented here.
//
// Memory mode:
//   * "local"    - a local memory identity is selected: the local binding file
//                  (~/.config/tmcra/local-memory.json) points at an identity file, or the
//                  TMCRA_CONFIG_FILE says `"deploymentMode": "local"`. URL and key come from that
//                  file only (TMCRA_BASE_URL and TMCRA_API_KEY are ignored); http to exactly
//                  127.0.0.1 or [::1] with an explicit port. A broken selection is an error, never
//                  a fallback ("cloud fallback is disabled").
//   * "service"  - otherwise, a credential is configured (TMCRA_API_KEY, else accessToken, else
//                  apiKey in the config file): the hosted Memory API over https.
//   * "embedded" - otherwise: the in-process engine on a SQLite file under TMCRA_DATA_DIR
//                  (default $HOME/.local/share/tmcra). TMCRA_BASE_URL without a credential does
//                  not select a remote memory; `problem` says it was ignored.
//
// Every configuration error is an Error (Errc::kInvalidArgument, not retryable) whose message
// names the setting or file; no message ever contains the credential. The environment is
// injected (EnvLookup) so tests need no global state and never touch the real $HOME.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "filter/content_filter.h"

namespace tmcra::config {

// Looks up an environment variable; std::nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The process environment.
EnvLookup ProcessEnv();

inline constexpr std::string_view kModeEmbedded = "embedded";
inline constexpr std::string_view kModeService = "service";
inline constexpr std::string_view kModeLocal = "local";

struct Settings {
  std::string mode;      // kModeEmbedded, kModeService or kModeLocal
  std::string base_url;  // service/local: validated (url.h), trailing '/' removed; else empty
  std::string api_key;   // SECRET: never in ToJson, messages, logs or argv
  // Where the credential came from: "none", "TMCRA_API_KEY", "config:accessToken" or
  // "config:apiKey".
  std::string credential_source = "none";
  std::optional<std::string> default_scope;     // TMCRA_DEFAULT_SCOPE, config defaultScope
  std::optional<std::string> default_agent_id;  // validated with IsValidAgentId
  std::optional<std::string> integration_id;    // validated with IsValidIntegrationId
  double request_timeout_seconds = 60;          // > 0 and <= 86400
  // The timeout in whole milliseconds for the HTTP client, rounded up (a positive timeout under
  // 1 ms stays positive).
  std::chrono::milliseconds RequestTimeout() const;
  int max_attempts = 3;  // 1..100
  // Credential expiry from the config file's expiresAt (checked against `now` at load only).
  std::optional<std::chrono::system_clock::time_point> expires_at;

  std::string config_path;            // the config file consulted (device, identity or explicit)
  bool config_file_present = false;   // it existed (a missing file reads as {})
  bool config_file_explicit = false;  // TMCRA_CONFIG_FILE gave it: no binding file, no guard
  std::string binding_path;           // the local binding file consulted (empty when explicit)
  bool binding_file_present = false;

  // TLS trust, service mode only: TMCRA_CA_FILE (checked readable), else SSL_CERT_FILE; and
  // SSL_CERT_DIR. Proxy variables are likewise honoured in service mode only (trust_env()).
  std::string ca_file;
  std::string ca_dir;
  // TMCRA_DEBUG_ALLOW_SSLKEYLOGFILE=1: the only way a set SSLKEYLOGFILE is tolerated in a remote
  // mode (otherwise loading fails, so no TLS keys, nor an empty key-log file in local mode, are
  // ever written by accident).
  bool allow_keylog = false;

  // The content filter's rules (docs/privacy.md): TMCRA_REDACT_SECRETS (on/off, also
  // true/false/1/0), else the config's redactSecrets (a boolean); TMCRA_REDACT_EXTRA_PREFIXES
  // and TMCRA_REDACT_ALLOW (comma-separated), else redactExtraPrefixes and redactAllow (arrays
  // of strings). Private spans and recalled memory are always removed.
  filter::FilterRules filter_rules;

  // Recall's word handling in the embedded store (docs/recall.md): TMCRA_RECALL_LANGUAGE, else
  // the config's recallLanguage ("auto", "none" or a Snowball language); TMCRA_RECALL_SYNONYMS
  // (on/off), else recallSynonyms (a boolean).
  std::string recall_language = "auto";
  bool recall_synonyms = true;

  // Semantic recall in the embedded store (docs/recall.md, "Vectors"): the endpoint
  // (TMCRA_EMBEDDINGS_URL, else the config's embeddingsUrl; checked by CheckEmbeddingsUrl), the
  // model (TMCRA_EMBEDDINGS_MODEL / embeddingsModel; required with a URL), a key
  // (TMCRA_EMBEDDINGS_API_KEY / embeddingsApiKey; SECRET, and never a reason to use a remote
  // memory), a CA bundle for https (TMCRA_EMBEDDINGS_CA_FILE / embeddingsCaFile), and the
  // timeout of one request of the embedding thread (TMCRA_EMBEDDINGS_TIMEOUT_SECONDS /
  // embeddingsTimeoutSeconds, default 30; a recall's query waits at most 2 s of it).
  struct Embeddings {
    std::string url;
    std::string model;
    std::string api_key;  // SECRET: never in ToJson, messages, logs or argv
    std::string ca_file;
    double timeout_seconds = 30;
  };
  std::optional<Embeddings> embeddings;

  std::string data_dir;       // embedded data directory ($TMCRA_DATA_DIR, ~/.local/share/tmcra)
  std::string database_path;  // <data_dir>/memory.db
  // The outbox: embedded <data_dir>/outbox.sqlite3; remote $TMCRA_MCP_QUEUE_FILE or
  // ~/.config/tmcra/mcp-queue.sqlite3 (TMCRA's location, so its Python client's queue opens).
  std::string queue_path;

  // Configuration worth telling the user that did not stop loading (e.g. TMCRA_BASE_URL set
  // without a credential), or empty. Several are joined with "; ".
  std::string problem;

  bool remote() const { return mode != kModeEmbedded; }
  // Proxy variables, SSL_CERT_FILE/SSL_CERT_DIR and netrc are honoured only in service mode.
  bool trust_env() const { return mode == kModeService; }

  // For tmcra_status: every setting except the key, plus where the credential came from.
  // Keys: mode, credential, config_file, config_file_present, config_file_explicit,
  // binding_file, binding_file_present, queue_path, and by mode data_dir/database_path
  // (embedded) or endpoint, request_timeout_seconds, max_attempts, expires_at, ca_file, ca_dir
  // (remote); default_scope, default_agent_id, integration_id when set; problem when any.
  nlohmann::json ToJson() const;
};

// Resolves the settings from the environment and the config files (§5.2, §5.3). `now` is the
// time credential expiry is checked against.
Result<Settings> LoadSettings(const EnvLookup& env, std::chrono::system_clock::time_point now);

// The active-connection guard (§5.5), to run before every HTTP attempt: when TMCRA_CONFIG_FILE
// is not set, discovery is run again, and if the selected file now says
// `"deploymentMode": "local"` with another baseUrl or apiKey than `settings` use, it fails with
// "Memory switched to local; restart the MCP host. Previous cloud requests are blocked". It also
// fails when the binding file has become invalid.
Status CheckActiveConnection(const Settings& settings, const EnvLookup& env);

}  // namespace tmcra::config
