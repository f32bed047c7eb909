// tmcra-memd: the memory engine served over HTTPS for a team (or plain HTTP on loopback with
// --local), wire-compatible with TMCRA's hosted Memory API. docs/memd.md has the manual.
//
// stdout carries only what a script reads: the readiness line of `serve`, the key printed once
// by `keys create`, the JSON lines of `keys list`. Logs go to stderr.

#include <malloc.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/pg_db.h"
#include "base/private_dirs.h"
#include "base/sqlite_db.h"
#include "base/version.h"
#include "memd/key_store.h"
#include "memd/local_identity.h"
#include "memd/mcp_endpoint.h"
#include "memd/mcp_tools.h"
#include "memd/memd_server.h"
#include "memd/migrate.h"
#include "memd/tmcra_memd_help.h"
#include "memory/engine.h"
#include "memory/pg_store.h"
#include "src/api/embedded_memory_api.h"
#include "src/api/embeddings_client.h"
#include "src/config/url.h"
#include "src/tools/tool_support.h"

namespace {

using tmcra::memd::ApiKey;
using tmcra::memd::KeyStore;

int UsageError(const std::string& message) {
  std::fprintf(stderr, "tmcra-memd: %s (try --help)\n", message.c_str());
  return 2;
}

// A parsed command line: options with values, flags, and positional words.
struct Args {
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::string> flags;
  std::vector<std::string> positional;

  std::optional<std::string> Get(std::string_view name) const {
    std::optional<std::string> out;
    for (const auto& [k, v] : values) {
      if (k == name) out = v;
    }
    return out;
  }
  std::vector<std::string> All(std::string_view name) const {
    std::vector<std::string> out;
    for (const auto& [k, v] : values) {
      if (k == name) out.push_back(v);
    }
    return out;
  }
  bool Flag(std::string_view name) const {
    for (const auto& f : flags) {
      if (f == name) return true;
    }
    return false;
  }
};

std::optional<Args> ParseArgs(int argc, char** argv, int first,
                              const std::vector<std::string>& value_options,
                              const std::vector<std::string>& flag_options, std::string* error) {
  Args args;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      args.positional.push_back(arg);
      continue;
    }
    std::optional<std::string> inline_value;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    const std::string name = arg.substr(2);
    bool is_value = false;
    for (const auto& v : value_options) is_value = is_value || v == name;
    bool is_flag = false;
    for (const auto& f : flag_options) is_flag = is_flag || f == name;
    if (is_value) {
      if (inline_value) {
        args.values.emplace_back(name, *inline_value);
      } else if (i + 1 < argc) {
        args.values.emplace_back(name, argv[++i]);
      } else {
        *error = "--" + name + " needs a value";
        return std::nullopt;
      }
    } else if (is_flag && !inline_value) {
      args.flags.push_back(name);
    } else {
      *error = "unknown option '" + arg + "'";
      return std::nullopt;
    }
  }
  return args;
}

