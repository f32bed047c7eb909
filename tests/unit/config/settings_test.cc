// Settings: mode selection, discovery, precedence and validation (docs/contract.md §5) and the
// active-connection guard (§5.5). Every test runs on a temporary $HOME with an injected
// environment.
#include "src/config/settings.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <vector>

#include "tests/unit/config/config_test_util.h"

using tmcra::Errc;
using tmcra::config::CheckActiveConnection;
using tmcra::config::LoadSettings;
using tmcra::config::Settings;
using tmcra::testing::ConfigFixture;
using tmcra::testing::WriteFile;
using Clock = std::chrono::system_clock;

namespace {

// 2026-01-01T00:00:00Z
const Clock::time_point kNow = Clock::time_point(std::chrono::seconds(1767225600));

constexpr const char* kLocalIdentity =
    R"({"schemaVersion":2,"authMode":"api-key","baseUrl":"http://127.0.0.1:2059",
        "apiKey":"synthetic-local-key","tokenType":"Bearer","scopeNamespace":"local",
        "globalScope":"local-global","projectScopePrefix":"local-project","timeoutMs":180000,
        "defaultScope":"personal","deploymentMode":"local","integrationIds":{}})";

Settings Load(const ConfigFixture& f) {
  auto r = LoadSettings(f.Env(), kNow);
  if (!r) FAIL("LoadSettings failed: " << r.error().message);
  return *r;
}

