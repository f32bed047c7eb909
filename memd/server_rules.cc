#include "memd/server_rules.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

#include "base/json_reader.h"
#include "memory/ingest_validation.h"
#include "src/api/api_status.h"
#include "src/api/http_wire.h"

namespace tmcra::memd {

namespace {

Error AttributionError(std::string_view header, const std::string& message) {
  json details =
      json::array({{{"loc", {"header", header}}, {"msg", message}, {"type", "value_error"}}});
  return Error::Api(Errc::kInvalidArgument, "invalid_usage_attribution",
                    std::string(header) + ": " + message, details.dump());
}

Error BodyError(const json& loc, std::string_view type, const std::string& message) {
  json details = json::array({{{"loc", loc}, {"msg", message}, {"type", type}}});
  return Error::Api(Errc::kInvalidArgument, "validation_error", "body: " + message, details.dump());
}

// 422 for a number no double holds, at `path` in the body (keys and indices).
Error NumberOutOfRange(const json& path) {
  json loc = json::array({"body"});
  for (const auto& step : path) loc.push_back(step);
  return BodyError(loc, "finite_number", "Input should be a finite number");
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view TrimView(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool IsKnownClientPlatform(std::string_view platform) {
  static constexpr std::array<std::string_view, 13> kPlatforms{
      "claude_code",   "codex",    "deepseek_harness", "hermes", "langgraph",  "mcp",
      "openai_agents", "openclaw", "python",           "rest",   "typescript", "vercel_ai_sdk",
      "zcode"};
  return std::find(kPlatforms.begin(), kPlatforms.end(), platform) != kPlatforms.end();
}

Status ValidateAttribution(const Attribution& a) {
  if (a.client_platform && !IsKnownClientPlatform(*a.client_platform)) {
    return AttributionError("X-TMCRA-Client-Platform",
                            "must be one of claude_code, codex, deepseek_harness, hermes, "
                            "langgraph, mcp, openai_agents, openclaw, python, rest, typescript, "
                            "vercel_ai_sdk, zcode");
  }
  if (a.integration_id && !IsValidIntegrationId(*a.integration_id)) {
    return AttributionError("X-TMCRA-Integration-ID",
                            "must match " + std::string(kIntegrationIdPattern));
  }
  if (a.agent_id && !IsValidAgentId(*a.agent_id)) {
    return AttributionError("X-TMCRA-Agent-ID", "must match " + std::string(kAgentIdPattern));
  }
  return Ok();
}

Error InvalidScopeError() {
  json details =
      json::array({{{"loc", {"path", "scope"}},
                    {"msg", "String should match pattern '" + std::string(kScopePattern) + "'"},
                    {"type", "string_pattern_mismatch"}}});
  return Error::Api(Errc::kInvalidArgument, "validation_error", "scope: invalid scope name",
                    details.dump());
}

static_assert(kMaxJobIdBytes == api::wire::kMaxSegmentBytes,
              "tmcra-memd takes every job id the client may send");

Result<std::vector<std::string>> ParseJobIds(const json& body) {
  using memory::ValidationError;
  for (const auto& [key, value] : body.items()) {
    if (key != "job_ids") {
      return ValidationError(key, "Extra inputs are not permitted", "extra_forbidden");
    }
  }
  auto ids = body.find("job_ids");
  if (ids == body.end()) return ValidationError("job_ids", "Field required", "missing");
  if (!ids->is_array()) {
    return ValidationError("job_ids", "Input should be a valid list", "list_type");
  }
  if (ids->empty()) {
    return ValidationError("job_ids", "List should have at least 1 item after validation, not 0",
                           "too_short");
  }
  if (ids->size() > kMaxJobsPerBatch) {
    return ValidationError("job_ids",
                           "List should have at most " + std::to_string(kMaxJobsPerBatch) +
                               " items after validation, not " + std::to_string(ids->size()),
                           "too_long");
  }
  std::vector<std::string> out;
  out.reserve(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    const json& id = (*ids)[i];
    const std::string at = "job_ids." + std::to_string(i);
    if (!id.is_string()) {
      return ValidationError(at, "Input should be a valid string", "string_type");
    }
    const auto& text = id.get_ref<const std::string&>();
    if (text.empty() || text.size() > kMaxJobIdBytes) {
      return ValidationError(at, "must be 1.." + std::to_string(kMaxJobIdBytes) + " bytes",
                             "string_length");
    }
    if (std::find(out.begin(), out.end(), text) != out.end()) {
      return ValidationError(at, "job ids must be unique");
    }
    out.push_back(text);
  }
  return out;
}

json JobsBatchEntry(const std::string& job_id, const Result<json>& job,
                    std::string_view request_id) {
  if (job) return json{{"job_id", job_id}, {"status_code", 200}, {"job", *job}};
  const Error& e = job.error();
  json body = ErrorBody(e.api_code, e.message, request_id, e.details_json);
  return json{
      {"job_id", job_id}, {"status_code", api::HttpStatusFor(e.code)}, {"error", body["error"]}};
}

Result<json> ParseBodyObject(std::string_view body, std::string_view content_type) {
  // FastAPI reads a body without Content-Type as JSON, and refuses other media types.
  std::string media = Lower(TrimView(content_type.substr(0, content_type.find(';'))));
  const bool json_media = media.empty() || media == "application/json" ||
                          (media.rfind("application/", 0) == 0 && media.size() > 5 &&
                           media.compare(media.size() - 5, 5, "+json") == 0);
  if (!json_media) {
    return BodyError(json::array({"body"}), "model_attributes_type",
                     "Content-Type must be application/json");
  }
  if (TrimView(body).empty()) return BodyError(json::array({"body"}), "missing", "Field required");
  if (NestingDepth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return BodyError(json::array({"body"}), "json_invalid",
                     "JSON decode error: nested deeper than 64");
  }
  json parsed;
  // The fast reader takes what it accepts (the same value json::parse builds); nlohmann parses
  // the rest, keeping the last value of a repeated key as Python does, or says where it failed.
  // A number no double holds (1e400) is a value the body cannot carry: pydantic's finite_number,
  // where the reader found it (nlohmann, reading past a repeated key, does not say where).
  const JsonReadResult read = ReadJsonStrict(body, parsed);
  if (read.number_out_of_range) return NumberOutOfRange(read.number_paths.front());
  if (!read.ok) {
    try {
      parsed = json::parse(body);
    } catch (const json::parse_error& e) {
      return BodyError(json::array({"body", e.byte}), "json_invalid", "JSON decode error");
    } catch (const json::out_of_range&) {
      return NumberOutOfRange(json::array());
    }
  }
  if (!parsed.is_object()) {
    return BodyError(json::array({"body"}), "model_attributes_type",
                     "Input should be a valid dictionary or object to extract fields from");
  }
  return parsed;
}

std::optional<std::vector<std::string>> SplitTargetPath(std::string_view target) {
  target = target.substr(0, target.find_first_of("?#"));
  std::vector<std::string> out;
  if (target.empty() || target.front() != '/') return std::nullopt;
  target.remove_prefix(1);
  for (;;) {
    const size_t slash = target.find('/');
    const std::string_view raw = target.substr(0, slash);
    std::string segment;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '%') {
        segment.push_back(raw[i]);
        continue;
      }
      const int hi = i + 1 < raw.size() ? HexValue(raw[i + 1]) : -1;
      const int lo = i + 2 < raw.size() ? HexValue(raw[i + 2]) : -1;
      if (hi < 0 || lo < 0) return std::nullopt;
      segment.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    }
    out.push_back(std::move(segment));
    if (slash == std::string_view::npos) break;
    target.remove_prefix(slash + 1);
  }
  return out;
}

json ErrorBody(std::string_view code, std::string_view message, std::string_view request_id,
               std::string_view details_json, double retry_after_seconds) {
  json details = nullptr;
  if (!details_json.empty()) {
    details = json::parse(details_json, nullptr, false);
    if (details.is_discarded()) details = nullptr;
  }
  return json{{"error",
               {{"code", code},
                {"message", message},
                {"request_id", request_id},
                {"details", std::move(details)},
                {"retry_after_seconds",
                 retry_after_seconds < 0 ? json(nullptr) : json(retry_after_seconds)}}}};
}

json EarlyErrorBody(std::string_view code, std::string_view request_id) {
  return json{{"error", {{"code", code}, {"request_id", request_id}}}};
}

bool IsLoopbackPeer(std::string_view address) {
  if (address == "::1") return true;
  constexpr std::string_view kMapped = "::ffff:";
  if (address.size() > kMapped.size()) {
    std::string lower(address.substr(0, kMapped.size()));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == kMapped) address.remove_prefix(kMapped.size());
  }
  if (address.substr(0, 4) != "127.") return false;
  // The rest must be three dot-separated decimal numbers 0..255 (an address, not a name).
  int parts = 1;
  int digits = 0;
  int value = 0;
  for (const char c : address.substr(4)) {
    if (c == '.') {
      if (digits == 0) return false;
      ++parts;
      digits = value = 0;
    } else if (c >= '0' && c <= '9') {
      value = value * 10 + (c - '0');
      if (++digits > 3 || value > 255) return false;
    } else {
      return false;
    }
  }
  return parts == 3 && digits > 0;
}

bool AcceptsGzip(std::string_view header) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    const size_t semi = item.find(';');
    const std::string coding = Lower(TrimView(item.substr(0, semi)));
    if (coding != "gzip" && coding != "*") continue;
    bool refused = false;
    if (semi != std::string_view::npos) {
      std::string params = Lower(item.substr(semi + 1));
      params.erase(std::remove(params.begin(), params.end(), ' '), params.end());
      if (params.rfind("q=", 0) == 0) {
        const std::string q = params.substr(2);
        refused = !q.empty() && q.find_first_not_of("0.") == std::string::npos;
      }
    }
    if (!refused) return true;
  }
  return false;
}

