#include "src/config/settings.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <vector>

#include "base/clock.h"
#include "base/identifiers.h"
#include "base/utf8.h"
#include "src/config/private_file.h"
#include "src/config/url.h"

namespace tmcra::config {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::system_clock;

constexpr double kMaxTimeoutSeconds = 86400;
constexpr long kMaxAttempts = 100;

std::string NonBlank(const EnvLookup& env, const char* name) {
  auto value = env(name);
  return value ? Trim(*value) : std::string();
}

std::string ExpandHome(const std::string& path, const std::string& home) {
  if (path == "~") return home;
  if (path.rfind("~/", 0) == 0) return home + path.substr(1);
  return path;
}

std::string Home(const EnvLookup& env) {
  std::string home = NonBlank(env, "HOME");
  if (home.empty()) {
    char cwd[4096];
    home = getcwd(cwd, sizeof cwd) != nullptr ? cwd : ".";
  }
  return home;
}

// A string field, trimmed; empty when absent or not a string.
std::string StringField(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? Trim(it->get<std::string>()) : std::string();
}

bool IsLocal(const json& config) {
  auto it = config.find("deploymentMode");
  return it != config.end() && it->is_string() && it->get<std::string>() == "local";
}

// Python truthiness of a JSON value.
bool Truthy(const json& value) {
  if (value.is_null()) return false;
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number()) return value.get<double>() != 0;
  if (value.is_string()) return !value.get<std::string>().empty();
  return !value.empty();
}

Result<json> ParseConfig(const std::string& text, const std::string& path) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return Error::Invalid("TMCRA config is unreadable: " + path + " (not valid JSON)");
  }
  if (!parsed.is_object()) {
    return Error::Invalid("TMCRA config must contain a JSON object: " + path);
  }
  return parsed;
}

// What config-file discovery (§5.2) selected, with the selected file's content.
struct Discovery {
  std::string config_path;
  bool config_explicit = false;
  bool config_present = false;
  json config = json::object();
  std::string binding_path;
  bool binding_present = false;
};

// The identity file a local binding selects, or why the binding is invalid.
Result<std::string> IdentityPath(const std::string& binding_path, const std::string& text) {
  const auto invalid = [&](std::string_view why) {
    return Error::Invalid("Invalid local memory selection in " + binding_path + " (" +
                          std::string(why) + "); cloud fallback is disabled");
  };
  const json binding = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!binding.is_object()) return invalid("it is not a JSON object");
  const auto version = binding.find("schemaVersion");
  if (version == binding.end() || !version->is_number() || version->get<double>() != 1) {
    return invalid("schemaVersion must be 1");
  }
  const auto mode = binding.find("mode");
  if (mode == binding.end() || !mode->is_string() || mode->get<std::string>() != "local") {
    return invalid("mode must be \"local\"");
  }
  const auto root = binding.find("dataRoot");
  if (root == binding.end() || !root->is_string() || root->get<std::string>().empty() ||
      root->get<std::string>().front() != '/') {
    return invalid("dataRoot must be an absolute path");
  }
  const auto profile = binding.find("profile");
  if (profile == binding.end() || !profile->is_string() ||
      (profile->get<std::string>() != "lite-cpu" && profile->get<std::string>() != "balanced-bge" &&
       profile->get<std::string>() != "quality-qwen")) {
    return invalid("profile must be lite-cpu, balanced-bge or quality-qwen");
  }
  std::string data_root = root->get<std::string>();
  while (data_root.size() > 1 && data_root.back() == '/') data_root.pop_back();
  if (data_root == "/") data_root.clear();
  return data_root + "/state/" + profile->get<std::string>() + "/secrets/client-plugin.json";
}