std::string LoadError(const ConfigFixture& f) {
  auto r = LoadSettings(f.Env(), kNow);
  if (r) FAIL("LoadSettings succeeded in mode " << r->mode);
  CHECK(r.error().code == Errc::kInvalidArgument);
  CHECK_FALSE(r.error().retryable);
  return r.error().message;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("no credential: embedded memory under $HOME/.local/share/tmcra", "[config]") {
  ConfigFixture f;
  f.Set("XDG_DATA_HOME", "/elsewhere");
  const Settings s = Load(f);
  CHECK(s.mode == "embedded");
  CHECK_FALSE(s.remote());
  CHECK(s.data_dir == f.home() + "/.local/share/tmcra");
  CHECK(s.database_path == f.home() + "/.local/share/tmcra/memory.db");
  CHECK(s.queue_path == f.home() + "/.local/share/tmcra/outbox.sqlite3");
  CHECK(s.credential_source == "none");
  CHECK(s.api_key.empty());
  CHECK(s.base_url.empty());
  CHECK(s.config_path == f.DeviceConfig());
  CHECK_FALSE(s.config_file_present);
  CHECK(s.binding_path == f.Binding());
  CHECK(s.problem.empty());
  const auto j = s.ToJson();
  CHECK(j["mode"] == "embedded");
  CHECK(j["credential"] == "none");
  CHECK(j["data_dir"] == s.data_dir);
  CHECK_FALSE(j.contains("endpoint"));
}

TEST_CASE("TMCRA_DATA_DIR sets the data directory, with ~ expanded", "[config]") {
  ConfigFixture f;
  f.Set("TMCRA_DATA_DIR", "~/mem");
  const Settings s = Load(f);
  CHECK(s.data_dir == f.home() + "/mem");
  CHECK(s.queue_path == f.home() + "/mem/outbox.sqlite3");
}

TEST_CASE("a relative TMCRA_DATA_DIR is an error naming it", "[config]") {
  for (const char* dir : {"mem", "./mem", "${HOME}/.local/share/tmcra"}) {
    ConfigFixture f;
    f.Set("TMCRA_DATA_DIR", dir);
    const std::string error = LoadError(f);
    CHECK(error ==
          std::string("TMCRA_DATA_DIR must be an absolute path (or start with ~/): ") + dir);
  }
  ConfigFixture remote;  // not used by a remote memory, so not checked there
  remote.Set("TMCRA_DATA_DIR", "mem");
  remote.Set("TMCRA_API_KEY", "tmcra_a.b");
  CHECK(Load(remote).mode == "service");
}

TEST_CASE("TMCRA_BASE_URL without a credential stays embedded and says so", "[config]") {
  ConfigFixture f;
  f.Set("TMCRA_BASE_URL", "https://mem.example");
  f.Set("TMCRA_API_KEY", "   ");  // blank values fall through (MCPB forms send them empty)
  const Settings s = Load(f);
  CHECK(s.mode == "embedded");
  CHECK(Contains(s.problem, "TMCRA_BASE_URL is set but no credential"));
  CHECK(s.ToJson()["problem"] == s.problem);
}

TEST_CASE("service mode: environment over config file over defaults", "[config]") {
  ConfigFixture f;
  WriteFile(f.DeviceConfig(), R"({
    "baseUrl": "https://file.example/", "accessToken": "file-token", "apiKey": "file-key",
    "defaultScope": "file-scope", "mcpAgentId": "file-mcp-agent",
    "defaultAgentId": "file-default-agent", "integrationIds": {"mcp": "file-mcp-integration"},
    "integrationId": "file-integration", "timeoutMs": 2500, "expiresAt": "2030-01-01T00:00:00Z",
    "globalScope": "g", "projectScopePrefix": "p", "unknownKey": [1, 2, 3]})");

  SECTION("the file alone") {
    const Settings s = Load(f);
    CHECK(s.mode == "service");
    CHECK(s.remote());
    CHECK(s.trust_env());
    CHECK(s.base_url == "https://file.example");
    CHECK(s.api_key == "file-token");
    CHECK(s.credential_source == "config:accessToken");
    CHECK(s.default_scope == "file-scope");
    CHECK(s.default_agent_id == "file-mcp-agent");
    CHECK(s.integration_id == "file-mcp-integration");
    CHECK(s.request_timeout_seconds == Approx(2.5));
    CHECK(s.max_attempts == 3);
    REQUIRE(s.expires_at);
    CHECK(s.ToJson()["expires_at"] == "2030-01-01T00:00:00Z");
    CHECK(s.config_file_present);
    CHECK(s.queue_path == f.home() + "/.config/tmcra/mcp-queue.sqlite3");
  }
  SECTION("the environment wins") {
    f.Set("TMCRA_BASE_URL", " https://env.example/prefix/ ");
    f.Set("TMCRA_API_KEY", " env-key ");
    f.Set("TMCRA_DEFAULT_SCOPE", "env-scope");
    f.Set("TMCRA_AGENT_ID", "env-agent");
    f.Set("TMCRA_INTEGRATION_ID", "env-integration");
    f.Set("TMCRA_REQUEST_TIMEOUT_SECONDS", "7.5");
    f.Set("TMCRA_MAX_ATTEMPTS", "5");
    f.Set("TMCRA_MCP_QUEUE_FILE", "~/q/queue.sqlite3");
    const Settings s = Load(f);
    CHECK(s.base_url == "https://env.example/prefix");
    CHECK(s.api_key == "env-key");
    CHECK(s.credential_source == "TMCRA_API_KEY");
    CHECK(s.default_scope == "env-scope");
    CHECK(s.default_agent_id == "env-agent");
    CHECK(s.integration_id == "env-integration");
    CHECK(s.request_timeout_seconds == Approx(7.5));
    CHECK(s.max_attempts == 5);
    CHECK(s.queue_path == f.home() + "/q/queue.sqlite3");
    CHECK_FALSE(s.expires_at);  // expiresAt belongs to the file's credential, not this one
  }
  SECTION("blank environment values fall through") {
    for (const char* name :
         {"TMCRA_BASE_URL", "TMCRA_API_KEY", "TMCRA_DEFAULT_SCOPE", "TMCRA_AGENT_ID",
          "TMCRA_INTEGRATION_ID", "TMCRA_REQUEST_TIMEOUT_SECONDS", "TMCRA_MAX_ATTEMPTS"}) {
      f.Set(name, " \t");
    }
    const Settings s = Load(f);
    CHECK(s.base_url == "https://file.example");
    CHECK(s.credential_source == "config:accessToken");
    CHECK(s.default_scope == "file-scope");
    CHECK(s.request_timeout_seconds == Approx(2.5));
  }
}

TEST_CASE("service mode: second choices of the config file", "[config]") {
  ConfigFixture f;
  WriteFile(f.DeviceConfig(), R"({"apiKey": "file-key", "defaultAgentId": "default-agent",
    "integrationIds": "not-an-object", "integrationId": "plain-integration",
    "globalScope": "device-global", "projectScopePrefix": "proj-"})");
  const Settings s = Load(f);
  CHECK(s.base_url == "https://api.tmcra.com");
  CHECK(s.api_key == "file-key");
  CHECK(s.credential_source == "config:apiKey");
  CHECK_FALSE(s.default_scope);  // globalScope is never a default scope
  CHECK(s.default_agent_id == "default-agent");
  CHECK(s.integration_id == "plain-integration");
  CHECK(s.request_timeout_seconds == Approx(60));
}