namespace {

// One deflate state per thread, reset between answers: a fresh one allocates about 270 kB
// (window and hash tables), which glibc maps and unmaps on every answer.
class Deflater {
 public:
  Deflater() {
    // Level 1: an answer is compressed once and read once, over a network that is rarely the
    // bottleneck; level 1 costs a fraction of the default's CPU for a few percent more bytes.
    ready_ = deflateInit2(&zs_, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  }
  ~Deflater() {
    if (ready_) deflateEnd(&zs_);
  }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  Result<std::string> Compress(std::string_view bytes) {
    if (!ready_ || deflateReset(&zs_) != Z_OK) return Error::Internal("gzip: deflateInit2 failed");
    std::string out;
    out.resize(deflateBound(&zs_, static_cast<uLong>(bytes.size())));
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zs_.avail_in = static_cast<uInt>(bytes.size());
    zs_.next_out = reinterpret_cast<Bytef*>(out.data());
    zs_.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&zs_, Z_FINISH);
    const size_t produced = out.size() - zs_.avail_out;
    if (rc != Z_STREAM_END) return Error::Internal("gzip: deflate did not finish");
    out.resize(produced);
    return out;
  }

 private:
  z_stream zs_{};
  bool ready_ = false;
};

}  // namespace

Result<std::string> Gzip(std::string_view bytes) {
  thread_local Deflater deflater;
  return deflater.Compress(bytes);
}

std::string ListenAddress::Origin(std::string_view scheme, int bound_port) const {
  const bool v6 = host.find(':') != std::string::npos;
  return std::string(scheme) + "://" + (v6 ? "[" + host + "]" : host) + ":" +
         std::to_string(bound_port);
}

Result<ListenAddress> ParseListen(std::string_view text) {
  ListenAddress out;
  std::string_view port_text = text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Error::Invalid("--listen: expected [IPV6]:PORT");
    }
    out.host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    if (colon > 0) out.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  if (out.host.empty()) return Error::Invalid("--listen: empty host");
  int port = -1;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() ||
      port < 0 || port > 65535) {
    return Error::Invalid("--listen: the port must be a number 0..65535");
  }
  out.port = port;
  return out;
}

}  // namespace tmcra::memd