Result<Discovery> Discover(const EnvLookup& env) {
  Discovery d;
  const std::string home = Home(env);
  const std::string explicit_file = NonBlank(env, "TMCRA_CONFIG_FILE");
  if (!explicit_file.empty()) {
    d.config_path = ExpandHome(explicit_file, home);
    d.config_explicit = true;
  } else {
    const std::string binding = NonBlank(env, "TMCRA_LOCAL_BINDING_FILE");
    d.binding_path =
        binding.empty() ? home + "/.config/tmcra/local-memory.json" : ExpandHome(binding, home);
    auto binding_text = ReadPrivateFile(d.binding_path, FileSecrecy::kIntegrity);
    if (!binding_text) return binding_text.error();
    if (*binding_text) {
      d.binding_present = true;
      auto identity = IdentityPath(d.binding_path, **binding_text);
      if (!identity) return identity.error();
      const std::string not_ready =
          "Selected local memory installation is not configured yet; cloud fallback is "
          "disabled (" +
          *identity;
      auto identity_text = ReadPrivateFile(*identity, FileSecrecy::kSecret);
      if (!identity_text) return identity_text.error();
      if (!*identity_text) return Error::Invalid(not_ready + " does not exist)");
      auto config = ParseConfig(**identity_text, *identity);
      if (!config) return config.error();
      if (!IsLocal(*config)) {
        return Error::Invalid(not_ready + " does not say \"deploymentMode\": \"local\")");
      }
      d.config_path = *identity;
      d.config_present = true;
      d.config = std::move(*config);
      return d;
    }
    d.config_path = home + "/.config/tmcra/config.json";
  }
  auto text = ReadPrivateFile(d.config_path, FileSecrecy::kSecret);
  if (!text) return text.error();
  if (*text) {
    auto config = ParseConfig(**text, d.config_path);
    if (!config) return config.error();
    d.config_present = true;
    d.config = std::move(*config);
  }
  return d;
}

// Python's float() for the values we accept: optional sign, decimal or exponent notation.
std::optional<double> ParseDouble(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || text.front() == '+') return std::nullopt;
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Python's int() for the values we accept: optional sign and decimal digits.
std::optional<long> ParseInteger(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (end != text.data() + text.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) return text.front() == '-' ? -1 : kMaxAttempts + 1;
  if (ec != std::errc()) return std::nullopt;
  return value;
}

Status CheckTimeout(double seconds, const std::string& setting) {
  if (!std::isfinite(seconds)) return Error::Invalid(setting + " must be a number");
  if (seconds <= 0) return Error::Invalid(setting + " must be positive");
  if (seconds > kMaxTimeoutSeconds) {
    return Error::Invalid(setting + " must be at most 86400 seconds");
  }
  return Ok();
}

Result<double> ResolveTimeout(const EnvLookup& env, const json& config,
                              const std::string& in_file) {
  if (const std::string text = NonBlank(env, "TMCRA_REQUEST_TIMEOUT_SECONDS"); !text.empty()) {
    const auto seconds = ParseDouble(text);
    if (!seconds) return Error::Invalid("TMCRA_REQUEST_TIMEOUT_SECONDS must be a number");
    if (auto ok = CheckTimeout(*seconds, "TMCRA_REQUEST_TIMEOUT_SECONDS"); !ok) return ok.error();
    return *seconds;
  }
  const auto it = config.find("timeoutMs");
  if (it == config.end() || it->is_null()) return 60.0;
  const std::string setting = "timeoutMs " + in_file;
  std::optional<double> ms;
  if (it->is_number()) ms = it->get<double>();
  if (it->is_string()) ms = ParseDouble(Trim(it->get<std::string>()));
  if (!ms) return Error::Invalid(setting + " must be a number");
  if (auto ok = CheckTimeout(*ms / 1000, setting); !ok) return ok.error();
  return *ms / 1000;
}

Result<int> ResolveAttempts(const EnvLookup& env) {
  const std::string text = NonBlank(env, "TMCRA_MAX_ATTEMPTS");
  if (text.empty()) return 3;
  const auto value = ParseInteger(text);
  if (!value) return Error::Invalid("TMCRA_MAX_ATTEMPTS must be an integer");
  if (*value <= 0) return Error::Invalid("TMCRA_MAX_ATTEMPTS must be positive");
  if (*value > kMaxAttempts) return Error::Invalid("TMCRA_MAX_ATTEMPTS must be at most 100");
  return static_cast<int>(*value);
}

