// tmcra-memd's HTTP front in-process over a memory that fails on purpose (what the real engine
// does only on a failing disk): POST /v1/jobs/batch answers a job the store could not read
// with that entry's 500 and the others as usual, a busy store with the whole request's 503,
// and GET /v1/jobs/{id} the same as the batch entry. The store's own error text stays in the
// log. Plain HTTP on 127.0.0.1 (no TLS material), a raw HTTP/1.1 client.
#include "memd/memd_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "memd/key_store.h"
#include "tests/support/temp_dir.h"
#include "tests/support/unused_memory_api.h"

using json = nlohmann::json;
using tmcra::Error;
using tmcra::Result;
using tmcra::testing::TempDir;

namespace {

constexpr const char* kStoreError = "disk I/O error reading /srv/tmcra/memory.db page 4711";

// Jobs only: job_ok and job_other (another scope) are there, job_broken cannot be read,
// job_busy finds the store busy, anything else is unknown.
class JobsMemory final : public tmcra::testing::UnusedMemoryApi {
 public:
  Result<json> GetJob(std::string_view job_id) override {
    if (job_id == "job_ok") {
      return json{{"job_id", "job_ok"}, {"scope_name", "s"}, {"status", "succeeded"}};
    }
    if (job_id == "job_other") return json{{"job_id", "job_other"}, {"scope_name", "elsewhere"}};
    if (job_id == "job_broken") return Error::Internal(kStoreError);
    if (job_id == "job_busy") return Error::Unavailable("database is locked");
    return Error::Api(tmcra::Errc::kNotFound, "not_found", "job not found");
  }
};

struct Answer {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

// One request on a new connection (Connection: close), the answer read to the end.
Answer Send(int port, const std::string& method, const std::string& target,
            const std::string& token, const std::string& body = "") {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // A server that never answers or never closes fails the test instead of hanging the suite.
  const timeval timeout{10, 0};
  REQUIRE(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) == 0);
  REQUIRE(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout) == 0);
  REQUIRE(connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  std::string request = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                        "Authorization: Bearer " + token + "\r\nConnection: close\r\n";
  if (method == "POST") {
    request +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  for (size_t done = 0; done < request.size();) {
    const ssize_t n = write(fd, request.data() + done, request.size() - done);
    if (n < 0 && errno == EINTR) continue;
    REQUIRE(n > 0);
    done += static_cast<size_t>(n);
  }
  std::string raw;
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    REQUIRE(n >= 0);  // not a timeout: the server closed the connection after its answer
    if (n == 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  Answer answer;
  const size_t head_end = raw.find("\r\n\r\n");
  REQUIRE(head_end != std::string::npos);
  REQUIRE(raw.rfind("HTTP/1.1 ", 0) == 0);
  answer.status = std::stoi(raw.substr(9, 3));
  size_t at = raw.find("\r\n") + 2;
  while (at < head_end) {
    const size_t eol = raw.find("\r\n", at);
    const std::string line = raw.substr(at, eol - at);
    const size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    REQUIRE(colon != std::string::npos);
    const size_t value = line.find_first_not_of(' ', colon + 1);
    answer.headers[name] = value == std::string::npos ? "" : line.substr(value);
    at = eol + 2;
  }
  answer.body = raw.substr(head_end + 4);
  return answer;
}

class ServerFixture {
 public:
  ServerFixture() {
    auto keys = tmcra::memd::KeyStore::Open(dir_.path());
    REQUIRE(keys);
    keys_ = std::move(*keys);
    auto created = keys_->Create({std::vector<std::string>{"memory:read"}, {"s"}, {}, "jobs test"});
    REQUIRE(created);
    token_ = created->token;
    tmcra::memd::ServerOptions options;
    options.threads = 2;
    server_ = std::make_unique<tmcra::memd::Server>(options, *keys_);
    auto port = server_->Bind();
    REQUIRE(port);
    port_ = *port;
    serving_ = std::thread([this] { (void)server_->Serve(memory_); });
  }
  ~ServerFixture() {
    server_->Stop();
    serving_.join();
  }
  ServerFixture(const ServerFixture&) = delete;
  ServerFixture& operator=(const ServerFixture&) = delete;

  Answer Post(const std::string& target, const json& body) {
    return Send(port_, "POST", target, token_, body.dump());
  }
  Answer Get(const std::string& target) { return Send(port_, "GET", target, token_); }

 private:
  TempDir dir_;
  std::unique_ptr<tmcra::memd::KeyStore> keys_;
  JobsMemory memory_;
  std::unique_ptr<tmcra::memd::Server> server_;
  std::string token_;
  int port_ = 0;
  std::thread serving_;
};

}  // namespace

TEST_CASE_METHOD(ServerFixture,
                 "jobs/batch answers a job the store could not read with its own 500 entry "
                 "and every other job as usual",
                 "[memd][jobs]") {
  const Answer a =
      Post("/v1/jobs/batch", {{"job_ids", {"job_ok", "job_broken", "job_missing", "job_other"}}});
  REQUIRE(a.status == 200);
  CHECK(a.body.find("disk I/O") == std::string::npos);
  CHECK(a.body.find("/srv/tmcra") == std::string::npos);
  const json body = json::parse(a.body);
  const json& jobs = body.at("jobs");
  REQUIRE(jobs.size() == 4);
  CHECK(jobs[0].at("job_id") == "job_ok");
  CHECK(jobs[0].at("status_code") == 200);
  CHECK(jobs[0].at("job").at("status") == "succeeded");
  CHECK(jobs[1].at("job_id") == "job_broken");
  CHECK(jobs[1].at("status_code") == 500);
  CHECK(jobs[1].at("error").at("code") == "internal_error");
  CHECK(jobs[1].at("error").at("message") == "internal error");
  CHECK(jobs[1].at("error").at("request_id") == a.headers.at("x-request-id"));
  CHECK(jobs[2].at("status_code") == 404);
  CHECK(jobs[2].at("error").at("code") == "not_found");
  CHECK(jobs[3].at("status_code") == 403);  // the key may read scope "s" only
  CHECK(jobs[3].at("error").at("code") == "forbidden");
  CHECK_FALSE(jobs[3].contains("job"));

  // The single endpoint answers the same job the same way.
  const Answer one = Get("/v1/jobs/job_broken");
  CHECK(one.status == 500);
  CHECK(json::parse(one.body).at("error").at("code") == "internal_error");
  CHECK(one.body.find("disk I/O") == std::string::npos);
  CHECK(Get("/v1/jobs/job_ok").status == 200);
}

TEST_CASE_METHOD(ServerFixture,
                 "jobs/batch answers a busy store with the whole request's 503 and Retry-After",
                 "[memd][jobs]") {
  const Answer a = Post("/v1/jobs/batch", {{"job_ids", {"job_ok", "job_busy", "job_broken"}}});
  CHECK(a.status == 503);
  CHECK(a.headers.at("retry-after") == "1");
  const json body = json::parse(a.body);
  CHECK(body.at("error").at("code") == "unavailable");
  CHECK_FALSE(body.contains("jobs"));
  CHECK(a.body.find("locked") == std::string::npos);

  const Answer one = Get("/v1/jobs/job_busy");
  CHECK(one.status == 503);
  CHECK(one.headers.at("retry-after") == "1");
  CHECK(one.body.find("locked") == std::string::npos);

  // Busy wins wherever it stands: an unreadable job before it does not make the batch a 200.
  const Answer later = Post("/v1/jobs/batch", {{"job_ids", {"job_broken", "job_busy"}}});
  CHECK(later.status == 503);
}
