// Which memory tmcra-mcp would use, resolved from the environment and the device config file.
//
// This is the first slice of src/config: enough for tmcra_status to tell the user where memory
// lives. The full settings model (precedence, local identity, URL rules, expiry) arrives with the
// remote Memory API client.
//
// Rules: the memory is remote when a credential is configured (TMCRA_API_KEY, or accessToken /
// apiKey in the config file); otherwise it is the embedded engine on a local SQLite file under
// TMCRA_DATA_DIR, default $HOME/.local/share/tmcra (never XDG_*, which Codex does not pass).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tmcra::config {

// Looks up an environment variable; std::nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The process environment.
EnvLookup ProcessEnv();

struct MemoryTarget {
  std::string mode;           // "embedded" or "remote"
  std::string data_dir;       // embedded: the data directory
  std::string database_path;  // embedded: the SQLite file of the engine
  std::string endpoint;       // remote: the API origin, credentials and query removed
  std::string credential;     // "none", or where one was found (never the value)
  std::string config_file;    // the device config file consulted
  bool config_file_present = false;
  std::string problem;        // a configuration problem worth telling the user, or empty

  nlohmann::json ToJson() const;
};

MemoryTarget ResolveMemoryTarget(const EnvLookup& env);

// `url` without userinfo, query or fragment ("https://u:p@h/x?k=v" -> "https://h/x").
std::string RedactUrl(std::string_view url);

}  // namespace tmcra::config