// A decimal number in min..max (digits only), or nullopt.
std::optional<int> BoundedInt(const std::string& text, long long min, long long max) {
  if (text.empty() || text.size() > 12 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const long long v = std::atoll(text.c_str());
  if (v < min || v > max) return std::nullopt;
  return static_cast<int>(v);
}

std::string AbsoluteDir(const std::string& dir) {
  return std::filesystem::absolute(dir).lexically_normal().string();
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// Where a command's store is: a data directory, or a PostgreSQL database (--database, with the
// password from --database-password-file or libpq's own sources).
struct StoreLocation {
  std::string data_dir;  // absolute; empty with a database
  std::optional<tmcra::pg::ConnectOptions> database;

  std::string Describe() const {
    return database ? "PostgreSQL " + tmcra::pg::DescribeConninfo(database->conninfo) : data_dir;
  }
};

// The store the options name, or a usage error in `error`.
std::optional<StoreLocation> LocateStore(const Args& args, std::string* error) {
  const auto data_dir = args.Get("data-dir");
  const auto database = args.Get("database");
  const auto password_file = args.Get("database-password-file");
  if (data_dir && database) {
    *error = "--data-dir and --database name two stores: give one";
    return std::nullopt;
  }
  if (!database) {
    if (password_file) *error = "--database-password-file needs --database";
    if (!data_dir || data_dir->empty()) *error = "--data-dir or --database is required";
    if (!error->empty()) return std::nullopt;
    return StoreLocation{AbsoluteDir(*data_dir), std::nullopt};
  }
  if (auto s = tmcra::pg::CheckConninfo(*database); !s) {
    *error = "--database: " + s.error().message;
    return std::nullopt;
  }
  tmcra::pg::ConnectOptions options;
  options.conninfo = *database;
  options.application_name = "tmcra-memd";
  if (password_file) {
    auto password = tmcra::pg::ReadPasswordFile(*password_file);
    if (!password) {
      *error = "--database-password-file: " + password.error().message;
      return std::nullopt;
    }
    options.password = std::move(*password);
  }
  return StoreLocation{"", std::move(options)};
}

std::unique_ptr<KeyStore> OpenKeys(const StoreLocation& where) {
  auto keys =
      where.database ? KeyStore::OpenPostgres(*where.database) : KeyStore::Open(where.data_dir);
  if (!keys) {
    spdlog::critical("cannot open the key store in {}: {}", where.Describe(),
                     keys.error().ToString());
    return nullptr;
  }
  return std::move(*keys);
}

int KeysCreate(const Args& args, const StoreLocation& where) {
  if (!args.positional.empty()) return UsageError("keys create takes no positional argument");
  tmcra::memd::NewKeyRequest request;
  // Given, the list must name a permission ("", " " and "," name none); absent, the default.
  if (auto p = args.Get("permissions")) request.permissions = SplitCommas(*p);
  request.scope_names = args.All("scope");
  request.scope_prefixes = args.All("scope-prefix");
  request.label = args.Get("label").value_or("");
  if (!where.database) {
    if (auto s = tmcra::MakePrivateDirs(where.data_dir); !s) {
      spdlog::critical("cannot create {}: {}", where.data_dir, s.error().ToString());
      return 1;
    }
  }
  auto keys = OpenKeys(where);
  if (!keys) return 1;
  auto created = keys->Create(request);
  if (!created) {
    if (created.error().code == tmcra::Errc::kInvalidArgument) {
      return UsageError(created.error().message);
    }
    spdlog::critical("cannot create a key: {}", created.error().ToString());
    return 1;
  }
  std::fprintf(stdout, "%s\n", created->token.c_str());  // stdout-ok: shown this once
  std::fflush(stdout);
  spdlog::info("created key {} ({}); the key above is shown only once", created->key.key_id,
               created->key.ToJson()["permissions"].dump());
  return 0;
}

int KeysList(const Args& args, const StoreLocation& where) {
  if (!args.positional.empty()) return UsageError("keys list takes no positional argument");
  auto keys = OpenKeys(where);
  if (!keys) return 1;
  auto list = keys->List();
  if (!list) {
    spdlog::critical("cannot list keys: {}", list.error().ToString());
    return 1;
  }
  for (const ApiKey& key : *list) {
    std::fprintf(stdout, "%s\n", key.ToJson().dump().c_str());  // stdout-ok: the listing
  }
  return 0;
}

int KeysRevoke(const Args& args, const StoreLocation& where) {
  if (args.positional.size() != 1) return UsageError("keys revoke needs one KEY_ID");
  std::string id = args.positional[0];
  // Never a whole key: other users can read argv, so a secret must not travel there.
  if (id.find('.') != std::string::npos) {
    return UsageError(
        "keys revoke takes the key id (the part between tmcra_ and the dot, "
        "as `keys list` shows it), never the whole key: command lines are "
        "visible to other users");
  }
  if (id.rfind("tmcra_", 0) == 0) id = id.substr(6);
  auto keys = OpenKeys(where);
  if (!keys) return 1;
  auto revoked = keys->Revoke(id);
  if (!revoked) {
    spdlog::critical("cannot revoke: {}", revoked.error().ToString());
    return 1;
  }
  if (!*revoked) {
    std::fprintf(stderr, "tmcra-memd: no key %s\n", id.c_str());
    return 1;
  }
  spdlog::info("revoked key {}", id);
  return 0;
}

// Progress on stderr: a line rewritten in place on a terminal, else a line per tenth.
void ShowProgress(int64_t done, int64_t total) {
  static int64_t shown_tenth = -1;
  const int64_t percent = total == 0 ? 100 : done * 100 / total;
  if (isatty(STDERR_FILENO) != 0) {
    std::fprintf(stderr, "\rmigrate: %lld / %lld records (%lld%%)", static_cast<long long>(done),
                 static_cast<long long>(total), static_cast<long long>(percent));
    if (done >= total) std::fputc('\n', stderr);
  } else if (percent / 10 != shown_tenth) {
    shown_tenth = percent / 10;
    std::fprintf(stderr, "migrate: %lld / %lld records (%lld%%)\n", static_cast<long long>(done),
                 static_cast<long long>(total), static_cast<long long>(percent));
  }
  std::fflush(stderr);
}

int MigrateCommand(int argc, char** argv) {
  std::string error;
  auto args = ParseArgs(
      argc, argv, 2, {"from-data-dir", "database", "database-password-file", "batch"}, {}, &error);
  if (!args) return UsageError(error);
  const auto from = args->Get("from-data-dir");
  if (!from || from->empty()) return UsageError("migrate needs --from-data-dir DIR");
  if (!args->Get("database")) return UsageError("migrate needs --database URL");
  auto where = LocateStore(*args, &error);
  if (!where) return UsageError(error);
  const auto batch = BoundedInt(args->Get("batch").value_or("1000"), 1, 100000);
  if (!batch) return UsageError("--batch must be 1..100000");
  const std::string source = AbsoluteDir(*from) + "/memory.db";
  auto store = tmcra::memory::PgStore::Open(*where->database, 2);
  if (!store) {
    spdlog::critical("cannot open the memory store in {}: {}", where->Describe(),
                     store.error().ToString());
    return 1;
  }
  auto summary = tmcra::memd::MigrateStore(source, **store, *batch, ShowProgress);
  if (!summary) {
    spdlog::critical("migrate {}: {}", source, summary.error().ToString());
    return 1;
  }
  const nlohmann::json line{
      {"records", summary->records},           {"records_copied", summary->records_copied},
      {"records_verified", summary->verified}, {"jobs_copied", summary->jobs_copied},
      {"feedback", summary->feedback},         {"feedback_copied", summary->feedback_copied}};
  std::fprintf(stdout, "%s\n", line.dump().c_str());  // stdout-ok: the summary
  return 0;
}

int KeysCommand(int argc, char** argv) {
  if (argc < 3) return UsageError("keys needs create, list or revoke");
  const std::string sub = argv[2];
  std::string error;
  auto args = ParseArgs(argc, argv, 3,
                        {"data-dir", "database", "database-password-file", "permissions", "scope",
                         "scope-prefix", "label"},
                        {}, &error);
  if (!args) return UsageError(error);
  auto where = LocateStore(*args, &error);
  if (!where) return UsageError(error);
  if (sub == "create") return KeysCreate(*args, *where);
  if (sub == "list") return KeysList(*args, *where);
  if (sub == "revoke") return KeysRevoke(*args, *where);
  return UsageError("unknown keys command '" + sub + "'");
}

// The key the local identity should carry: the previous one when it still authenticates with
// the default permissions and no scope limit (so running MCP hosts keep working), else a new one.
tmcra::Result<std::string> LocalKey(KeyStore& keys,
                                    const std::optional<tmcra::memd::PreviousIdentity>& previous) {
  if (previous) {
    auto outcome = keys.Authenticate(previous->api_key);
    if (!outcome) return outcome.error();
    if (outcome->key) {
      const ApiKey& key = *outcome->key;
      bool full = key.scope_names.empty() && key.scope_prefixes.empty();
      for (const auto& p : tmcra::memd::DefaultPermissions()) full = full && key.Has(p);
      if (full) {
        spdlog::info("--local: keeping the key {} of the existing identity", key.key_id);
        return previous->api_key;
      }
    }
  }
  tmcra::memd::NewKeyRequest request;
  request.label = "local identity";
  auto created = keys.Create(request);
  if (!created) return created.error();
  spdlog::info("--local: created key {} for the local identity", created->key.key_id);
  return created->token;
}

std::atomic<tmcra::memd::Server*> g_server{nullptr};
// The thread running Server::Stop() (which waits for the requests in progress), so the signal
// thread keeps listening for a second signal meanwhile; ServeCommand joins it.
std::mutex g_stop_mu;
std::thread g_stopper;  // guarded by g_stop_mu

// Waits for SIGTERM/SIGINT (blocked in every thread) and stops the server; a second one ends
// the process at once (every write we make is transactional).
void SignalLoop(sigset_t set) {
  bool stopping = false;
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (stopping) {
      spdlog::warn("second signal {}: exiting now", sig);
      std::_Exit(1);
    }
    stopping = true;
    spdlog::info("signal {}: no new connections; finishing the requests in progress", sig);
    std::lock_guard lock(g_stop_mu);
    if (auto* server = g_server.load()) g_stopper = std::thread([server] { server->Stop(); });
  }
}

// glibc returns the free top of each thread's heap to the kernel once it exceeds 128 KiB
// (madvise), and every request then faults the pages back in; with many request threads
// that was a few percent of a busy server's CPU, and the unmapping interrupts the other cores
// (TLB shoot-downs). A server keeps its working set: trim only above 64 MiB, and serve
// allocations up to 8 MiB from the heap instead of a fresh mmap each (these fixed values also
// stop glibc from moving the thresholds as it goes).
void TuneAllocatorForServing() {
  mallopt(M_MMAP_THRESHOLD, 8 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
}

// What `serve`'s command line asks for, checked.
struct ServeConfig {
  tmcra::memd::ServerOptions options;
  StoreLocation store;        // --data-dir, or --database
  std::string index_dir_arg;  // --index-dir (with --database)
  bool local = false;
  bool listen_given = false;
  bool job_worker = true;
  std::optional<std::string> public_url;
  std::vector<std::string> mcp_allowed_origins;  // --mcp-allow-origin
  int mcp_answer_within_ms = 20000;
  int oauth_access_seconds = 3600;
  size_t postings_cache_mib = 64;
  tmcra::filter::FilterRules filter_rules;
  std::string recall_language = "auto";
  bool recall_synonyms = true;
  std::shared_ptr<tmcra::memory::Embedder> embedder;  // --embeddings-url, or none
  std::chrono::milliseconds embed_timeout{30000};
};

// --embeddings-url, --embeddings-model, --embeddings-ca-file, and the key from the
// environment (never argv); a usage error's text, or nothing.
std::optional<std::string> ParseEmbeddings(const Args& args, ServeConfig& c) {
  const auto url = args.Get("embeddings-url");
  const auto model = args.Get("embeddings-model");
  if (!url) {
    if (model) return "--embeddings-model needs --embeddings-url";
    return std::nullopt;
  }
  if (!model || model->empty()) return "--embeddings-url needs --embeddings-model";
  tmcra::api::EmbeddingsOptions options;
  options.url = *url;
  while (!options.url.empty() && options.url.back() == '/') options.url.pop_back();
  options.model = *model;
  options.ca_file = args.Get("embeddings-ca-file").value_or("");
  if (const char* key = std::getenv("TMCRA_EMBEDDINGS_API_KEY"); key != nullptr) {
    options.api_key = key;
  }
  if (auto v = args.Get("embeddings-timeout")) {
    char* end = nullptr;
    const double seconds = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(seconds > 0 && seconds <= 3600)) {
      return "--embeddings-timeout must be seconds above 0 and at most 3600";
    }
    c.embed_timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
  }
  auto client = tmcra::api::EmbeddingsClient::Create(std::move(options));
  if (!client) return "--embeddings-url: " + client.error().message;
  c.embedder = std::move(*client);
  return std::nullopt;
}

// --listen, --tls-cert, --tls-key and --local; a usage error's text, or nothing.
std::optional<std::string> ParseEndpoint(const Args& args, ServeConfig& c) {
  c.options.tls_cert_file = args.Get("tls-cert").value_or("");
  c.options.tls_key_file = args.Get("tls-key").value_or("");
  c.listen_given = args.Get("listen").has_value();
  if (c.listen_given) {
    auto listen = tmcra::memd::ParseListen(*args.Get("listen"));
    if (!listen) return listen.error().message;
    c.options.listen = *listen;
  }
  if (c.local) {
    if (!c.options.tls_cert_file.empty() || !c.options.tls_key_file.empty()) {
      return "--local serves plain HTTP on loopback; it takes no --tls-cert/--tls-key";
    }
    if (c.options.listen.host != "127.0.0.1") {
      return "--local listens on 127.0.0.1 only (numeric loopback)";
    }
  } else if (c.options.tls_cert_file.empty() || c.options.tls_key_file.empty()) {
    return "--tls-cert and --tls-key are required (or --local for plain HTTP on 127.0.0.1)";
  }
  return std::nullopt;
}

// One numeric option: `apply` gets the value when it is in [min, max]; else `message`.
template <class Apply>
std::optional<std::string> NumberOption(const Args& args, const char* name, long long min,
                                        long long max, const char* message, Apply apply) {
  auto v = args.Get(name);
  if (!v) return std::nullopt;
  auto n = BoundedInt(*v, min, max);
  if (!n) return std::string(message);
  apply(*n);
  return std::nullopt;
}

// The numeric limits, in the order the usage lists them; the first usage error's text.
std::optional<std::string> ParseLimits(const Args& args, ServeConfig& c) {
  auto& o = c.options;
  const std::optional<std::string> errors[] = {
      NumberOption(args, "threads", 1, 1024, "--threads must be 1..1024",
                   [&](int n) { o.threads = n; }),
      NumberOption(args, "max-connections", 1, 65536, "--max-connections must be 1..65536",
                   [&](int n) { o.max_connections = n; }),
      NumberOption(args, "max-connections-per-address", 0, 65536,
                   "--max-connections-per-address must be 0..65536",
                   [&](int n) { o.max_connections_per_address = n; }),
      NumberOption(args, "head-timeout", 1, 3600, "--head-timeout must be 1..3600 seconds",
                   [&](int n) { o.head_timeout_seconds = n; }),
      NumberOption(args, "max-concurrency", 1, 100000,
                   "--max-concurrency must be a positive number",
                   [&](int n) { o.max_concurrency = n; }),
      NumberOption(args, "max-body-bytes", 1, 1LL << 30, "--max-body-bytes must be 1..1073741824",
                   [&](int n) { o.max_body_bytes = static_cast<size_t>(n); }),
      NumberOption(args, "postings-cache-mib", 0, 65536, "--postings-cache-mib must be 0..65536",
                   [&](int n) { c.postings_cache_mib = static_cast<size_t>(n); }),
      NumberOption(args, "request-timeout", 1, 86400, "--request-timeout must be 1..86400 seconds",
                   [&](int n) { o.request_timeout_seconds = n; }),
      NumberOption(args, "oauth-access-seconds", 1, 86400,
                   "--oauth-access-seconds must be 1..86400",
                   [&](int n) { c.oauth_access_seconds = n; }),
      NumberOption(args, "mcp-answer-within-ms", 0, 600000,
                   "--mcp-answer-within-ms must be 0..600000",
                   [&](int n) { c.mcp_answer_within_ms = n; }),
  };
  for (const auto& error : errors) {
    if (error) return error;
  }
  static_assert(sizeof(size_t) >= 8, "--postings-cache-mib << 20 must fit");
  return std::nullopt;
}

// --gzip and the content filter's options; a usage error's text, or nothing.
std::optional<std::string> ParseContentOptions(const Args& args, ServeConfig& c) {
  if (auto v = args.Get("gzip")) {
    if (*v == "auto") {
      c.options.gzip = tmcra::memd::GzipPolicy::kAuto;
    } else if (*v == "always") {
      c.options.gzip = tmcra::memd::GzipPolicy::kAlways;
    } else if (*v == "never") {
      c.options.gzip = tmcra::memd::GzipPolicy::kNever;
    } else {
      return "--gzip must be auto, always or never";
    }
  }
  if (auto v = args.Get("redact-secrets")) {
    if (*v != "on" && *v != "off") return "--redact-secrets must be on or off";
    c.filter_rules.redact_secrets = *v == "on";
  }
  c.filter_rules.extra_prefixes = args.All("redact-extra-prefix");
  for (const std::string& prefix : c.filter_rules.extra_prefixes) {
    if (prefix.size() < 3) return "--redact-extra-prefix must be 3 characters or more";
  }
  c.filter_rules.allow = args.All("redact-allow");
  if (auto v = args.Get("recall-language")) c.recall_language = *v;
  if (auto v = args.Get("recall-synonyms")) {
    if (*v != "on" && *v != "off") return "--recall-synonyms must be on or off";
    c.recall_synonyms = *v == "on";
  }
  return ParseEmbeddings(args, c);
}

// `serve`'s command line, checked; a usage error's text, or nothing.
std::optional<std::string> ParseServe(int argc, char** argv, ServeConfig& c) {
  std::string error;
  auto args = ParseArgs(argc, argv, 2,
                        {"data-dir",
                         "listen",
                         "tls-cert",
                         "tls-key",
                         "public-url",
                         "threads",
                         "max-connections",
                         "max-connections-per-address",
                         "head-timeout",
                         "max-concurrency",
                         "max-body-bytes",
                         "gzip",
                         "request-timeout",
                         "postings-cache-mib",
                         "redact-secrets",
                         "redact-extra-prefix",
                         "redact-allow",
                         "recall-language",
                         "recall-synonyms",
                         "embeddings-url",
                         "embeddings-model",
                         "embeddings-ca-file",
                         "embeddings-timeout",
                         "database",
                         "database-password-file",
                         "index-dir",
                         "mcp-allow-origin",
                         "mcp-answer-within-ms",
                         "oauth-access-seconds"},
                        {"local", "no-job-worker"}, &error);
  if (!args) return error;
  if (!args->positional.empty()) return "serve takes no positional argument";
  auto store = LocateStore(*args, &error);
  if (!store) return error;
  c.store = std::move(*store);
  c.local = args->Flag("local");
  if (c.store.database && c.local) return "--local serves a --data-dir store, not --database";
  if (auto index_dir = args->Get("index-dir")) {
    if (!c.store.database) return "--index-dir goes with --database";
    c.index_dir_arg = *index_dir;
  }
  c.job_worker = !args->Flag("no-job-worker");
  c.public_url = args->Get("public-url");
  if (c.public_url) {
    if (auto url = tmcra::config::ValidateBaseUrl(*c.public_url, c.local, "--public-url"); !url) {
      return url.error().message;
    }
  }
  if (auto origins = args->Get("mcp-allow-origin")) c.mcp_allowed_origins = SplitCommas(*origins);
  if (auto e = ParseEndpoint(*args, c)) return e;
  if (auto e = ParseLimits(*args, c)) return e;
  if (auto e = ParseContentOptions(*args, c)) return e;
  return std::nullopt;
}

// Binds the listening socket. --local without --listen first tries the port of the previous
// identity, so the baseUrl that running MCP hosts hold stays valid. Returns the port, or -1
// (logged).
int BindServer(const ServeConfig& c, tmcra::memd::KeyStore& keys,
               const std::optional<tmcra::memd::PreviousIdentity>& previous,
               std::unique_ptr<tmcra::memd::Server>& server) {
  if (c.local && !c.listen_given && previous && previous->port) {
    auto first = c.options;
    first.listen.port = *previous->port;
    server = std::make_unique<tmcra::memd::Server>(first, keys);
    auto bound = server->Bind();
    if (bound) return *bound;
    spdlog::info("--local: the previous port {} is taken ({}); picking a free one", *previous->port,
                 bound.error().message);
  }
  server = std::make_unique<tmcra::memd::Server>(c.options, keys);
  auto bound = server->Bind();
  if (!bound) {
    spdlog::critical("{}", bound.error().message);
    return -1;
  }
  return *bound;
}

// The engine's options for serving: the public base URL of job links, the worker, the
// readers' shared mapping and the postings cache.
tmcra::memory::EngineOptions ServingEngine(ServeConfig& c, const std::string& store_path,
                                           const std::string& origin) {
  tmcra::memory::EngineOptions engine;
  engine.path = store_path;
  engine.public_base_url = c.public_url.value_or(origin);
  while (!engine.public_base_url.empty() && engine.public_base_url.back() == '/') {
    engine.public_base_url.pop_back();
  }
  engine.start_worker = c.job_worker;
  engine.warm_recall = true;  // before the readiness line, not in the first client's recall
  // Recall's connections share the kernel's copy of the file's pages instead of each reading
  // its own (docs/memd.md, "Limits and middleware behaviour").
  engine.reader_mmap_bytes = int64_t{1} << 30;
  engine.postings_cache_bytes = c.postings_cache_mib << 20;
  engine.filter_rules = std::move(c.filter_rules);
  engine.stem_language = c.recall_language;
  engine.synonyms = c.recall_synonyms;
  engine.embedder = c.embedder;
  engine.embed_timeout = c.embed_timeout;
  engine.query_embed_timeout = std::min(engine.query_embed_timeout, c.embed_timeout);
  return engine;
}

// --local: the key and the files that tell MCP hosts on this machine where memd is; adds them
// to the readiness line. False when they cannot be made (logged).
bool WriteLocalIdentity(tmcra::memd::KeyStore& keys,
                        const std::optional<tmcra::memd::PreviousIdentity>& previous,
                        const std::string& data_dir, int port, nlohmann::json& ready) {
  auto key = LocalKey(keys, previous);
  if (!key) {
    spdlog::critical("--local: cannot make a key: {}", key.error().ToString());
    return false;
  }
  const std::string binding = tmcra::memd::LocalBindingPath();
  if (auto s = tmcra::memd::WriteLocalFiles(data_dir, port, *key, binding); !s) {
    spdlog::critical("--local: {}", s.error().ToString());
    return false;
  }
  ready["identity"] = tmcra::memd::LocalIdentityPath(data_dir);
  ready["binding"] = binding;
  spdlog::info("--local: wrote {} and {}", tmcra::memd::LocalIdentityPath(data_dir), binding);
  return true;
}

// Prints the readiness line, serves until a signal stops the server, and waits for the stop.
int ServeUntilStopped(tmcra::memd::Server& server, tmcra::api::EmbeddedMemoryApi& memory,
                      const ServeConfig& c, const std::string& origin, const nlohmann::json& ready,
                      const sigset_t& signals) {
  g_server.store(&server);
  std::thread(SignalLoop, signals).detach();
  spdlog::info(
      "tmcra-memd {} listening on {} ({} threads, {} concurrent requests, {} byte "
      "bodies)",
      tmcra::kVersion, origin, c.options.threads, c.options.max_concurrency,
      c.options.max_body_bytes);
  std::fprintf(stdout, "%s\n", ready.dump().c_str());  // stdout-ok: the readiness line
  std::fflush(stdout);
  auto served = server.Serve(memory);
  {
    std::lock_guard lock(g_stop_mu);
    g_server.store(nullptr);
    if (g_stopper.joinable()) g_stopper.join();
  }
  if (!served) {
    spdlog::critical("{}", served.error().ToString());
    return 1;
  }
  spdlog::info("stopped: every request in progress was answered");
  return 0;
}

// The public origin: --public-url's (scheme, host, port when not the scheme's), else the
// listening origin. The OAuth issuer, and the origin of the resource /mcp.
std::string PublicOrigin(const ServeConfig& c, const std::string& origin) {
  if (!c.public_url) return origin;
  auto url = tmcra::config::ValidateBaseUrl(*c.public_url, c.local);
  if (!url) return origin;
  const bool default_port = url->port == (url->scheme == "https" ? 443 : 80);
  return url->scheme + "://" + url->host + (default_port ? "" : ":" + std::to_string(url->port));
}

// The Host values /mcp answers: the public URL's host (with its port, and without it when the
// port is the scheme's), and the loopback names when the server listens on loopback; none
// (any Host) when it listens elsewhere without a public URL.
std::vector<std::string> McpHosts(const ServeConfig& c, int port) {
  std::vector<std::string> hosts;
  if (c.public_url) {
    if (auto url = tmcra::config::ValidateBaseUrl(*c.public_url, c.local)) {
      hosts.push_back(url->host + ":" + std::to_string(url->port));
      if (url->port == (url->scheme == "https" ? 443 : 80)) hosts.push_back(url->host);
    }
  }
  const std::string& listen = c.options.listen.host;
  if (listen == "127.0.0.1" || listen == "::1" || listen == "localhost") {
    for (const char* name : {"127.0.0.1", "localhost", "[::1]"}) {
      hosts.push_back(std::string(name) + ":" + std::to_string(port));
    }
  }
  return hosts;
}

// The MCP endpoint's options: its identity, who it answers (Host, Origin), how long a call's
// POST waits.
tmcra::memd::McpEndpointOptions McpOptions(const ServeConfig& c, const std::string& origin,
                                           int port) {
  tmcra::memd::McpEndpointOptions o;
  o.identity = {"tmcra-memd", "TMCRA Memory", tmcra::kVersion, tmcra::tools::kInstructions};
  o.answer_within = std::chrono::milliseconds(c.mcp_answer_within_ms);
  o.allowed_origins = c.mcp_allowed_origins;
  o.own_origins = {origin};
  if (c.public_url) o.own_origins.push_back(PublicOrigin(c, origin));
  o.allowed_hosts = McpHosts(c, port);
  o.runners = std::clamp(c.options.max_concurrency * 2, 4, 64);
  o.inline_calls = c.options.max_concurrency;
  return o;
}

// tmcra-memd's MCP endpoint and its OAuth server over the memory: made before serving, and
// destroyed after it (the endpoint first: it waits for the tool calls that run).
struct McpFront {
  std::unique_ptr<tmcra::memd::CallerTools> tools;
  std::unique_ptr<tmcra::memd::McpEndpoint> mcp;
  std::unique_ptr<tmcra::memd::OAuthServer> oauth;
};

bool MakeMcpFront(const ServeConfig& c, tmcra::memd::KeyStore& keys,
                  tmcra::api::EmbeddedMemoryApi& memory, const std::string& data_dir,
                  const std::string& origin, int port, McpFront& front) {
  for (const char* sub : {"/mcp-controls", "/mcp-turns"}) {
    if (auto made = tmcra::MakePrivateDirs(data_dir + sub); !made) {
      spdlog::critical("cannot create {}{}: {}", data_dir, sub, made.error().ToString());
      return false;
    }
  }
  auto session_secret = keys.ServerSecret("mcp_session");
  auto form_secret = keys.ServerSecret("oauth_form");
  if (!session_secret || !form_secret) {
    spdlog::critical("cannot read the server secrets: {}",
                     (session_secret ? form_secret.error() : session_secret.error()).ToString());
    return false;
  }
  front.tools = std::make_unique<tmcra::memd::CallerTools>(tmcra::memd::McpToolsOptions{
      &memory, data_dir + "/mcp-controls", data_dir + "/mcp-turns", c.filter_rules});
  tmcra::memd::CallerTools* tools = front.tools.get();
  front.mcp = std::make_unique<tmcra::memd::McpEndpoint>(
      McpOptions(c, origin, port), std::move(*session_secret),
      [tools](const tmcra::memd::ApiKey& key) { return tools->For(key); }, keys);
  tmcra::memd::OAuthOptions oauth;
  oauth.issuer = PublicOrigin(c, origin);
  if (!c.public_url && McpHosts(c, port).empty()) {
    spdlog::warn(
        "no --public-url: /mcp answers any Host, and OAuth tokens name the resource {}/mcp, "
        "which hosts given another URL refuse (docs/remote-mcp.md)",
        oauth.issuer);
  }
  oauth.access_lifetime = std::chrono::seconds(c.oauth_access_seconds);
  front.oauth = std::make_unique<tmcra::memd::OAuthServer>(oauth, keys, std::move(*form_secret));
  return true;
}

// The directory of this instance's index of a shared store: --index-dir, else
// $XDG_CACHE_HOME/tmcra-memd, else ~/.cache/tmcra-memd.
std::string IndexDir(const ServeConfig& c) {
  if (!c.index_dir_arg.empty()) return AbsoluteDir(c.index_dir_arg);
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache == '/') {
    return std::string(cache) + "/tmcra-memd";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home == '/' ? home : "/tmp") + "/.cache/tmcra-memd";
}