TEST_CASE("service mode refuses http, even to loopback", "[config]") {
  ConfigFixture f;
  f.Set("TMCRA_API_KEY", "k-secret");
  for (const char* url : {"http://127.0.0.1:18089", "http://api.tmcra.com"}) {
    f.Set("TMCRA_BASE_URL", url);
    const std::string error = LoadError(f);
    CHECK(Contains(error, "TMCRA_BASE_URL must be an HTTPS origin"));
    CHECK_FALSE(Contains(error, "k-secret"));
  }
  f.Set("TMCRA_BASE_URL", "https://api.tmcra.com");
  CHECK(Load(f).base_url == "https://api.tmcra.com");
}

TEST_CASE("a bad baseUrl in the file is named as such", "[config]") {
  ConfigFixture f;
  WriteFile(f.DeviceConfig(), R"({"baseUrl": "https://tok:pw@h.example", "accessToken": "t"})");
  const std::string error = LoadError(f);
  CHECK(Contains(error, "baseUrl in " + f.DeviceConfig()));
  CHECK_FALSE(Contains(error, "pw@"));
}

TEST_CASE("local identity: discovery through the binding file", "[config]") {
  ConfigFixture f;
  f.Set("TMCRA_BASE_URL", "https://cloud.example");
  f.Set("TMCRA_API_KEY", "cloud-key");
  f.Set("SSL_CERT_FILE", "/etc/cloud.pem");
  f.InstallLocal(kLocalIdentity);
  const Settings s = Load(f);
  CHECK(s.mode == "local");
  CHECK(s.remote());
  CHECK_FALSE(s.trust_env());
  CHECK(s.base_url == "http://127.0.0.1:2059");
  CHECK(s.api_key == "synthetic-local-key");
  CHECK(s.credential_source == "config:apiKey");
  CHECK(s.default_scope == "personal");
  CHECK(s.request_timeout_seconds == Approx(180));
  CHECK(s.config_path == f.Identity());
  CHECK(s.binding_file_present);
  CHECK(s.ca_file.empty());
  CHECK(Contains(s.problem, "are ignored"));
  CHECK(CheckActiveConnection(s, f.Env()));
  CHECK_FALSE(Contains(s.ToJson().dump(), "synthetic-local-key"));

  SECTION("the environment's scope, agent and timeout still win") {
    f.Set("TMCRA_DEFAULT_SCOPE", "team");
    f.Set("TMCRA_AGENT_ID", "a1");
    f.Set("TMCRA_REQUEST_TIMEOUT_SECONDS", "3");
    const Settings e = Load(f);
    CHECK(e.default_scope == "team");
    CHECK(e.default_agent_id == "a1");
    CHECK(e.request_timeout_seconds == Approx(3));
    CHECK(e.base_url == "http://127.0.0.1:2059");
  }
  SECTION("TMCRA_LOCAL_BINDING_FILE moves the binding file") {
    const std::string moved = f.home() + "/elsewhere/binding.json";
    WriteFile(moved, R"({"schemaVersion":1,"mode":"local","dataRoot":")" + f.DataRoot() +
                         R"(","profile":"quality-qwen"})");
    WriteFile(f.Identity("quality-qwen"),
              R"({"deploymentMode":"local","baseUrl":"http://[::1]:2100","apiKey":"q"})");
    f.Set("TMCRA_LOCAL_BINDING_FILE", moved);
    const Settings m = Load(f);
    CHECK(m.binding_path == moved);
    CHECK(m.base_url == "http://[::1]:2100");
    CHECK(m.config_path == f.Identity("quality-qwen"));
  }
  SECTION("TMCRA_CONFIG_FILE wins over the binding") {
    WriteFile(f.home() + "/explicit.json", R"({"accessToken":"explicit"})");
    f.Set("TMCRA_CONFIG_FILE", "~/explicit.json");
    f.Unset("TMCRA_API_KEY");
    const Settings x = Load(f);
    CHECK(x.mode == "service");
    CHECK(x.config_file_explicit);
    CHECK(x.binding_path.empty());
    CHECK(x.config_path == f.home() + "/explicit.json");
    CHECK(x.base_url == "https://cloud.example");
  }
}

