// tmcra-memd's key store: key shape, hashed storage, permissions, scope limits, revocation; each
// case on both stores (a SQLite file, and a PostgreSQL database of the suite's cluster).
#include "memd/key_store.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>

#include "base/clock.h"
#include "base/sha256.h"
#include "tests/support/pg_test_cluster.h"
#include "tests/support/temp_dir.h"

using tmcra::memd::ApiKey;
using tmcra::memd::KeyStore;
using tmcra::memd::NewKeyRequest;
using tmcra::memd::ParseToken;
using tmcra::testing::TempDir;

namespace {

// One key store of the kind GENERATE picked, with its directory or database.
struct StoreUnderTest {
  explicit StoreUnderTest(const std::string& kind) {
    if (kind == "postgresql") database = std::make_unique<tmcra::testing::ScratchDatabase>("keys");
    auto opened =
        database ? KeyStore::OpenPostgres(database->Options()) : KeyStore::Open(dir.path());
    INFO((opened ? std::string() : opened.error().ToString()));
    REQUIRE(opened);
    store = std::move(*opened);
  }
  // Every stored byte of the keys: the SQLite file and its WAL, or the table's rows.
  std::string StoredBytes() const {
    if (!database) return FileBytes(dir.File("keys.db")) + FileBytes(dir.File("keys.db-wal"));
    auto conn = tmcra::pg::Connection::Open(database->Options());
    REQUIRE(conn);
    auto rows = (*conn)->Exec("SELECT memd_api_keys::text FROM memd_api_keys");
    REQUIRE(rows);
    std::string out;
    for (int i = 0; i < rows->size(); ++i) out += std::string(rows->Text(i, 0));
    return out;
  }
  static std::string FileBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  TempDir dir;
  std::unique_ptr<tmcra::testing::ScratchDatabase> database;
  std::unique_ptr<KeyStore> store;
};

}  // namespace