// A comma-separated list, blanks around each item dropped, empty items skipped.
std::vector<std::string> SplitList(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string item = Trim(std::string(text.substr(0, comma)));
    if (!item.empty()) out.push_back(std::move(item));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

// TMCRA_<name> (a comma-separated list), else the config's array of strings `key`.
Result<std::vector<std::string>> ResolveList(const EnvLookup& env, const char* variable,
                                             const json& config, const char* key,
                                             const std::string& in_file) {
  if (std::string text = NonBlank(env, variable); !text.empty()) return SplitList(text);
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::vector<std::string>{};
  const auto invalid = [&] {
    return Error::Invalid(std::string(key) + " " + in_file + " must be an array of strings");
  };
  if (!it->is_array()) return invalid();
  std::vector<std::string> out;
  for (const auto& v : *it) {
    if (!v.is_string()) return invalid();
    std::string item = Trim(v.get<std::string>());
    if (!item.empty()) out.push_back(std::move(item));
  }
  return out;
}

// On/off in an environment variable (also true/false/1/0), else a boolean in the config file;
// `fallback` when neither is set.
Result<bool> ResolveSwitch(const EnvLookup& env, const char* variable, const json& config,
                           const char* key, const std::string& in_file, bool fallback) {
  if (std::string text = NonBlank(env, variable); !text.empty()) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (text == "on" || text == "true" || text == "1") return true;
    if (text == "off" || text == "false" || text == "0") return false;
    return Error::Invalid(std::string(variable) + " must be on or off");
  }
  if (auto it = config.find(key); it != config.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return Error::Invalid(std::string(key) + " " + in_file + " must be true or false");
    }
    return it->get<bool>();
  }
  return fallback;
}

// Recall's language and synonyms (Settings::recall_language, recall_synonyms).
Status ResolveRecall(const EnvLookup& env, const json& config, const std::string& in_file,
                     Settings& s) {
  std::string language = NonBlank(env, "TMCRA_RECALL_LANGUAGE");
  if (language.empty()) {
    if (auto it = config.find("recallLanguage"); it != config.end() && !it->is_null()) {
      if (!it->is_string()) {
        return Error::Invalid("recallLanguage " + in_file + " must be a string");
      }
      language = it->get<std::string>();
    }
  }
  if (!language.empty()) {
    // The engine checks the name against its Snowball languages when it opens the store.
    if (!std::all_of(language.begin(), language.end(),
                     [](char c) { return c >= 'a' && c <= 'z'; })) {
      return Error::Invalid(
          "the recall language must be auto, none or a Snowball language in "
          "lower case (e.g. english, german)");
    }
    s.recall_language = language;
  }
  TMCRA_ASSIGN_OR_RETURN(s.recall_synonyms, ResolveSwitch(env, "TMCRA_RECALL_SYNONYMS", config,
                                                          "recallSynonyms", in_file, true));
  return Ok();
}

// A setting as text: the environment variable, else the config's member (a string, or a
// number as written), else "".
Result<std::string> ResolveString(const EnvLookup& env, const char* variable, const json& config,
                                  const char* member, const std::string& in_file) {
  if (std::string value = NonBlank(env, variable); !value.empty()) return value;
  auto it = config.find(member);
  if (it == config.end() || it->is_null()) return std::string();
  if (it->is_number()) return it->dump();
  if (!it->is_string())
    return Error::Invalid(std::string(member) + " " + in_file + " must be a string");
  return it->get<std::string>();
}