TEST_CASE("local identity through an explicit config file", "[config]") {
  ConfigFixture f;
  f.Set("TMCRA_API_KEY", "cloud-key");
  WriteFile(f.home() + "/identity.json", kLocalIdentity);
  f.Set("TMCRA_CONFIG_FILE", f.home() + "/identity.json");
  const Settings s = Load(f);
  CHECK(s.mode == "local");
  CHECK(s.api_key == "synthetic-local-key");
  CHECK(s.config_file_explicit);
}

TEST_CASE("local identity: fail closed, even with cloud settings", "[config]") {
  ConfigFixture f;
  f.Set("TMCRA_API_KEY", "cloud-key");
  f.Set("TMCRA_BASE_URL", "https://cloud.example");

  SECTION("identity file missing") {
    f.InstallLocal(std::nullopt);
    const std::string error = LoadError(f);
    CHECK(Contains(error, "not configured yet; cloud fallback is disabled"));
    CHECK(Contains(error, f.Identity()));
  }
  SECTION("identity not local") {
    f.InstallLocal(R"({"deploymentMode":"service","baseUrl":"https://x.example","apiKey":"k"})");
    CHECK(Contains(LoadError(f), "not configured yet"));
  }
  SECTION("identity with an https URL") {
    f.InstallLocal(R"({"deploymentMode":"local","baseUrl":"https://127.0.0.1:2059","apiKey":"k"})");
    CHECK(Contains(LoadError(f), "baseUrl in " + f.Identity()));
  }
  SECTION("identity with localhost") {
    f.InstallLocal(R"({"deploymentMode":"local","baseUrl":"http://localhost:2059","apiKey":"k"})");
    CHECK(Contains(LoadError(f), "127.0.0.1 or [::1]"));
  }
  SECTION("identity without a URL") {
    f.InstallLocal(R"({"deploymentMode":"local","apiKey":"k"})");
    CHECK(Contains(LoadError(f), "baseUrl in " + f.Identity()));
  }
  SECTION("identity without a key") {
    f.InstallLocal(R"({"deploymentMode":"local","baseUrl":"http://127.0.0.1:2059"})");
    const std::string error = LoadError(f);
    CHECK(Contains(error, "credential is missing"));
    CHECK(Contains(error, f.Identity()));
  }
  SECTION("invalid bindings") {
    const std::string root = f.DataRoot();
    for (
        const std::string& binding : std::vector<std::string>{
            std::string("[1]"), std::string("not json"),
            R"({"schemaVersion":2,"mode":"local","dataRoot":")" + root +
                R"(","profile":"lite-cpu"})",
            R"({"schemaVersion":"1","mode":"local","dataRoot":")" + root +
                R"(","profile":"lite-cpu"})",
            R"({"schemaVersion":1,"mode":"cloud","dataRoot":")" + root +
                R"(","profile":"lite-cpu"})",
            std::string(
                R"({"schemaVersion":1,"mode":"local","dataRoot":"relative/root","profile":"lite-cpu"})"),
            R"({"schemaVersion":1,"mode":"local","profile":"lite-cpu"})",
            R"({"schemaVersion":1,"mode":"local","dataRoot":")" + root + R"(","profile":"custom"})",
            R"({"schemaVersion":1,"mode":"local","dataRoot":")" + root +
                R"(","profile":"../../x"})",
            R"({"schemaVersion":1,"mode":"local","dataRoot":")" + root + R"("})"}) {
      INFO(binding);
      WriteFile(f.Binding(), binding, 0600);
      const std::string error = LoadError(f);
      CHECK(Contains(error, "Invalid local memory selection"));
      CHECK(Contains(error, "cloud fallback is disabled"));
      CHECK(Contains(error, f.Binding()));
    }
  }
}

TEST_CASE("config files that are not JSON objects", "[config]") {
  ConfigFixture f;
  WriteFile(f.DeviceConfig(), "{not json");
  CHECK(LoadError(f) == "TMCRA config is unreadable: " + f.DeviceConfig() + " (not valid JSON)");
  WriteFile(f.DeviceConfig(), "[1,2]");
  CHECK(LoadError(f) == "TMCRA config must contain a JSON object: " + f.DeviceConfig());
  WriteFile(f.DeviceConfig(), "");
  CHECK(Contains(LoadError(f), "unreadable"));
  WriteFile(f.DeviceConfig(), "{}");
  CHECK(Load(f).mode == "embedded");
}

