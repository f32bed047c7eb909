#include "src/api/embeddings_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>

#include "base/version.h"
#include "src/api/http_wire.h"
#include "src/config/libcurl.h"
#include "src/config/url.h"

namespace tmcra::api {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxServiceMessageBytes = 300;
constexpr size_t kMaxIdleHandles = 4;

struct CurlFunctions {
  decltype(&::curl_global_init) global_init = nullptr;
  decltype(&::curl_easy_init) easy_init = nullptr;
  decltype(&::curl_easy_setopt) easy_setopt = nullptr;
  decltype(&::curl_easy_perform) easy_perform = nullptr;
  decltype(&::curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&::curl_easy_reset) easy_reset = nullptr;
  decltype(&::curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&::curl_easy_strerror) easy_strerror = nullptr;
  decltype(&::curl_slist_append) slist_append = nullptr;
  decltype(&::curl_slist_free_all) slist_free_all = nullptr;
};

Result<CurlFunctions> ResolveCurlFunctions() {
  CurlFunctions f;
  for (Status s : {config::ResolveLibcurl(f.global_init, "curl_global_init"),
                   config::ResolveLibcurl(f.easy_init, "curl_easy_init"),
                   config::ResolveLibcurl(f.easy_setopt, "curl_easy_setopt"),
                   config::ResolveLibcurl(f.easy_perform, "curl_easy_perform"),
                   config::ResolveLibcurl(f.easy_getinfo, "curl_easy_getinfo"),
                   config::ResolveLibcurl(f.easy_reset, "curl_easy_reset"),
                   config::ResolveLibcurl(f.easy_cleanup, "curl_easy_cleanup"),
                   config::ResolveLibcurl(f.easy_strerror, "curl_easy_strerror"),
                   config::ResolveLibcurl(f.slist_append, "curl_slist_append"),
                   config::ResolveLibcurl(f.slist_free_all, "curl_slist_free_all")}) {
    if (!s) return s.error();
  }
  return f;
}

const Result<CurlFunctions>& Curl() {
  static const Result<CurlFunctions> loaded = ResolveCurlFunctions();
  return loaded;
}

struct Answer {
  std::string body;
  size_t limit = 0;
  bool too_large = false;
  const std::atomic<bool>* stop = nullptr;  // the caller's: abort the transfer when true
};

// Called by libcurl about once a second and whenever data moves: aborts when asked to stop.
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) noexcept {
  const auto* answer = static_cast<const Answer*>(user);
  return answer->stop != nullptr && answer->stop->load() ? 1 : 0;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) noexcept {
  auto* answer = static_cast<Answer*>(user);
  const size_t bytes = size * count;
  if (bytes > answer->limit - answer->body.size()) {
    answer->too_large = true;
    return 0;
  }
  try {
    answer->body.append(data, bytes);
  } catch (...) {
    answer->too_large = true;
    return 0;
  }
  return bytes;
}

bool RetryableStatus(long status) {
  return status == 408 || status == 429 || (status >= 500 && status <= 599);
}