// The embeddings service's settings (Settings::embeddings); none without a URL.
Status ResolveEmbeddings(const EnvLookup& env, const json& config, const std::string& in_file,
                         Settings& s) {
  Settings::Embeddings e;
  TMCRA_ASSIGN_OR_RETURN(
      e.url, ResolveString(env, "TMCRA_EMBEDDINGS_URL", config, "embeddingsUrl", in_file));
  TMCRA_ASSIGN_OR_RETURN(
      e.model, ResolveString(env, "TMCRA_EMBEDDINGS_MODEL", config, "embeddingsModel", in_file));
  TMCRA_ASSIGN_OR_RETURN(e.api_key, ResolveString(env, "TMCRA_EMBEDDINGS_API_KEY", config,
                                                  "embeddingsApiKey", in_file));
  TMCRA_ASSIGN_OR_RETURN(e.ca_file, ResolveString(env, "TMCRA_EMBEDDINGS_CA_FILE", config,
                                                  "embeddingsCaFile", in_file));
  TMCRA_ASSIGN_OR_RETURN(const std::string timeout,
                         ResolveString(env, "TMCRA_EMBEDDINGS_TIMEOUT_SECONDS", config,
                                       "embeddingsTimeoutSeconds", in_file));
  if (!timeout.empty()) {
    const auto seconds = ParseDouble(timeout);
    if (!seconds || *seconds <= 0 || *seconds > 3600) {
      return Error::Invalid(
          "TMCRA_EMBEDDINGS_TIMEOUT_SECONDS (embeddingsTimeoutSeconds) must be a number of "
          "seconds above 0 and at most 3600");
    }
    e.timeout_seconds = *seconds;
  }
  if (e.url.empty()) {
    if (!e.model.empty())
      return Error::Invalid(
          "TMCRA_EMBEDDINGS_MODEL (embeddingsModel) is set without TMCRA_EMBEDDINGS_URL "
          "(embeddingsUrl)");
    return Ok();
  }
  while (!e.url.empty() && e.url.back() == '/') e.url.pop_back();
  if (auto api = CheckEmbeddingsUrl(e.url, "TMCRA_EMBEDDINGS_URL (embeddingsUrl)"); !api) {
    return api.error();
  }
  if (e.model.empty())
    return Error::Invalid(
        "TMCRA_EMBEDDINGS_URL (embeddingsUrl) is set without TMCRA_EMBEDDINGS_MODEL "
        "(embeddingsModel)");
  if (e.api_key.find_first_of("\r\n") != std::string::npos)
    return Error::Invalid("TMCRA_EMBEDDINGS_API_KEY (embeddingsApiKey) must be one line");
  s.embeddings = std::move(e);
  return Ok();
}

Result<filter::FilterRules> ResolveFilterRules(const EnvLookup& env, const json& config,
                                               const std::string& in_file) {
  filter::FilterRules rules;
  TMCRA_ASSIGN_OR_RETURN(rules.redact_secrets,
                         ResolveSwitch(env, "TMCRA_REDACT_SECRETS", config, "redactSecrets",
                                       in_file, rules.redact_secrets));
  auto prefixes =
      ResolveList(env, "TMCRA_REDACT_EXTRA_PREFIXES", config, "redactExtraPrefixes", in_file);
  if (!prefixes) return prefixes.error();
  for (const std::string& p : *prefixes) {
    if (p.size() < 3) {
      return Error::Invalid(
          "an extra redaction prefix must be at least 3 characters: a shorter "
          "one would take ordinary words");
    }
  }
  rules.extra_prefixes = std::move(*prefixes);
  auto allow = ResolveList(env, "TMCRA_REDACT_ALLOW", config, "redactAllow", in_file);
  if (!allow) return allow.error();
  rules.allow = std::move(*allow);
  return rules;
}

// The first non-empty value of the environment variable, then the config keys, with the name
// of where it came from.
struct Sourced {
  std::string value;
  std::string source;
};

Sourced FirstKey(const json& config, std::initializer_list<const char*> keys,
                 const std::string& in_file) {
  for (const char* key : keys) {
    if (std::string value = StringField(config, key); !value.empty()) {
      return {value, std::string(key) + " " + in_file};
    }
  }
  return {};
}