TEST_CASE("expiresAt of the config file's credential", "[config]") {
  ConfigFixture f;
  const auto with_expiry = [&](const std::string& expiry_json) {
    WriteFile(f.DeviceConfig(), R"({"accessToken":"tok-secret","expiresAt":)" + expiry_json + "}");
  };
  using std::chrono::seconds;

  with_expiry(R"("2026-01-01T00:00:01Z")");
  CHECK(*Load(f).expires_at == kNow + seconds(1));
  with_expiry(R"("2026-01-01T00:00:01")");  // naive: UTC
  CHECK(*Load(f).expires_at == kNow + seconds(1));
  with_expiry(R"("2026-01-01T01:00:01+01:00")");
  CHECK(*Load(f).expires_at == kNow + seconds(1));
  with_expiry(R"("2026-01-01T00:00:00.5Z")");
  CHECK(Load(f).expires_at > kNow);
  with_expiry(R"("2026-01-02")");
  CHECK(*Load(f).expires_at == kNow + seconds(86400));
  for (const char* falsy : {"null", R"("")", "0", "false"}) {
    with_expiry(falsy);
    CHECK_FALSE(Load(f).expires_at);
  }

  // Past the clock's range (its nanoseconds end in 2262): still a future expiry, not an overflow.
  for (const char* far : {R"("2262-04-12T00:00:00Z")", R"("9999-12-31T23:59:59Z")"}) {
    INFO(far);
    with_expiry(far);
    const auto loaded = Load(f);
    REQUIRE(loaded.expires_at);
    CHECK(*loaded.expires_at == std::chrono::system_clock::time_point::max());
  }
  with_expiry(R"("2262-04-11T00:00:00Z")");  // just inside the range
  CHECK(*Load(f).expires_at > kNow + seconds(86400LL * 365 * 236));
  CHECK(*Load(f).expires_at < std::chrono::system_clock::time_point::max());

  with_expiry(R"("2026-01-01T00:00:00Z")");  // at now: expired
  CHECK(Contains(LoadError(f), "TMCRA credential expired"));
  with_expiry(R"("2025-06-01T00:00:00")");
  std::string error = LoadError(f);
  CHECK(Contains(error, "credential expired"));
  CHECK(Contains(error, "sign in with the TMCRA app again"));
  CHECK_FALSE(Contains(error, "tok-secret"));
  with_expiry(R"("2026-01-01T01:00:00+02:00")");  // 23:00 UTC the day before
  CHECK(Contains(LoadError(f), "expired"));
  for (const char* invalid : {R"("tomorrow")", R"("2026-13-01T00:00:00Z")",
                              R"("2026-02-30T00:00:00Z")", "12345", "true", R"(["2030"])"}) {
    INFO(invalid);
    with_expiry(invalid);
    error = LoadError(f);
    CHECK(Contains(error, "TMCRA credential expiry is invalid"));
    CHECK(Contains(error, f.DeviceConfig()));
  }

  // A credential from the environment is not the one expiresAt describes.
  with_expiry(R"("2020-01-01T00:00:00Z")");
  f.Set("TMCRA_API_KEY", "env-key");
  CHECK(Load(f).mode == "service");
}