// The vectors of a strict JSON answer, in input order.
Result<std::vector<std::vector<float>>> ReadVectors(const json& answer, config::EmbeddingsApi api) {
  const Error shape = Error{Errc::kProtocol, false,
                            api == config::EmbeddingsApi::kOllama
                                ? "the embeddings answer has no \"embeddings\" array of arrays"
                                : "the embeddings answer has no \"data\" array of "
                                  "{\"index\", \"embedding\"}"};
  std::vector<std::pair<int64_t, const json*>> rows;
  if (api == config::EmbeddingsApi::kOllama) {
    const auto it = answer.find("embeddings");
    if (it == answer.end() || !it->is_array()) return shape;
    for (size_t i = 0; i < it->size(); ++i) rows.emplace_back(i, &(*it)[i]);
  } else {
    const auto it = answer.find("data");
    if (it == answer.end() || !it->is_array()) return shape;
    for (const auto& row : *it) {
      if (!row.is_object() || !row.contains("embedding") ||
          !row.value("index", json()).is_number_integer())
        return shape;
      rows.emplace_back(row["index"].get<int64_t>(), &row["embedding"]);
    }
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].first != static_cast<int64_t>(i)) {
        return Error{Errc::kProtocol, false,
                     "the embeddings answer's indexes are not 0 to " +
                         std::to_string(rows.size() - 1) + ", each once"};
      }
    }
  }
  std::vector<std::vector<float>> out;
  for (const auto& [index, values] : rows) {
    if (!values->is_array()) return shape;
    std::vector<float> v;
    v.reserve(values->size());
    for (const auto& x : *values) {
      if (!x.is_number()) return shape;
      v.push_back(x.get<float>());
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

struct EmbeddingsClient::Impl {
  EmbeddingsOptions options;
  config::EmbeddingsApi api = config::EmbeddingsApi::kOllama;
  bool loopback = false;
  std::string authorization;
  std::string user_agent = std::string(kProductName) + "/" + kVersion;
  std::mutex pool_mu;
  std::vector<CURL*> idle;  // guarded by pool_mu

  ~Impl() {
    for (CURL* h : idle) Curl()->easy_cleanup(h);
  }

  CURL* Acquire() {
    {
      std::lock_guard lock(pool_mu);
      if (!idle.empty()) {
        CURL* h = idle.back();
        idle.pop_back();
        return h;
      }
    }
    return Curl()->easy_init();
  }

  void Release(CURL* h) {
    Curl()->easy_reset(h);
    std::lock_guard lock(pool_mu);
    if (idle.size() < kMaxIdleHandles) {
      idle.push_back(h);
    } else {
      Curl()->easy_cleanup(h);
    }
  }

  std::string Scrub(std::string text) const {
    if (options.api_key.empty()) return text;
    return wire::Redact(std::move(text), {options.api_key});
  }

  std::string Body(const std::vector<std::string>& texts) const {
    json body{{"model", options.model}, {"input", texts}};
    if (api == config::EmbeddingsApi::kOpenAi) body["encoding_format"] = "float";
    return body.dump(-1, ' ', false, json::error_handler_t::replace);
  }

  CURLcode Configure(CURL* h, curl_slist* headers, const std::string& body, Answer& answer,
                     char* errbuf, std::chrono::milliseconds timeout) const {
    const auto& c = *Curl();
    const char* protocols = loopback ? "http,https" : "https";
    CURLcode rc = CURLE_OK;
    const auto set = [&](CURLoption option, auto value) {
      if (rc == CURLE_OK) rc = c.easy_setopt(h, option, value);
    };
    set(CURLOPT_URL, options.url.c_str());
    set(CURLOPT_PROTOCOLS_STR, protocols);
    set(CURLOPT_FOLLOWLOCATION, 0L);
    set(CURLOPT_NOSIGNAL, 1L);
    set(CURLOPT_ERRORBUFFER, errbuf);
    set(CURLOPT_HTTPHEADER, headers);
    set(CURLOPT_POST, 1L);
    set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    set(CURLOPT_POSTFIELDS, body.c_str());
    set(CURLOPT_WRITEFUNCTION, &OnBody);
    set(CURLOPT_WRITEDATA, static_cast<void*>(&answer));
    set(CURLOPT_NOPROGRESS, 0L);
    set(CURLOPT_XFERINFOFUNCTION, &OnProgress);
    set(CURLOPT_XFERINFODATA, static_cast<void*>(&answer));
    set(CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<int64_t>(1, timeout.count())));
    set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::max<int64_t>(1, timeout.count())));
    set(CURLOPT_SSL_VERIFYPEER, 1L);
    set(CURLOPT_SSL_VERIFYHOST, 2L);
    set(CURLOPT_ACCEPT_ENCODING, "");
    set(CURLOPT_USERAGENT, user_agent.c_str());
    if (!options.ca_file.empty()) set(CURLOPT_CAINFO, options.ca_file.c_str());
    if (loopback) set(CURLOPT_PROXY, "");
    return rc;
  }

  Result<curl_slist*> Headers() const {
    const auto& c = *Curl();
    curl_slist* list = nullptr;
    for (const std::string& line :
         {std::string("Content-Type: application/json"), std::string("Expect:"), authorization}) {
      if (line.empty()) continue;
      curl_slist* next = c.slist_append(list, line.c_str());
      if (next == nullptr) {
        c.slist_free_all(list);
        return Error::Internal("out of memory building the embeddings request");
      }
      list = next;
    }
    return list;
  }

  Error TransportError(CURLcode code, const char* errbuf) const {
    std::string detail = errbuf[0] != '\0' ? errbuf : Curl()->easy_strerror(code);
    detail = "the embeddings service could not be reached: " +
             wire::SafeText(Scrub(std::move(detail)), kMaxServiceMessageBytes);
    if (code == CURLE_OPERATION_TIMEDOUT) return Error{Errc::kTimeout, true, detail};
    return Error::Unavailable(detail);
  }

  Error StatusError(long status, const std::string& body) const {
    std::string message = "the embeddings service answered HTTP " + std::to_string(status);
    if (!body.empty()) {
      message += ": " + wire::SafeText(Scrub(body), kMaxServiceMessageBytes);
    }
    return Error{RetryableStatus(status) ? Errc::kUnavailable : Errc::kInvalidArgument,
                 RetryableStatus(status), message};
  }

  Result<std::vector<std::vector<float>>> Post(const std::vector<std::string>& texts,
                                               std::chrono::milliseconds timeout,
                                               const std::atomic<bool>* stop) {
    const std::string body = Body(texts);
    TMCRA_ASSIGN_OR_RETURN(curl_slist * headers, Headers());
    Answer answer;
    answer.limit = options.max_response_bytes;
    answer.stop = stop;
    char errbuf[CURL_ERROR_SIZE] = {0};
    CURL* h = Acquire();
    if (h == nullptr) {
      Curl()->slist_free_all(headers);
      return Error::Internal("libcurl could not make a handle");
    }
    CURLcode rc = Configure(h, headers, body, answer, errbuf, timeout);
    if (rc == CURLE_OK) rc = Curl()->easy_perform(h);
    long status = 0;
    Curl()->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    Release(h);
    Curl()->slist_free_all(headers);
    if (answer.too_large) {
      return Error{Errc::kProtocol, false, "the embeddings answer is larger than allowed"};
    }
    if (rc != CURLE_OK) return TransportError(rc, errbuf);
    if (status != 200) return StatusError(status, answer.body);
    auto parsed = wire::ParseResponseObject(answer.body, 200, "");
    if (!parsed) {
      return Error{Errc::kProtocol, false,
                   "the embeddings service's answer is not one strict JSON object"};
    }
    return ReadVectors(*parsed, api);
  }
};