Sourced FirstOf(const EnvLookup& env, const char* variable, const json& config,
                std::initializer_list<const char*> keys, const std::string& in_file) {
  if (std::string value = NonBlank(env, variable); !value.empty()) return {value, variable};
  return FirstKey(config, keys, in_file);
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) {
    if (!out.empty()) out += "; ";
    out += part;
  }
  return out;
}

// What the steps of LoadSettings share: what discovery selected, the environment, and the
// settings and problems resolved so far.
struct Loading {
  const EnvLookup& env;
  const Discovery& d;
  const json& config;         // d.config
  const std::string in_file;  // "in <config path>", naming the file in messages
  const bool local;           // the file selects the local memory
  std::string home;
  Settings s;
  std::vector<std::string> problems;
};

// The settings that only report what discovery selected.
void TakeDiscovery(const Discovery& d, Settings& s) {
  s.config_path = d.config_path;
  s.config_file_present = d.config_present;
  s.config_file_explicit = d.config_explicit;
  s.binding_path = d.binding_path;
  s.binding_file_present = d.binding_present;
}

// The embedded data directory and database; returns TMCRA_DATA_DIR as set, for the message
// that refuses a relative one.
std::string ResolveDataDir(Loading& l) {
  std::string data_dir = NonBlank(l.env, "TMCRA_DATA_DIR");
  l.s.data_dir = data_dir.empty() ? l.home + "/.local/share/tmcra" : ExpandHome(data_dir, l.home);
  l.s.database_path = l.s.data_dir + "/memory.db";
  return data_dir;
}

// The memory mode and the credential (§5.3: in local mode only the identity file counts).
Status ResolveMode(Loading& l, const std::string& data_dir) {
  Settings& s = l.s;
  if (l.local) {
    s.mode = kModeLocal;
    s.api_key = StringField(l.config, "apiKey");
    s.credential_source = "config:apiKey";
    if (!NonBlank(l.env, "TMCRA_BASE_URL").empty() || !NonBlank(l.env, "TMCRA_API_KEY").empty()) {
      l.problems.push_back(
          "TMCRA_BASE_URL and TMCRA_API_KEY are ignored: the local memory "
          "identity " +
          l.d.config_path + " is used");
    }
  } else if (std::string key = NonBlank(l.env, "TMCRA_API_KEY"); !key.empty()) {
    s.mode = kModeService;
    s.api_key = std::move(key);
    s.credential_source = "TMCRA_API_KEY";
  } else if (std::string token = StringField(l.config, "accessToken"); !token.empty()) {
    s.mode = kModeService;
    s.api_key = std::move(token);
    s.credential_source = "config:accessToken";
  } else if (std::string api_key = StringField(l.config, "apiKey"); !api_key.empty()) {
    s.mode = kModeService;
    s.api_key = std::move(api_key);
    s.credential_source = "config:apiKey";
  } else {
    s.mode = kModeEmbedded;
    s.credential_source = "none";
    // A relative directory would move with the host's working directory (and a placeholder a
    // host left unexpanded, such as an MCPB bundle's "${HOME}", is one).
    if (s.data_dir.empty() || s.data_dir.front() != '/') {
      return Error::Invalid("TMCRA_DATA_DIR must be an absolute path (or start with ~/): " +
                            data_dir);
    }
    if (!NonBlank(l.env, "TMCRA_BASE_URL").empty()) {
      l.problems.push_back(
          "TMCRA_BASE_URL is set but no credential is configured (TMCRA_API_KEY, "
          "or accessToken/apiKey " +
          l.in_file +
          "): it is ignored and the "
          "embedded memory is used");
    }
  }
  return Ok();
}

// 1. The base URL (§5.4). A baseUrl of another type is an error, not a fall-back to the
// default host: the key would go to a service the user did not name.
Status ResolveBaseUrl(Loading& l) {
  if (const auto it = l.config.find("baseUrl");
      it != l.config.end() && !it->is_null() && !it->is_string() &&
      (l.local || NonBlank(l.env, "TMCRA_BASE_URL").empty())) {
    return Error::Invalid("baseUrl " + l.in_file + " must be a string");
  }
  Sourced url;
  if (l.local) {
    url = {StringField(l.config, "baseUrl"), "baseUrl " + l.in_file};
  } else {
    url = FirstOf(l.env, "TMCRA_BASE_URL", l.config, {"baseUrl"}, l.in_file);
    if (url.value.empty()) url = {std::string(kDefaultBaseUrl), "the default base URL"};
  }
  TMCRA_ASSIGN_OR_RETURN(const auto base, ValidateBaseUrl(url.value, l.local, url.source));
  l.s.base_url = base.url;
  return Ok();
}

