// `tmcra-memd serve --local`: the two files that point tmcra-mcp (and TMCRA's plugins) at this
// server, exactly as TMCRA's local installer writes them (docs/contract.md §5.6):
//
//   binding   $TMCRA_LOCAL_BINDING_FILE or ~/.config/tmcra/local-memory.json
//             {"schemaVersion":1,"mode":"local","dataRoot":"<abs data dir>","profile":"lite-cpu"}
//   identity  <dataRoot>/state/lite-cpu/secrets/client-plugin.json
//             {"schemaVersion":2,"authMode":"api-key","baseUrl":"http://127.0.0.1:<port>",
//              "apiKey":"tmcra_<id>.<secret>","tokenType":"Bearer","scopeNamespace":"local",
//              "globalScope":"local-global","projectScopePrefix":"local-project",
//              "timeoutMs":180000,"defaultScope":"personal","deploymentMode":"local",
//              "integrationIds":{}}
//
// Both are written atomically (a 0600 temporary file in the same directory, fsync, rename,
// fsync of the directory); missing directories are created 0700 and the secrets directory is
// made 0700 whatever it was.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tmcra::memd {

inline constexpr const char* kLocalProfile = "lite-cpu";

// $TMCRA_LOCAL_BINDING_FILE (a leading "~/" is the home directory), else
// $HOME/.config/tmcra/local-memory.json (the passwd entry's home when HOME is unset).
std::string LocalBindingPath();
// <data_root>/state/lite-cpu/secrets/client-plugin.json
std::string LocalIdentityPath(const std::string& data_root);

// What an identity file written before holds, when it can be read and looks like ours.
struct PreviousIdentity {
  std::optional<int> port;  // from baseUrl http://127.0.0.1:<port>
  std::string api_key;
};
std::optional<PreviousIdentity> ReadLocalIdentity(const std::string& path);

nlohmann::ordered_json LocalIdentityJson(int port, const std::string& api_key);
nlohmann::ordered_json LocalBindingJson(const std::string& data_root);

// `content` into `path`, atomically, mode 0600; creates missing parent directories 0700.
[[nodiscard]] Status WritePrivateFileAtomic(const std::string& path, std::string_view content);

// Writes the identity, then the binding.
[[nodiscard]] Status WriteLocalFiles(const std::string& data_root, int port,
                                     const std::string& api_key, const std::string& binding_path);

}  // namespace tmcra::memd