TEST_CASE("a new key is tmcra_<24 hex>.<64 hex> with every permission by default") {
  const std::string kind = GENERATE("sqlite", "postgresql");
  StoreUnderTest under(kind);
  auto& store = under.store;
  auto created = store->Create({});
  REQUIRE(created);
  const std::string& token = created->token;
  REQUIRE(token.size() == 6 + 24 + 1 + 64);
  auto parsed = ParseToken(token);
  REQUIRE(parsed);
  CHECK(parsed->key_id == created->key.key_id);
  CHECK(created->key.permissions ==
        std::vector<std::string>{"memory:feedback", "memory:read", "memory:write"});

  auto outcome = store->Authenticate(token);
  REQUIRE(outcome);
  REQUIRE(outcome->key);
  CHECK(outcome->key->key_id == created->key.key_id);

  // Only the SHA-256 of the secret is stored.
  const std::string bytes = under.StoredBytes();
  CHECK(bytes.find(parsed->secret) == std::string::npos);
  CHECK(bytes.find(tmcra::Sha256Hex(parsed->secret)) != std::string::npos);
  if (kind == "sqlite") {
    struct stat st {};
    REQUIRE(stat(under.dir.File("keys.db").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
}

TEST_CASE("malformed, unknown, wrong-secret and revoked tokens do not authenticate") {
  const std::string kind = GENERATE("sqlite", "postgresql");
  StoreUnderTest under(kind);
  auto& store = under.store;
  auto created = store->Create({});
  REQUIRE(created);
  const std::string id = created->key.key_id;
  const std::string wrong = "tmcra_" + id + "." + std::string(64, 'a');
  for (const std::string& token :
       {std::string("tmcra_abc"), std::string("Bearer x"), std::string("tmcra_st_") + id + ".x",
        "tmcra_" + id + "." + std::string(63, 'a'),
        "tmcra_" + std::string(24, 'f') + "." + std::string(64, 'b'), wrong,
        created->token + " "}) {
    auto outcome = store->Authenticate(token);
    REQUIRE(outcome);
    CHECK_FALSE(outcome->key);
    CHECK_FALSE(outcome->reason.empty());
  }
  auto revoked = store->Revoke(id);
  REQUIRE(revoked);
  CHECK(*revoked);
  auto outcome = store->Authenticate(created->token);
  REQUIRE(outcome);
  CHECK_FALSE(outcome->key);
  CHECK(outcome->reason == "revoked key " + id);
  auto unknown = store->Revoke(std::string(24, '0'));
  REQUIRE(unknown);
  CHECK_FALSE(*unknown);
}

TEST_CASE("a key made without a permission list has all three") {
  const std::string kind = GENERATE("sqlite", "postgresql");
  StoreUnderTest under(kind);
  auto& store = under.store;
  auto all = store->Create({});
  REQUIRE(all);
  CHECK(all->key.permissions ==
        std::vector<std::string>{"memory:feedback", "memory:read", "memory:write"});
}

TEST_CASE("permissions and scope limits are validated and kept") {
  const std::string kind = GENERATE("sqlite", "postgresql");
  StoreUnderTest under(kind);
  auto& store = under.store;
  NewKeyRequest bad;
  bad.permissions = std::vector<std::string>{"memory:read", "tokens:manage"};
  CHECK_FALSE(store->Create(bad));
  NewKeyRequest bad_scope;
  bad_scope.scope_names = {"-x"};
  CHECK_FALSE(store->Create(bad_scope));
  // An empty list is an error, never every permission; only an absent one means the default.
  NewKeyRequest none;
  none.permissions = std::vector<std::string>{};
  auto refused = store->Create(none);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == tmcra::Errc::kInvalidArgument);

  NewKeyRequest request;
  request.permissions = std::vector<std::string>{"memory:read", "memory:read"};
  request.scope_names = {"alpha"};
  request.scope_prefixes = {"team-"};
  request.label = "ci";
  auto created = store->Create(request);
  REQUIRE(created);
  auto outcome = store->Authenticate(created->token);
  REQUIRE(outcome);
  REQUIRE(outcome->key);
  const ApiKey& key = *outcome->key;
  CHECK(key.permissions == std::vector<std::string>{"memory:read"});
  CHECK(key.Has("memory:read"));
  CHECK_FALSE(key.Has("memory:write"));
  CHECK(key.AllowsScope("alpha"));
  CHECK(key.AllowsScope("team-x"));
  CHECK_FALSE(key.AllowsScope("alphabet"));
  CHECK_FALSE(key.AllowsScope("team"));
  CHECK(key.label == "ci");

  auto list = store->List();
  REQUIRE(list);
  REQUIRE(list->size() == 1);
  const auto j = (*list)[0].ToJson();
  CHECK(j["key_id"] == key.key_id);
  CHECK(j["revoked_at"].is_null());
  CHECK(j.dump().find(ParseToken(created->token)->secret) == std::string::npos);
}

TEST_CASE("ConstantTimeEquals compares whole strings") {
  using tmcra::memd::ConstantTimeEquals;
  CHECK(ConstantTimeEquals("abc", "abc"));
  CHECK_FALSE(ConstantTimeEquals("abc", "abd"));
  CHECK_FALSE(ConstantTimeEquals("abc", "abcd"));
  CHECK(ConstantTimeEquals("", ""));
}

TEST_CASE(
    "keys in PostgreSQL are shared: a key one store makes, another revokes, and the first "
    "refuses") {
  tmcra::testing::ScratchDatabase database("shared_keys");
  auto a = KeyStore::OpenPostgres(database.Options());
  auto b = KeyStore::OpenPostgres(database.Options());
  REQUIRE(a);
  REQUIRE(b);
  auto created = (*a)->Create({});
  REQUIRE(created);
  auto seen = (*b)->Authenticate(created->token);
  REQUIRE(seen);
  CHECK(seen->key);
  auto revoked = (*b)->Revoke(created->key.key_id);
  REQUIRE(revoked);
  CHECK(*revoked);
  auto refused = (*a)->Authenticate(created->token);
  REQUIRE(refused);
  CHECK_FALSE(refused->key);
  CHECK(refused->reason == "revoked key " + created->key.key_id);
}

TEST_CASE("a server secret is made once and read back by every later caller") {
  const std::string kind = GENERATE("sqlite", "postgresql");
  StoreUnderTest s(kind);
  auto first = s.store->ServerSecret("mcp_session");
  REQUIRE(first);
  CHECK(first->size() == 64);
  auto again = s.store->ServerSecret("mcp_session");
  REQUIRE(again);
  CHECK(*again == *first);
  auto other = s.store->ServerSecret("another");
  REQUIRE(other);
  CHECK(*other != *first);
}

TEST_CASE("server records: kept, found until they expire, taken once, dropped by family") {
  const std::string kind = GENERATE("sqlite", "postgresql");
  StoreUnderTest s(kind);
  KeyStore& store = *s.store;
  const double later = tmcra::NowSeconds() + 600;
  REQUIRE(store.PutRecord({"code", "c1", "{\"a\":1}", "grant_1", later}));
  REQUIRE(store.PutRecord({"access", "t1", "{}", "grant_1", later}));
  REQUIRE(store.PutRecord({"access", "t2", "{}", "grant_2", later}));
  REQUIRE(store.PutRecord({"access", "old", "{}", "grant_3", tmcra::NowSeconds() - 1}));
  auto found = store.GetRecord("code", "c1");
  REQUIRE(found);
  REQUIRE(*found);
  CHECK((*found)->data == "{\"a\":1}");
  CHECK((*found)->family == "grant_1");
  auto expired = store.GetRecord("access", "old");
  REQUIRE(expired);
  CHECK_FALSE(*expired);  // expired: as if it were not there
  auto taken = store.TakeRecord("code", "c1");
  REQUIRE(taken);
  CHECK(*taken);
  auto again = store.TakeRecord("code", "c1");
  REQUIRE(again);
  CHECK_FALSE(*again);  // a code is taken once
  auto count = store.CountRecords("access", tmcra::NowSeconds() - 60);
  REQUIRE(count);
  CHECK(*count == 3);
  REQUIRE(store.DropRecordFamily("grant_1"));
  auto t1 = store.GetRecord("access", "t1");
  auto t2 = store.GetRecord("access", "t2");
  REQUIRE(t1);
  REQUIRE(t2);
  CHECK_FALSE(*t1);
  CHECK(*t2);
  REQUIRE(store.DropExpiredRecords());
  auto left = store.CountRecords("access", 0);
  REQUIRE(left);
  CHECK(*left == 1);
}
