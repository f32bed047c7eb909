#include "src/config/memory_target.h"
#include "src/common/utf8.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tmcra::config {

namespace {

using json = nlohmann::json;

constexpr std::string_view kDefaultBaseUrl = "https://api.tmcra.com";

std::string NonBlank(const EnvLookup& env, const char* name) {
  auto value = env(name);
  return value ? Trim(*value) : std::string();
}

std::string ExpandHome(const std::string& path, const std::string& home) {
  if (path == "~") return home;
  if (path.rfind("~/", 0) == 0) return home + path.substr(1);
  return path;
}

std::string StringField(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? Trim(it->get<std::string>()) : std::string();
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::string RedactUrl(std::string_view url) {
  std::string out(url);
  if (auto cut = out.find_first_of("?#"); cut != std::string::npos) out.resize(cut);
  const auto scheme_end = out.find("://");
  const size_t authority = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const auto path_start = out.find('/', authority);
  const auto at = out.rfind('@', path_start == std::string::npos ? out.size() : path_start);
  if (at != std::string::npos && at >= authority) out.erase(authority, at - authority + 1);
  return out;
}

MemoryTarget ResolveMemoryTarget(const EnvLookup& env) {
  MemoryTarget target;
  std::string home = NonBlank(env, "HOME");
  if (home.empty()) {
    char cwd[4096];
    home = getcwd(cwd, sizeof cwd) != nullptr ? cwd : ".";
  }

  const std::string explicit_file = NonBlank(env, "TMCRA_CONFIG_FILE");
  target.config_file = explicit_file.empty() ? home + "/.config/tmcra/config.json"
                                             : ExpandHome(explicit_file, home);
  json config = json::object();
  if (std::ifstream in(target.config_file); in) {
    target.config_file_present = true;
    std::stringstream text;
    text << in.rdbuf();
    config = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) {
      target.problem = "the config file is not a JSON object: " + target.config_file;
      config = json::object();
    }
  }

  std::string credential_source;
  if (!NonBlank(env, "TMCRA_API_KEY").empty()) {
    credential_source = "TMCRA_API_KEY";
  } else if (!StringField(config, "accessToken").empty()) {
    credential_source = "config file (accessToken)";
  } else if (!StringField(config, "apiKey").empty()) {
    credential_source = "config file (apiKey)";
  }

  if (!credential_source.empty()) {
    target.mode = "remote";
    target.credential = credential_source;
    std::string base = NonBlank(env, "TMCRA_BASE_URL");
    if (base.empty()) base = StringField(config, "baseUrl");
    if (base.empty()) base = kDefaultBaseUrl;
    while (!base.empty() && base.back() == '/') base.pop_back();
    target.endpoint = RedactUrl(base);
    return target;
  }

  target.mode = "embedded";
  target.credential = "none";
  const std::string data_dir = NonBlank(env, "TMCRA_DATA_DIR");
  target.data_dir = data_dir.empty() ? home + "/.local/share/tmcra" : ExpandHome(data_dir, home);
  target.database_path = target.data_dir + "/memory.db";
  return target;
}

json MemoryTarget::ToJson() const {
  json out{{"mode", mode}, {"credential", credential}, {"config_file", config_file},
           {"config_file_present", config_file_present}};
  if (mode == "embedded") {
    out["data_dir"] = data_dir;
    out["database_path"] = database_path;
  } else {
    out["endpoint"] = endpoint;
  }
  if (!problem.empty()) out["problem"] = problem;
  return out;
}

}  // namespace tmcra::config