TEST_CASE("a baseUrl that is not a string is an error, not the default host", "[config]") {
  ConfigFixture f;
  for (const char* bad : {"8443", R"(["https://memory.example.com"])", R"({"url":"x"})", "true"}) {
    INFO(bad);
    WriteFile(f.DeviceConfig(),
              std::string(R"({"accessToken":"tok-secret","baseUrl":)") + bad + "}");
    const std::string error = LoadError(f);
    CHECK(Contains(error, "baseUrl"));
    CHECK(Contains(error, "must be a string"));
    CHECK_FALSE(Contains(error, "tok-secret"));
  }
  // null is absent: the default host.
  WriteFile(f.DeviceConfig(), R"({"accessToken":"tok-secret","baseUrl":null})");
  CHECK(Load(f).base_url == "https://api.tmcra.com");
  // TMCRA_BASE_URL wins and the file's value is not looked at.
  WriteFile(f.DeviceConfig(), R"({"accessToken":"tok-secret","baseUrl":8443})");
  f.Set("TMCRA_BASE_URL", "https://memory.example.com");
  CHECK(Load(f).base_url == "https://memory.example.com");
}

TEST_CASE("request timeout validation", "[config]") {
  ConfigFixture f;
  f.Set("TMCRA_API_KEY", "k");
  for (const auto& [text, seconds] : std::vector<std::pair<std::string, double>>{
           {"30", 30}, {"0.5", 0.5}, {"+2", 2}, {"1e2", 100}, {"86400", 86400}}) {
    f.Set("TMCRA_REQUEST_TIMEOUT_SECONDS", text);
    CHECK(Load(f).request_timeout_seconds == Approx(seconds));
  }
  // The HTTP client's milliseconds, rounded up: under 1 ms is 1 ms, not 0 (no timeout).
  for (const auto& [text, ms] : std::vector<std::pair<std::string, int64_t>>{
           {"0.0004", 1}, {"0.001", 1}, {"0.0015", 2}, {"2.5", 2500}, {"86400", 86400000}}) {
    INFO(text);
    f.Set("TMCRA_REQUEST_TIMEOUT_SECONDS", text);
    CHECK(Load(f).RequestTimeout().count() == ms);
  }
  for (const char* text : {"abc", "5s", "nan", "inf", "-inf", "1,5", "0x10", "--1"}) {
    INFO(text);
    f.Set("TMCRA_REQUEST_TIMEOUT_SECONDS", text);
    CHECK(LoadError(f) == "TMCRA_REQUEST_TIMEOUT_SECONDS must be a number");
  }
  for (const char* text : {"0", "-1", "-0.0"}) {
    f.Set("TMCRA_REQUEST_TIMEOUT_SECONDS", text);
    CHECK(LoadError(f) == "TMCRA_REQUEST_TIMEOUT_SECONDS must be positive");
  }
  f.Set("TMCRA_REQUEST_TIMEOUT_SECONDS", "86401");
  CHECK(Contains(LoadError(f), "at most 86400"));

  f.Unset("TMCRA_REQUEST_TIMEOUT_SECONDS");
  WriteFile(f.DeviceConfig(), R"({"timeoutMs":"x"})");
  CHECK(LoadError(f) == "timeoutMs in " + f.DeviceConfig() + " must be a number");
  WriteFile(f.DeviceConfig(), R"({"timeoutMs":true})");
  CHECK(Contains(LoadError(f), "must be a number"));
  WriteFile(f.DeviceConfig(), R"({"timeoutMs":0})");
  CHECK(Contains(LoadError(f), "must be positive"));
  WriteFile(f.DeviceConfig(), R"({"timeoutMs":"1500"})");
  CHECK(Load(f).request_timeout_seconds == Approx(1.5));
  WriteFile(f.DeviceConfig(), R"({"timeoutMs":null})");
  CHECK(Load(f).request_timeout_seconds == Approx(60));
}

TEST_CASE("max attempts validation", "[config]") {
  ConfigFixture f;
  f.Set("TMCRA_MAX_ATTEMPTS", "1");
  CHECK(Load(f).max_attempts == 1);
  f.Set("TMCRA_MAX_ATTEMPTS", " 100 ");
  CHECK(Load(f).max_attempts == 100);
  for (const char* text : {"x", "2.5", "1e2", "3 4", "99999999999999999999999x"}) {
    INFO(text);
    f.Set("TMCRA_MAX_ATTEMPTS", text);
    CHECK(LoadError(f) == "TMCRA_MAX_ATTEMPTS must be an integer");
  }
  for (const char* text : {"0", "-3", "-99999999999999999999999"}) {
    f.Set("TMCRA_MAX_ATTEMPTS", text);
    CHECK(LoadError(f) == "TMCRA_MAX_ATTEMPTS must be positive");
  }
  for (const char* text : {"101", "99999999999999999999999"}) {
    f.Set("TMCRA_MAX_ATTEMPTS", text);
    CHECK(LoadError(f) == "TMCRA_MAX_ATTEMPTS must be at most 100");
  }
}

TEST_CASE("agent and integration ids are checked against the service's grammar", "[config]") {
  ConfigFixture f;
  f.Set("TMCRA_AGENT_ID", std::string(200, 'a'));
  CHECK(Load(f).default_agent_id == std::string(200, 'a'));
  f.Set("TMCRA_AGENT_ID", std::string(201, 'a'));
  CHECK(LoadError(f) == "TMCRA_AGENT_ID must be at most 200 characters");
  f.Set("TMCRA_AGENT_ID", std::string(201, 'a') + "\xc3\xa9");
  CHECK(LoadError(f) == "TMCRA_AGENT_ID must be at most 200 characters");
  for (const char* bad : {"agent one", "agent\r\nX-Evil: 1", "-agent", "agent%0a", "agént"}) {
    INFO(bad);
    f.Set("TMCRA_AGENT_ID", bad);
    CHECK(Contains(LoadError(f), "TMCRA_AGENT_ID has an invalid format"));
  }
  f.Unset("TMCRA_AGENT_ID");
  WriteFile(f.DeviceConfig(), R"({"mcpAgentId":"bad agent"})");
  CHECK(Contains(LoadError(f), "mcpAgentId in " + f.DeviceConfig() + " has an invalid format"));

  WriteFile(f.DeviceConfig(), "{}");
  f.Set("TMCRA_INTEGRATION_ID", "codex:plugin-1.0");
  CHECK(Load(f).integration_id == "codex:plugin-1.0");
  for (const char* bad : {"a/b", "a b", "a@b", "_a", "a\nb", "a\r\nX: 1"}) {
    INFO(bad);
    f.Set("TMCRA_INTEGRATION_ID", bad);
    CHECK(Contains(LoadError(f), "TMCRA_INTEGRATION_ID has an invalid format"));
  }
  f.Set("TMCRA_INTEGRATION_ID", std::string(129, 'i'));
  CHECK(Contains(LoadError(f), "TMCRA_INTEGRATION_ID has an invalid format"));
  f.Unset("TMCRA_INTEGRATION_ID");
  WriteFile(f.DeviceConfig(), R"({"integrationIds":{"mcp":"bad id"}})");
  CHECK(Contains(LoadError(f), "integrationIds.mcp in " + f.DeviceConfig()));
}

TEST_CASE("an invalid default scope is reported, not fatal", "[config]") {
  ConfigFixture f;
  f.Set("TMCRA_DEFAULT_SCOPE", "my scope/..");
  const Settings s = Load(f);
  CHECK(s.default_scope == "my scope/..");
  CHECK(Contains(s.problem, "TMCRA_DEFAULT_SCOPE is not a valid scope name"));
}

TEST_CASE("TLS settings: custom CA and the key-log guard (service mode only)", "[config]") {
  ConfigFixture f;
  f.Set("TMCRA_API_KEY", "k");
  f.Set("SSL_CERT_FILE", "/etc/ssl/system.pem");
  f.Set("SSL_CERT_DIR", "/etc/ssl/certs");
  Settings s = Load(f);
  CHECK(s.ca_file == "/etc/ssl/system.pem");
  CHECK(s.ca_dir == "/etc/ssl/certs");

  WriteFile(f.home() + "/ca.pem", "-----BEGIN CERTIFICATE-----\n", 0644);
  f.Set("TMCRA_CA_FILE", "~/ca.pem");
  s = Load(f);
  CHECK(s.ca_file == f.home() + "/ca.pem");
  CHECK(s.ToJson()["ca_file"] == s.ca_file);
  f.Set("TMCRA_CA_FILE", f.home() + "/missing.pem");
  CHECK(LoadError(f) == "TMCRA_CA_FILE is not a readable file: " + f.home() + "/missing.pem");
  f.Unset("TMCRA_CA_FILE");

  f.Set("SSLKEYLOGFILE", f.home() + "/keys.log");
  CHECK(Contains(LoadError(f), "SSLKEYLOGFILE is set"));
  f.Set("TMCRA_DEBUG_ALLOW_SSLKEYLOGFILE", "1");
  s = Load(f);
  CHECK(s.allow_keylog);
  CHECK(Contains(s.problem, "SSLKEYLOGFILE"));

  f.Unset("TMCRA_DEBUG_ALLOW_SSLKEYLOGFILE");
  f.Unset("TMCRA_API_KEY");
  CHECK(Load(f).mode == "embedded");  // no libcurl at all: the key log is irrelevant
}

TEST_CASE("SSLKEYLOGFILE is refused in local mode too (libcurl would create the file)",
          "[config]") {
  ConfigFixture f;
  f.InstallLocal(kLocalIdentity);
  f.Set("SSLKEYLOGFILE", f.home() + "/keys.log");
  CHECK(Contains(LoadError(f), "SSLKEYLOGFILE is set"));
  f.Set("SSLKEYLOGFILE", " ");  // libcurl would create a file named " "
  CHECK(Contains(LoadError(f), "SSLKEYLOGFILE is set"));
  f.Set("TMCRA_DEBUG_ALLOW_SSLKEYLOGFILE", "1");
  const Settings s = Load(f);
  CHECK(s.mode == "local");
  CHECK(s.allow_keylog);
  CHECK(Contains(s.problem, "SSLKEYLOGFILE"));
}

TEST_CASE("permissions of the config file", "[config][permissions]") {
  ConfigFixture f;
  const std::string secret = "tmcra_CANARY.0123456789abcdef";
  const std::string content = R"({"accessToken":")" + secret + R"("})";
  for (const mode_t mode : {0640u, 0644u, 0666u, 0604u, 0620u, 0602u}) {
    INFO("mode " << std::oct << mode);
    WriteFile(f.DeviceConfig(), content, mode);
    const std::string error = LoadError(f);
    CHECK(Contains(error, f.DeviceConfig()));
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    CHECK(Contains(error, octal));
    CHECK_FALSE(Contains(error, secret));
    CHECK_FALSE(Contains(error, "CANARY"));
  }
  for (const mode_t mode : {0600u, 0400u}) {
    WriteFile(f.DeviceConfig(), content, mode);
    CHECK(Load(f).mode == "service");
  }
  chmod(f.DeviceConfig().c_str(), 0600);

  SECTION("the identity file is a secret too; the binding file only must not be writable") {
    f.InstallLocal(kLocalIdentity);
    chmod(f.Identity().c_str(), 0644);
    std::string error = LoadError(f);
    CHECK(Contains(error, f.Identity()));
    CHECK(Contains(error, "0644"));
    CHECK_FALSE(Contains(error, "synthetic-local-key"));
    chmod(f.Identity().c_str(), 0600);
    CHECK(Load(f).mode == "local");  // binding at 0644 is fine: it holds no secret
    chmod(f.Binding().c_str(), 0666);
    error = LoadError(f);
    CHECK(Contains(error, f.Binding()));
    CHECK(Contains(error, "0666"));
  }
}

TEST_CASE("the guard notices a switch to local memory", "[config][guard]") {
  ConfigFixture f;
  f.Set("TMCRA_API_KEY", "cloud-key");
  const Settings cloud = Load(f);
  CHECK(cloud.mode == "service");
  CHECK(CheckActiveConnection(cloud, f.Env()));

  f.InstallLocal(kLocalIdentity);
  auto blocked = CheckActiveConnection(cloud, f.Env());
  REQUIRE_FALSE(blocked);
  CHECK(blocked.error().message ==
        "Memory switched to local; restart the MCP host. Previous cloud requests are blocked");
  CHECK(blocked.error().code == Errc::kInvalidArgument);

  // The local settings themselves pass; another identity does not.
  const Settings local = Load(f);
  CHECK(CheckActiveConnection(local, f.Env()));
  WriteFile(f.Identity(), R"({"deploymentMode":"local","baseUrl":"http://127.0.0.1:2059/",
                             "apiKey":" synthetic-local-key "})");
  CHECK(CheckActiveConnection(local, f.Env()));  // same values once normalised
  WriteFile(
      f.Identity(),
      R"({"deploymentMode":"local","baseUrl":"http://127.0.0.1:2060","apiKey":"synthetic-local-key"})");
  CHECK_FALSE(CheckActiveConnection(local, f.Env()));

  // A binding that became invalid stops requests too.
  WriteFile(f.Binding(), R"({"schemaVersion":1})", 0600);
  CHECK(Contains(CheckActiveConnection(cloud, f.Env()).error().message,
                 "Invalid local memory selection"));

  // TMCRA_CONFIG_FILE disables the guard.
  ConfigFixture g;
  WriteFile(g.home() + "/cloud.json", R"({"accessToken":"t"})");
  g.Set("TMCRA_CONFIG_FILE", g.home() + "/cloud.json");
  const Settings pinned = Load(g);
  g.InstallLocal(kLocalIdentity);
  CHECK(CheckActiveConnection(pinned, g.Env()));
}

TEST_CASE("no setting output ever contains the key", "[config]") {
  ConfigFixture f;
  const std::string key = "tmcra_k.CANARY-4f1c2d";
  f.Set("TMCRA_API_KEY", key);
  f.Set("TMCRA_BASE_URL", "https://mem.example/v1prefix");
  const Settings s = Load(f);
  CHECK(s.api_key == key);
  const auto j = s.ToJson();
  CHECK_FALSE(Contains(j.dump(), "CANARY"));
  CHECK(j["credential"] == "TMCRA_API_KEY");
  CHECK(j["endpoint"] == "https://mem.example/v1prefix");
  CHECK(j["max_attempts"] == 3);
}
