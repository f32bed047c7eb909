// Helpers for the config tests: an injected environment over a temporary $HOME, and files
// written with an exact mode (umask does not apply).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "src/config/settings.h"
#include "tests/support/temp_dir.h"

namespace tmcra::testing {

// mkdir -p with mode 0700 for every directory created.
inline void MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      const std::string part = path.substr(0, i);
      if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
        throw std::runtime_error("mkdir failed: " + part);
      }
    }
  }
}

// Writes `text` to `path` (creating its directories 0700) and sets exactly `mode`.
inline void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0600) {
  MakeDirs(path.substr(0, path.rfind('/')));
  unlink(path.c_str());  // a fresh file, even where the old one was read-only
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("open failed: " + path);
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  fchmod(fd, mode) == 0;
  close(fd);
  if (!ok) throw std::runtime_error("write failed: " + path);
}

// A temporary $HOME and an environment that holds only what a test sets.
class ConfigFixture {
 public:
  ConfigFixture() { vars_["HOME"] = home_.path(); }

  const std::string& home() const { return home_.path(); }
  std::string DeviceConfig() const { return home() + "/.config/tmcra/config.json"; }
  std::string Binding() const { return home() + "/.config/tmcra/local-memory.json"; }
  std::string DataRoot() const { return home() + "/local-root"; }
  std::string Identity(const std::string& profile = "lite-cpu") const {
    return DataRoot() + "/state/" + profile + "/secrets/client-plugin.json";
  }

  void Set(const std::string& name, const std::string& value) { vars_[name] = value; }
  void Unset(const std::string& name) { vars_.erase(name); }

  // Writes the installer's binding and, when `identity` is given, the identity file.
  void InstallLocal(const std::optional<std::string>& identity,
                    const std::string& profile = "lite-cpu") {
    WriteFile(Binding(),
              R"({"schemaVersion":1,"mode":"local","dataRoot":")" + DataRoot() +
                  R"(","profile":")" + profile + R"("})",
              0644);
    if (identity) WriteFile(Identity(profile), *identity);
  }

  config::EnvLookup Env() const {
    return [vars = vars_](const char* name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }

 private:
  TempDir home_;
  std::map<std::string, std::string> vars_;
};

}  // namespace tmcra::testing