Result<std::unique_ptr<EmbeddingsClient>> EmbeddingsClient::Create(EmbeddingsOptions options) {
  TMCRA_ASSIGN_OR_RETURN(const config::EmbeddingsApi api,
                         config::CheckEmbeddingsUrl(options.url, "embeddings URL"));
  if (options.model.empty()) return Error::Invalid("embeddings model: must be given");
  if (options.api_key.find_first_of("\r\n") != std::string::npos) {
    return Error::Invalid("embeddings key: must be one line");
  }
  if (std::getenv("SSLKEYLOGFILE") != nullptr && !options.allow_keylog) {
    return Error::Invalid(
        "SSLKEYLOGFILE is set: the embeddings client refuses to start, because libcurl would "
        "write the TLS session keys to that file");
  }
  if (!Curl()) return Curl().error();
  static const CURLcode initialised = Curl()->global_init(CURL_GLOBAL_DEFAULT);
  if (initialised != CURLE_OK) return Error::Internal("libcurl could not be initialised");
  auto impl = std::make_unique<Impl>();
  impl->api = api;
  impl->loopback = options.url.rfind("http://", 0) == 0;
  if (!options.api_key.empty()) impl->authorization = "Authorization: Bearer " + options.api_key;
  impl->options = std::move(options);
  return std::unique_ptr<EmbeddingsClient>(new EmbeddingsClient(std::move(impl)));
}

EmbeddingsClient::EmbeddingsClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EmbeddingsClient::~EmbeddingsClient() = default;

const std::string& EmbeddingsClient::model() const { return impl_->options.model; }

Result<std::vector<std::vector<float>>> EmbeddingsClient::Embed(
    const std::vector<std::string>& texts, std::chrono::milliseconds timeout,
    const std::atomic<bool>* stop) {
  return impl_->Post(texts, timeout, stop);
}

}  // namespace tmcra::api
