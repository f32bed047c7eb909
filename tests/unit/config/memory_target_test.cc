#include "src/config/memory_target.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <map>

#include "tests/support/temp_dir.h"

using tmcra::config::EnvLookup;
using tmcra::config::RedactUrl;
using tmcra::config::ResolveMemoryTarget;

namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("no account means embedded memory under $HOME/.local/share/tmcra", "[config]") {
  tmcra::testing::TempDir home;
  auto t = ResolveMemoryTarget(Env({{"HOME", home.path()}, {"XDG_DATA_HOME", "/elsewhere"}}));
  CHECK(t.mode == "embedded");
  CHECK(t.data_dir == home.path() + "/.local/share/tmcra");
  CHECK(t.database_path == home.path() + "/.local/share/tmcra/memory.db");
  CHECK(t.credential == "none");
  CHECK_FALSE(t.config_file_present);
}

TEST_CASE("TMCRA_DATA_DIR overrides the data directory, with ~ expanded", "[config]") {
  auto t = ResolveMemoryTarget(Env({{"HOME", "/home/u"}, {"TMCRA_DATA_DIR", "~/mem"}}));
  CHECK(t.data_dir == "/home/u/mem");
}

TEST_CASE("a credential selects remote memory and is never shown", "[config]") {
  tmcra::testing::TempDir home;
  auto t = ResolveMemoryTarget(Env({{"HOME", home.path()},
                                    {"TMCRA_API_KEY", "tmcra_abc.s3cret"},
                                    {"TMCRA_BASE_URL", "https://user:pw@mem.example/v?x=1#f"}}));
  CHECK(t.mode == "remote");
  CHECK(t.endpoint == "https://mem.example/v");
  CHECK(t.credential == "TMCRA_API_KEY");
  CHECK(t.ToJson().dump().find("s3cret") == std::string::npos);
  CHECK(t.ToJson().dump().find("pw") == std::string::npos);
}

TEST_CASE("the device config file can select remote memory", "[config]") {
  tmcra::testing::TempDir home;
  const std::string file = home.File("config.json");
  std::ofstream(file) << R"({"baseUrl":"https://api.example/","accessToken":"tok-secret"})";
  auto t = ResolveMemoryTarget(Env({{"HOME", home.path()}, {"TMCRA_CONFIG_FILE", file}}));
  CHECK(t.mode == "remote");
  CHECK(t.endpoint == "https://api.example");
  CHECK(t.credential == "config file (accessToken)");
  CHECK(t.config_file_present);
  CHECK(t.ToJson().dump().find("tok-secret") == std::string::npos);
}

TEST_CASE("a config file that is not an object is reported, not trusted", "[config]") {
  tmcra::testing::TempDir home;
  const std::string file = home.File("config.json");
  std::ofstream(file) << "[1,2]";
  auto t = ResolveMemoryTarget(Env({{"HOME", home.path()}, {"TMCRA_CONFIG_FILE", file}}));
  CHECK(t.mode == "embedded");
  CHECK_FALSE(t.problem.empty());
}

TEST_CASE("RedactUrl drops userinfo, query and fragment", "[config]") {
  CHECK(RedactUrl("https://a:b@h:1/p?q#f") == "https://h:1/p");
  CHECK(RedactUrl("https://h") == "https://h");
  CHECK(RedactUrl("https://h/p@x") == "https://h/p@x");
}