// 3. The credential's expiry, when it came from the config file (expiresAt describes that
// credential).
Status ResolveExpiry(Loading& l, Clock::time_point now) {
  if (l.s.credential_source.rfind("config:", 0) != 0) return Ok();
  const auto it = l.config.find("expiresAt");
  if (it == l.config.end() || !Truthy(*it)) return Ok();
  std::optional<double> epoch;
  if (it->is_string()) {
    epoch = ParseIsoTimestamp(Trim(it->get<std::string>()));
  }
  if (!epoch) {
    return Error::Invalid("TMCRA credential expiry is invalid (expiresAt " + l.in_file +
                          "); sign in with the TMCRA app again");
  }
  // Compared in seconds: a far expiry (9999-12-31) does not fit the clock's nanoseconds
  // (they end in 2262), and converting it would overflow.
  const double now_seconds = std::chrono::duration<double>(now.time_since_epoch()).count();
  if (*epoch <= now_seconds) {
    return Error::Invalid("TMCRA credential expired (expiresAt " + l.in_file +
                          "); sign in with the TMCRA app again");
  }
  const double last = std::chrono::duration<double>(Clock::duration::max()).count();
  l.s.expires_at = *epoch >= last ? Clock::time_point::max()
                                  : Clock::time_point(std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(*epoch)));
  return Ok();
}

// The remote modes' queue, base URL, credential and its expiry.
Status ResolveRemote(Loading& l, Clock::time_point now) {
  const std::string queue = NonBlank(l.env, "TMCRA_MCP_QUEUE_FILE");
  l.s.queue_path =
      queue.empty() ? l.home + "/.config/tmcra/mcp-queue.sqlite3" : ExpandHome(queue, l.home);
  TMCRA_RETURN_IF_ERROR(ResolveBaseUrl(l));
  // 2. The credential.
  if (l.s.api_key.empty()) {
    return Error::Invalid("TMCRA credential is missing: the local memory identity " +
                          l.d.config_path + " has no apiKey; cloud fallback is disabled");
  }
  return ResolveExpiry(l, now);
}

// 6. The agent id, checked against the service's header grammar (it becomes a header).
Status ResolveAgentId(Loading& l) {
  const Sourced agent =
      FirstOf(l.env, "TMCRA_AGENT_ID", l.config, {"mcpAgentId", "defaultAgentId"}, l.in_file);
  if (agent.value.empty()) return Ok();
  if (CodePointLength(agent.value) > 200) {
    return Error::Invalid(agent.source + " must be at most 200 characters");
  }
  if (!IsValidAgentId(agent.value)) {
    return Error::Invalid(agent.source +
                          " has an invalid format (letters, digits and _ . : @ / -, starting "
                          "with a letter or digit)");
  }
  l.s.default_agent_id = agent.value;
  return Ok();
}

// 7. The integration id.
Status ResolveIntegrationId(Loading& l) {
  Sourced integration;
  if (std::string value = NonBlank(l.env, "TMCRA_INTEGRATION_ID"); !value.empty()) {
    integration = {value, "TMCRA_INTEGRATION_ID"};
  } else if (auto ids = l.config.find("integrationIds");
             ids != l.config.end() && ids->is_object() && !StringField(*ids, "mcp").empty()) {
    integration = {StringField(*ids, "mcp"), "integrationIds.mcp " + l.in_file};
  } else {
    integration = FirstKey(l.config, {"integrationId"}, l.in_file);
  }
  if (integration.value.empty()) return Ok();
  if (!IsValidIntegrationId(integration.value)) {
    return Error::Invalid(integration.source +
                          " has an invalid format (letters, digits and _ . : -, starting with "
                          "a letter or digit, at most 128 characters)");
  }
  l.s.integration_id = integration.value;
  return Ok();
}

