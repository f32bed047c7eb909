#include "memd/local_identity.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "base/ids.h"
#include "base/private_dirs.h"

namespace tmcra::memd {

namespace {

std::string HomeDir() {
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') return home;
  if (const passwd* pw = getpwuid(getuid()); pw != nullptr && pw->pw_dir != nullptr) {
    return pw->pw_dir;
  }
  return ".";
}

Error SystemError(const std::string& what, const std::string& path) {
  return Error::Unavailable(what + " " + path + ": " + std::strerror(errno));
}

Status WriteAll(int fd, std::string_view content, const std::string& path) {
  while (!content.empty()) {
    const ssize_t n = write(fd, content.data(), content.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError("cannot write", path);
    }
    content.remove_prefix(static_cast<size_t>(n));
  }
  return Ok();
}

}  // namespace

std::string LocalBindingPath() {
  if (const char* env = std::getenv("TMCRA_LOCAL_BINDING_FILE"); env != nullptr && *env != '\0') {
    std::string path = env;
    if (path == "~" || path.rfind("~/", 0) == 0) path = HomeDir() + path.substr(1);
    return path;
  }
  return HomeDir() + "/.config/tmcra/local-memory.json";
}

std::string LocalIdentityPath(const std::string& data_root) {
  return data_root + "/state/" + kLocalProfile + "/secrets/client-plugin.json";
}

std::optional<PreviousIdentity> ReadLocalIdentity(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || text.size() > 64 * 1024) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const auto parsed = nlohmann::json::parse(text, nullptr, false);
  if (!parsed.is_object() || !parsed.contains("apiKey") || !parsed["apiKey"].is_string()) {
    return std::nullopt;
  }
  PreviousIdentity out;
  out.api_key = parsed["apiKey"].get<std::string>();
  if (parsed.contains("baseUrl") && parsed["baseUrl"].is_string()) {
    const std::string url = parsed["baseUrl"].get<std::string>();
    constexpr std::string_view kPrefix = "http://127.0.0.1:";
    if (url.rfind(kPrefix, 0) == 0) {
      const std::string port_text = url.substr(kPrefix.size());
      if (!port_text.empty() && port_text.size() <= 5 &&
          port_text.find_first_not_of("0123456789") == std::string::npos) {
        const int port = std::atoi(port_text.c_str());
        if (port > 0 && port <= 65535) out.port = port;
      }
    }
  }
  return out;
}

nlohmann::ordered_json LocalIdentityJson(int port, const std::string& api_key) {
  nlohmann::ordered_json j;
  j["schemaVersion"] = 2;
  j["authMode"] = "api-key";
  j["baseUrl"] = "http://127.0.0.1:" + std::to_string(port);
  j["apiKey"] = api_key;
  j["tokenType"] = "Bearer";
  j["scopeNamespace"] = "local";
  j["globalScope"] = "local-global";
  j["projectScopePrefix"] = "local-project";
  j["timeoutMs"] = 180000;
  j["defaultScope"] = "personal";
  j["deploymentMode"] = "local";
  j["integrationIds"] = nlohmann::ordered_json::object();
  return j;
}

nlohmann::ordered_json LocalBindingJson(const std::string& data_root) {
  nlohmann::ordered_json j;
  j["schemaVersion"] = 1;
  j["mode"] = "local";
  j["dataRoot"] = data_root;
  j["profile"] = kLocalProfile;
  return j;
}

Status WritePrivateFileAtomic(const std::string& path, std::string_view content) {
  const std::filesystem::path target(path);
  const std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  if (auto s = MakePrivateDirs(dir); !s) return s;
  std::string id = UuidV4();
  const std::string temp = dir + "/." + target.filename().string() + ".tmp-" + id.substr(0, 8);
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return SystemError("cannot create", temp);
  Status written = WriteAll(fd, content, temp);
  if (written && fsync(fd) != 0) written = SystemError("cannot sync", temp);
  close(fd);
  if (written && rename(temp.c_str(), path.c_str()) != 0)
    written = SystemError("cannot rename to", path);
  if (!written) {
    unlink(temp.c_str());
    return written;
  }
  if (const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return Ok();
}

Status WriteLocalFiles(const std::string& data_root, int port, const std::string& api_key,
                       const std::string& binding_path) {
  const std::string identity = LocalIdentityPath(data_root);
  const std::string secrets = std::filesystem::path(identity).parent_path().string();
  if (auto s = MakePrivateDirs(secrets); !s) return s;
  // The directory holds a credential: private whatever it was made with.
  if (chmod(secrets.c_str(), 0700) != 0) return SystemError("cannot chmod", secrets);
  if (auto s = WritePrivateFileAtomic(identity, LocalIdentityJson(port, api_key).dump() + "\n");
      !s) {
    return s;
  }
  return WritePrivateFileAtomic(binding_path, LocalBindingJson(data_root).dump() + "\n");
}

}  // namespace tmcra::memd