// An index that holds changes the shared store no longer has (the database was restored, or
// failed over to a replica that lacked the newest ones) is deleted, so the engine rebuilds it
// from the store. False when the store cannot be read (logged).
bool DropIndexAheadOfStore(tmcra::memory::SharedStore& store, const std::string& path) {
  if (!std::filesystem::exists(path)) return true;
  int64_t through = 0;
  {
    tmcra::db::Database::Options options;
    options.path = path;
    options.read_only = true;
    auto index = tmcra::db::Database::Open(options);
    auto value = index ? (*index)->QueryInt(
                             "SELECT COALESCE((SELECT value FROM maintenance WHERE "
                             "name = 'shared_through'), 0)")
                       : tmcra::Result<int64_t>(index.error());
    through = value ? *value : 0;
  }
  auto head = store.Head();
  if (!head) {
    spdlog::critical("cannot read the memory store: {}", head.error().ToString());
    return false;
  }
  if (through <= *head) return true;
  spdlog::warn(
      "the index {} is ahead of the store (change {} against {}: a restore or a "
      "failover); rebuilding it",
      path, through, *head);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return true;
}

// The memory's store: with --data-dir, the directory (created private) that memory.db lives
// in; with --database, the shared store, and the file of this instance's index of it (under
// the store's id, in IndexDir). False when it cannot be opened (logged).
bool OpenMemoryStore(const ServeConfig& c, std::string& dir, std::string& path,
                     std::shared_ptr<tmcra::memory::SharedStore>& shared) {
  dir = c.store.database ? IndexDir(c) : c.store.data_dir;
  if (auto s = tmcra::MakePrivateDirs(dir); !s) {
    spdlog::critical("cannot create {}: {}", dir, s.error().ToString());
    return false;
  }
  path = dir + "/memory.db";
  if (!c.store.database) return true;
  auto store = tmcra::memory::PgStore::Open(*c.store.database,
                                            static_cast<size_t>(c.options.max_concurrency) + 4);
  auto id = store ? (*store)->StoreId() : tmcra::Result<std::string>(store.error());
  if (!id) {
    spdlog::critical("cannot open the memory store in {}: {}", c.store.Describe(),
                     id.error().ToString());
    return false;
  }
  shared = std::move(*store);
  path = dir + "/index-" + *id + ".db";
  return DropIndexAheadOfStore(*shared, path);
}