// The default scope (never globalScope or projectScopePrefix). The service refuses a name
// outside its grammar on each call; that is reported, not fatal, as TMCRA's client does.
void ResolveDefaultScope(Loading& l) {
  const Sourced scope =
      FirstOf(l.env, "TMCRA_DEFAULT_SCOPE", l.config, {"defaultScope"}, l.in_file);
  if (scope.value.empty()) return;
  l.s.default_scope = scope.value;
  if (!IsValidScope(scope.value)) {
    l.problems.push_back(scope.source +
                         " is not a valid scope name (letters, digits and _ . -, at most 128): "
                         "calls that rely on the default scope will be refused");
  }
}

// TLS trust, which only matters for https (service mode).
Status ResolveTrust(Loading& l) {
  if (l.s.mode != kModeService) return Ok();
  if (std::string ca = NonBlank(l.env, "TMCRA_CA_FILE"); !ca.empty()) {
    ca = ExpandHome(ca, l.home);
    struct stat st {};
    if (stat(ca.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || access(ca.c_str(), R_OK) != 0) {
      return Error::Invalid("TMCRA_CA_FILE is not a readable file: " + ca);
    }
    l.s.ca_file = ca;
  } else {
    l.s.ca_file = NonBlank(l.env, "SSL_CERT_FILE");
  }
  l.s.ca_dir = NonBlank(l.env, "SSL_CERT_DIR");
  return Ok();
}

// libcurl opens the key-log file when it initialises, whatever the mode (in local mode it
// stays empty, there being no TLS, but it is still created): refused in both remote modes.
// Any non-empty value, as libcurl takes it (even blanks name a file).
Status CheckKeylog(Loading& l) {
  if (const auto keylog = l.env("SSLKEYLOGFILE"); l.s.remote() && keylog && !keylog->empty()) {
    if (!l.s.allow_keylog) {
      return Error::Invalid(
          "SSLKEYLOGFILE is set: refusing to start, libcurl would write TLS session keys to it "
          "(set TMCRA_DEBUG_ALLOW_SSLKEYLOGFILE=1 to allow it while debugging)");
    }
    l.problems.push_back(
        "SSLKEYLOGFILE is set and allowed by TMCRA_DEBUG_ALLOW_SSLKEYLOGFILE=1: "
        "TLS session keys are written to disk (debugging only)");
  }
  return Ok();
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

Result<Settings> LoadSettings(const EnvLookup& env, Clock::time_point now) {
  TMCRA_ASSIGN_OR_RETURN(const Discovery d, Discover(env));
  Loading l{env, d, d.config, "in " + d.config_path, IsLocal(d.config), Home(env), {}, {}};
  TakeDiscovery(d, l.s);
  const std::string data_dir = ResolveDataDir(l);
  TMCRA_RETURN_IF_ERROR(ResolveMode(l, data_dir));
  if (l.s.remote()) {
    TMCRA_RETURN_IF_ERROR(ResolveRemote(l, now));
  } else {
    l.s.queue_path = l.s.data_dir + "/outbox.sqlite3";
  }
  // 4. and 5. Timeout and attempts.
  TMCRA_ASSIGN_OR_RETURN(l.s.request_timeout_seconds, ResolveTimeout(env, d.config, l.in_file));
  TMCRA_ASSIGN_OR_RETURN(l.s.max_attempts, ResolveAttempts(env));
  TMCRA_RETURN_IF_ERROR(ResolveAgentId(l));
  TMCRA_RETURN_IF_ERROR(ResolveIntegrationId(l));
  // The content filter's rules.
  TMCRA_ASSIGN_OR_RETURN(l.s.filter_rules, ResolveFilterRules(env, d.config, l.in_file));
  TMCRA_RETURN_IF_ERROR(ResolveRecall(env, d.config, l.in_file, l.s));
  TMCRA_RETURN_IF_ERROR(ResolveEmbeddings(env, d.config, l.in_file, l.s));
  if (l.s.embeddings && l.s.remote()) {
    l.problems.push_back(
        "the embeddings settings apply to the embedded memory only: a remote memory recalls "
        "with its own (tmcra-memd --embeddings-url)");
  }
  ResolveDefaultScope(l);
  // Whether a set SSLKEYLOGFILE is tolerated (CheckKeylog, in both remote modes).
  l.s.allow_keylog = NonBlank(env, "TMCRA_DEBUG_ALLOW_SSLKEYLOGFILE") == "1";
  TMCRA_RETURN_IF_ERROR(ResolveTrust(l));
  TMCRA_RETURN_IF_ERROR(CheckKeylog(l));
  l.s.problem = Join(l.problems);
  return std::move(l.s);
}

Status CheckActiveConnection(const Settings& settings, const EnvLookup& env) {
  if (settings.config_file_explicit || !NonBlank(env, "TMCRA_CONFIG_FILE").empty()) return Ok();
  auto discovered = Discover(env);
  if (!discovered) return discovered.error();
  const json& config = discovered->config;
  if (!IsLocal(config)) return Ok();
  // Compared as LoadSettings derives them (trimmed, trailing '/' removed), so a process that
  // uses this very identity passes.
  std::string base_url = StringField(config, "baseUrl");
  while (!base_url.empty() && base_url.back() == '/') base_url.pop_back();
  if (settings.base_url != base_url || settings.api_key != StringField(config, "apiKey")) {
    return Error::Invalid(
        "Memory switched to local; restart the MCP host. Previous cloud requests are blocked");
  }
  return Ok();
}

std::chrono::milliseconds Settings::RequestTimeout() const {
  return std::chrono::milliseconds(
      static_cast<int64_t>(std::ceil(request_timeout_seconds * 1000.0)));
}

json Settings::ToJson() const {
  json out{{"mode", mode},
           {"credential", credential_source},
           {"config_file", config_path},
           {"config_file_present", config_file_present},
           {"config_file_explicit", config_file_explicit}};
  if (!binding_path.empty()) {
    out["binding_file"] = binding_path;
    out["binding_file_present"] = binding_file_present;
  }
  if (remote()) {
    out["endpoint"] = base_url;
    out["request_timeout_seconds"] = request_timeout_seconds;
    out["max_attempts"] = max_attempts;
    if (expires_at) {
      out["expires_at"] =
          FormatIsoUtc(std::chrono::duration<double>(expires_at->time_since_epoch()).count());
    }
    if (!ca_file.empty()) out["ca_file"] = ca_file;
    if (!ca_dir.empty()) out["ca_dir"] = ca_dir;
  } else {
    out["data_dir"] = data_dir;
    out["database_path"] = database_path;
  }
  out["queue_path"] = queue_path;
  if (default_scope) out["default_scope"] = *default_scope;
  if (default_agent_id) out["default_agent_id"] = *default_agent_id;
  if (integration_id) out["integration_id"] = *integration_id;
  // The allow-list's strings are the user's; only how many there are is shown.
  out["redact_secrets"] = filter_rules.redact_secrets;
  out["redact_extra_prefixes"] = filter_rules.extra_prefixes.size();
  out["redact_allow"] = filter_rules.allow.size();
  out["recall_language"] = recall_language;
  out["recall_synonyms"] = recall_synonyms;
  if (embeddings) {
    out["embeddings"] = {{"url", embeddings->url},
                         {"model", embeddings->model},
                         {"key", embeddings->api_key.empty() ? "none" : "set"},
                         {"timeout_seconds", embeddings->timeout_seconds}};
    if (!embeddings->ca_file.empty()) out["embeddings"]["ca_file"] = embeddings->ca_file;
  }
  if (!problem.empty()) out["problem"] = problem;
  return out;
}

}  // namespace tmcra::config
