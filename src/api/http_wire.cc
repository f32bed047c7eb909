#include "src/api/http_wire.h"

#include <utility>

#include "base/json_reader.h"
#include "base/utf8.h"
#include "src/api/api_status.h"

namespace tmcra::api::wire {

namespace {

using json = nlohmann::json;

std::string WithRequestId(std::string message, std::string_view request_id) {
  if (!request_id.empty()) {
    message += " (request id ";
    message += SafeText(request_id, 128);
    message += ")";
  }
  return message;
}

Error InvalidJson(std::string message, std::string_view request_id) {
  Error error = Error::Protocol(WithRequestId(std::move(message), request_id));
  error.api_code = "invalid_json_response";
  return error;
}

// Strict parse without exceptions, nesting capped at kMaxResponseDepth: a discarded value on
// any failure; `why` tells a duplicate key (a second value under one key is ambiguous: which
// would the service mean?) and too deep a nesting apart from a syntax error. The caller refuses
// a BOM and NUL bytes first, the two inputs on which nlohmann's parser would be more lenient.
json StrictParse(std::string_view body, JsonReadResult* why, ElidedMember* elide = nullptr) {
  json value;
  *why = ReadJsonStrict(body, value, kMaxResponseDepth, elide);
  return why->ok ? std::move(value) : json(json::value_t::discarded);
}

}  // namespace

Status CheckPathSegment(std::string_view value, std::string_view field) {
  const std::string name(field);
  if (value.empty()) return Error::Invalid(name + ": must not be empty");
  if (value == "." || value == "..") return Error::Invalid(name + ": must not be '.' or '..'");
  if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) {
    return Error::Invalid(name + ": must not contain CR, LF or NUL");
  }
  if (value.size() > kMaxSegmentBytes) {
    return Error::Invalid(name + ": longer than " + std::to_string(kMaxSegmentBytes) + " bytes");
  }
  return Ok();
}

Status CheckHeaderValue(std::string_view value, std::string_view field) {
  const std::string name(field);
  for (char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      return Error::Invalid(name + ": must not contain control characters (CR, LF, NUL, ...)");
    }
  }
  if (!value.empty() && (value.front() == ' ' || value.back() == ' ')) {
    return Error::Invalid(name + ": must not start or end with a space");
  }
  return Ok();
}

Result<json> ParseResponseObject(std::string_view body, int status, std::string_view request_id,
                                 ElidedMember* elide) {
  const std::string what = "TMCRA returned ";
  const std::string with_status = " with HTTP " + std::to_string(status);
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return InvalidJson(what + "an empty body" + with_status, request_id);
  }
  if (body.size() >= 3 && body.substr(0, 3) == "\xEF\xBB\xBF") {
    return InvalidJson(what + "a body starting with a byte order mark" + with_status, request_id);
  }
  if (body.find('\0') != std::string_view::npos) {
    // Never valid JSON, and nlohmann's lexer would take it for the end of the input, ignoring
    // whatever follows.
    return InvalidJson(what + "a body with a NUL byte" + with_status, request_id);
  }
  JsonReadResult why;
  json value = StrictParse(body, &why, elide);
  if (why.too_deep) {
    return InvalidJson(what + "JSON nested deeper than " + std::to_string(kMaxResponseDepth) +
                           " levels" + with_status,
                       request_id);
  }
  if (why.duplicate_key) {
    return InvalidJson(what + "JSON with a duplicate object key" + with_status, request_id);
  }
  if (value.is_discarded()) {
    return InvalidJson(what + "invalid JSON" + with_status, request_id);
  }
  if (!value.is_object()) {
    return InvalidJson(what + "a non-object JSON response" + with_status, request_id);
  }
  return value;
}