int ServeCommand(int argc, char** argv, const sigset_t& signals) {
  TuneAllocatorForServing();
  ServeConfig c;
  if (auto usage = ParseServe(argc, argv, c)) return UsageError(*usage);
  if (c.options.threads < c.options.max_concurrency) {
    spdlog::warn(
        "--threads {} is below --max-concurrency {}: requests wait for a worker "
        "instead of being answered 429",
        c.options.threads, c.options.max_concurrency);
  }
  std::string data_dir;
  std::string store_path;
  std::shared_ptr<tmcra::memory::SharedStore> shared;
  auto keys = OpenKeys(c.store);  // first: a wrong password or a server that is down shows here
  if (!keys || !OpenMemoryStore(c, data_dir, store_path, shared)) return 1;
  std::optional<tmcra::memd::PreviousIdentity> previous;
  if (c.local) previous = tmcra::memd::ReadLocalIdentity(tmcra::memd::LocalIdentityPath(data_dir));
  std::unique_ptr<tmcra::memd::Server> server;
  const int port = BindServer(c, *keys, previous, server);
  if (port < 0) return 1;
  const std::string origin = c.options.listen.Origin(c.local ? "http" : "https", port);
  tmcra::memory::EngineOptions engine = ServingEngine(c, store_path, origin);
  engine.shared = shared;
  tmcra::api::EmbeddedMemoryApi memory(engine);
  // Open the store now: a broken store fails the start, and jobs accepted before a stop run
  // at once (the worker starts with them).
  auto stats = memory.Stats();
  if (!stats) {
    spdlog::critical("cannot open the memory store {}: {}", engine.path, stats.error().ToString());
    return 1;
  }
  spdlog::info("memory store {}: {}", engine.path, stats->dump());
  if (!engine.start_worker) spdlog::warn("--no-job-worker: ingest jobs are stored, not run");
  nlohmann::json ready{{"listening", origin}};
  if (c.local && !WriteLocalIdentity(*keys, previous, data_dir, port, ready)) return 1;
  auto session_secret = keys->ServerSecret("mcp_session");
  if (!session_secret) {
    spdlog::critical("cannot read the server secret: {}", session_secret.error().ToString());
    return 1;
  }
  McpFront front;
  if (!MakeMcpFront(c, *keys, memory, data_dir, origin, port, front)) return 1;
  server->ServeMcp(*front.mcp);
  server->ServeOAuth(*front.oauth);
  const int status = ServeUntilStopped(*server, memory, c, origin, ready, signals);
  if (status != 0) return status;
  if (auto last = memory.Stats()) spdlog::info("memory store {}: {}", engine.path, last->dump());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Block the stop signals before any thread exists, so only the signal thread receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (argc < 2) return UsageError("a command is required");
  const std::string_view command = argv[1];
  if (command == "--version" || command == "-V") {
    std::fprintf(stdout, "tmcra-memd %s\n", tmcra::kVersion);  // stdout-ok
    return 0;
  }
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(tmcra::help::kText, stdout);  // stdout-ok
    return 0;
  }
  try {
    tmcra::InitLogging();
    if (command == "serve") return ServeCommand(argc, argv, signals);
    if (command == "keys") return KeysCommand(argc, argv);
    if (command == "migrate") return MigrateCommand(argc, argv);
  } catch (const std::exception& e) {
    spdlog::critical("fatal: {}", e.what());
    return 1;
  }
  return UsageError("unknown command '" + std::string(command) + "'");
}
