// The pieces of tmcra-memd's MCP endpoint that need no socket: signed session ids, the streams
// of answers that outlast their POST, and the caller-bound memory.
#include "memd/mcp_session.h"

#include <catch2/catch.hpp>
#include <thread>

#include "memd/caller_memory.h"
#include "memd/mcp_streams.h"
#include "tests/support/temp_dir.h"

using tmcra::memd::KeyStore;
using tmcra::memd::McpSession;
using tmcra::memd::SessionSigner;
using tmcra::memd::StreamStore;
using tmcra::testing::TempDir;

namespace {

constexpr int64_t kNow = 1'800'000'000;

McpSession Session() { return McpSession{"abc123", "2025-11-25", true, kNow, "n1"}; }

}  // namespace

TEST_CASE("a session id carries its session and verifies under the same secret only") {
  SessionSigner signer(std::string(64, 'a'));
  const std::string id = signer.Issue(Session());
  for (char c : id) CHECK((c >= 0x21 && c <= 0x7e));  // visible ASCII, as the transport requires
  auto back = signer.Verify(id, kNow + 60);
  REQUIRE(back);
  CHECK(back->key_id == "abc123");
  CHECK(back->version == "2025-11-25");
  CHECK(back->elicitation);
  CHECK_FALSE(SessionSigner(std::string(64, 'b')).Verify(id, kNow));
}

TEST_CASE("a tampered, malformed or expired session id is no session") {
  SessionSigner signer(std::string(64, 'a'));
  const std::string id = signer.Issue(Session());
  std::string tampered = id;
  tampered[5] = tampered[5] == '0' ? '1' : '0';
  CHECK_FALSE(signer.Verify(tampered, kNow));
  CHECK_FALSE(signer.Verify(id.substr(0, id.size() - 1), kNow));
  CHECK_FALSE(signer.Verify("s1.zz.zz", kNow));
  CHECK_FALSE(signer.Verify("", kNow));
  CHECK_FALSE(signer.Verify("nonsense", kNow));
  const int64_t lifetime = tmcra::memd::kSessionLifetime.count() * 3600;
  CHECK(signer.Verify(id, kNow + lifetime));
  CHECK_FALSE(signer.Verify(id, kNow + lifetime + 1));
  CHECK_FALSE(signer.Verify(id, kNow - 3600));  // begun in the future
}

TEST_CASE("two sessions begun at once differ") {
  SessionSigner signer(std::string(64, 'a'));
  McpSession a = Session(), b = Session();
  a.nonce.clear();
  b.nonce.clear();
  CHECK(signer.Issue(a) != signer.Issue(b));
}

TEST_CASE("a stream's answer waits for its key's GET, as often as asked, in any process") {
  TempDir dir;
  auto keys = KeyStore::Open(dir.path());
  REQUIRE(keys);
  StreamStore streams(**keys);
  auto opened = streams.Open("key1");
  REQUIRE(opened);
  const std::string id = *opened;
  std::string message;
  const auto soon = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  CHECK(streams.Wait(id, "key1", soon, &message) == StreamStore::Found::kPending);
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    streams.Finish(id, "key1", "{\"id\":1}");
  });
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  CHECK(streams.Wait(id, "key1", later, &message) == StreamStore::Found::kReady);
  finisher.join();
  CHECK(message == "{\"id\":1}");
  CHECK(streams.Wait(id, "key1", later, &message) == StreamStore::Found::kReady);
  CHECK(streams.Wait(id, "key2", later, &message) == StreamStore::Found::kUnknown);
  CHECK(streams.Wait("nope", "key1", later, &message) == StreamStore::Found::kUnknown);
  // Another process on the same store (here: another StreamStore over another KeyStore) finds it.
  auto other_keys = KeyStore::Open(dir.path());
  REQUIRE(other_keys);
  StreamStore other(**other_keys);
  CHECK(other.Wait(id, "key1", later, &message) == StreamStore::Found::kReady);
}

namespace {

// A memory that answers every call, recording the scope it was asked for.
class RecordingMemory final : public tmcra::api::MemoryApi {
 public:
  std::string last;
  tmcra::Result<nlohmann::json> Recall(std::string_view scope, const nlohmann::json&,
                                       const tmcra::api::RecallOptions&) override {
    last = "recall " + std::string(scope);
    return nlohmann::json::object();
  }
  tmcra::Result<nlohmann::json> Ingest(std::string_view scope, const nlohmann::json&,
                                       const tmcra::api::IngestOptions&) override {
    last = "ingest " + std::string(scope);
    return nlohmann::json::object();
  }
  tmcra::Result<nlohmann::json> IngestBatch(std::string_view scope, const nlohmann::json& b,
                                            const tmcra::api::IngestOptions& o) override {
    return Ingest(scope, b, o);
  }
  tmcra::Result<nlohmann::json> GetJob(std::string_view) override {
    return nlohmann::json{{"job_id", "job_1"}, {"scope_name", "team"}};
  }
  tmcra::Result<nlohmann::json> Evidence(std::string_view, std::string_view, int) override {
    return nlohmann::json::object();
  }
  tmcra::Result<nlohmann::json> Feedback(std::string_view scope, const nlohmann::json&,
                                         const tmcra::api::FeedbackOptions&) override {
    last = "feedback " + std::string(scope);
    return nlohmann::json::object();
  }
  nlohmann::json Describe() const override { return nlohmann::json::object(); }
  tmcra::Result<nlohmann::json> Stats() override { return nlohmann::json::object(); }
};

}  // namespace

TEST_CASE("the caller's memory refuses what the key does not grant, as the REST routes do") {
  RecordingMemory memory;
  tmcra::memd::ApiKey key;
  key.key_id = "k";
  key.permissions = {"memory:read", "memory:feedback"};
  key.scope_names = {"other"};
  tmcra::memd::CallerMemoryApi caller(memory, key);
  CHECK(caller.Recall("other", nlohmann::json::object(), {}));
  CHECK(memory.last == "recall other");
  auto foreign = caller.Recall("team", nlohmann::json::object(), {});
  REQUIRE_FALSE(foreign);
  CHECK(foreign.error().code == tmcra::Errc::kPermissionDenied);
  CHECK(foreign.error().api_code == "forbidden");
  CHECK(foreign.error().message == "the API key is not valid for this scope");
  auto write = caller.Ingest("other", nlohmann::json::object(), {});
  REQUIRE_FALSE(write);
  CHECK(write.error().message == "memory:write is required");
  auto correct = caller.Feedback("other", nlohmann::json{{"action", "correct"}}, {});
  REQUIRE_FALSE(correct);
  CHECK(correct.error().message == "memory:write is required to save a correction");
  auto job = caller.GetJob("job_1");  // of scope "team"
  REQUIRE_FALSE(job);
  CHECK(job.error().message == "the API key is not valid for this job's scope");
}