Error ApiError(int status, std::string_view body, std::string_view request_id_header,
               const std::vector<std::string>& secrets) {
  json payload;
  if (!body.empty() && body.substr(0, 3) != "\xEF\xBB\xBF" &&
      body.find('\0') == std::string_view::npos) {
    JsonReadResult why;
    payload = StrictParse(body, &why);
    if (why.duplicate_key) payload = json();  // ambiguous: as if there were no envelope
  }
  json envelope = json::object();
  if (payload.is_object()) {
    auto it = payload.find("error");
    if (it != payload.end() && it->is_object()) envelope = *it;
  }
  const auto text_field = [&](const char* key) -> std::string {
    auto it = envelope.find(key);
    if (it == envelope.end() || !it->is_string()) return {};
    return Redact(it->get<std::string>(), secrets);
  };
  std::string code = SafeText(text_field("code"), 100);
  if (code.empty()) code = "http_error";
  std::string message = SafeText(text_field("message"), kMaxErrorMessageBytes);
  if (message.empty()) message = "TMCRA returned HTTP " + std::to_string(status);
  if (status >= 300 && status < 400) {
    message += "; redirects are not followed (check the Memory API base URL)";
  }
  std::string request_id = text_field("request_id");
  if (request_id.empty()) request_id = std::string(request_id_header);
  std::string details;
  if (auto it = envelope.find("details"); it != envelope.end() && !it->is_null()) {
    details = Redact(it->dump(-1, ' ', false, json::error_handler_t::replace), secrets);
    if (details.size() > kMaxErrorDetailsBytes) details.clear();
  }
  return ErrorFromStatus(status, std::move(code), WithRequestId(std::move(message), request_id),
                         std::move(details));
}

Result<std::vector<Result<json>>> ReadJobsBatch(const json& answer,
                                                const std::vector<std::string>& job_ids,
                                                std::string_view request_id,
                                                const std::vector<std::string>& secrets) {
  const auto refuse = [&](const std::string& why) {
    return InvalidJson("TMCRA returned a jobs batch answer that " + why, request_id);
  };
  auto jobs = answer.find("jobs");
  if (!answer.is_object() || jobs == answer.end() || !jobs->is_array()) {
    return refuse("has no \"jobs\" array");
  }
  if (jobs->size() != job_ids.size()) {
    return refuse("holds " + std::to_string(jobs->size()) + " entries for " +
                  std::to_string(job_ids.size()) + " job ids");
  }
  std::vector<Result<json>> out;
  out.reserve(job_ids.size());
  for (size_t i = 0; i < job_ids.size(); ++i) {
    const json& entry = (*jobs)[i];
    const std::string at = "jobs." + std::to_string(i);
    if (!entry.is_object()) return refuse("has a non-object entry at " + at);
    auto id = entry.find("job_id");
    if (id == entry.end() || !id->is_string() || id->get_ref<const std::string&>() != job_ids[i]) {
      return refuse("names another job at " + at);
    }
    auto code = entry.find("status_code");
    if (code == entry.end() || !code->is_number_integer()) {
      return refuse("has no integer status_code at " + at);
    }
    const int64_t status = code->get<int64_t>();
    if (status == 200) {
      auto job = entry.find("job");
      if (job == entry.end() || !job->is_object()) return refuse("has no job object at " + at);
      out.emplace_back(*job);
    } else if (status >= 400 && status <= 599) {
      json envelope = json::object();
      if (auto e = entry.find("error"); e != entry.end()) envelope["error"] = *e;
      out.emplace_back(ApiError(static_cast<int>(status),
                                envelope.dump(-1, ' ', false, json::error_handler_t::replace),
                                request_id, secrets));
    } else {
      return refuse("has status_code " + std::to_string(status) + " at " + at);
    }
  }
  return out;
}

std::string SafeText(std::string_view text, size_t max_bytes) {
  std::string clean = SanitizeUtf8(text);
  for (char& c : clean) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) c = ' ';
  }
  if (clean.size() <= max_bytes) return clean;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(clean[cut]) & 0xC0) == 0x80) --cut;
  clean.resize(cut);
  clean += "...";
  return clean;
}

std::string Redact(std::string text, const std::vector<std::string>& secrets) {
  static constexpr std::string_view kMark = "[REDACTED]";
  for (const auto& secret : secrets) {
    if (secret.empty()) continue;
    for (size_t at = text.find(secret); at != std::string::npos;
         at = text.find(secret, at + kMark.size())) {
      text.replace(at, secret.size(), kMark);
    }
  }
  return text;
}

std::vector<std::string> SecretsOf(std::string_view api_key) {
  std::vector<std::string> out;
  if (api_key.empty()) return out;
  out.emplace_back(api_key);
  const size_t dot = api_key.rfind('.');
  if (dot != std::string_view::npos && api_key.size() - dot - 1 >= 8) {
    out.emplace_back(api_key.substr(dot + 1));
  }
  return out;
}

}  // namespace tmcra::api::wire
