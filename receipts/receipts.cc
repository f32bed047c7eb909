#include "receipts/receipts.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/sha256.h"
#include "base/utf8.h"
#include "receipts/fields.h"

namespace tmcra::receipts {

namespace {

using internal::Fields;
using internal::Quote;
using internal::Violation;

constexpr std::array<std::string_view, 6> kKnownJobStatuses = {"pending",   "queued", "running",
                                                               "succeeded", "failed", "cancelled"};

template <size_t N>
bool OneOf(std::string_view value, const std::array<std::string_view, N>& allowed) {
  return std::find(allowed.begin(), allowed.end(), value) != allowed.end();
}

template <size_t N>
std::string Listed(const std::array<std::string_view, N>& allowed) {
  std::string out;
  for (const auto item : allowed) {
    if (!out.empty()) out += ", ";
    out.append(item);
  }
  return out;
}

// A required member that must be one of `allowed`.
template <size_t N>
Result<const std::string*> Enum(const Fields& fields, std::string_view key,
                                const std::array<std::string_view, N>& allowed) {
  auto value = fields.NonEmptyString(key);
  if (!value) return value.error();
  if (!OneOf(**value, allowed)) {
    return fields.Fail(key, "must be one of " + Listed(allowed) + " (got " + Quote(**value) + ")");
  }
  return value;
}

// A scope_name that differs from the one the request named.
Status CheckExpectedScope(const Fields& body, const std::string& scope,
                          std::string_view expected_scope) {
  if (expected_scope.empty() || scope == expected_scope) return Ok();
  return body.Fail("scope_name",
                   "is " + Quote(scope) + ", not the requested scope " + Quote(expected_scope));
}

// validate_job (§1.4.3) of the JobView `job` at `path`, and its receipt (§2.1).
Result<json> JobAt(const json& job, std::string path) {
  auto fields = Fields::Of(job, std::move(path));
  if (!fields) return fields.error();
  for (const char* key :
       {"job_id", "tenant_id", "scope_name", "job_type", "status", "status_url"}) {
    if (auto s = fields->NonEmptyString(key); !s) return s.error();
  }
  const auto& job_id = fields->Find("job_id")->get_ref<const std::string&>();
  if (auto id = CheckServerId(job_id, fields->PathOf("job_id")); !id) return id.error();
  auto status = Enum(*fields, "status", kKnownJobStatuses);
  if (!status) return status.error();
  if (auto a = fields->NonNegativeInteger("attempts"); !a) return a.error();
  if (auto c = fields->Number("created_at"); !c) return c.error();
  if (auto u = fields->Number("updated_at"); !u) return u.error();

  const std::string& s = **status;
  const bool terminal = IsTerminalStatus(s);
  json receipt = job;
  receipt["schema_version"] = kJobReceiptSchemaVersion;
  receipt["contract_schema_version"] = kContractSchemaVersion;
  receipt["receipt_type"] = "job";
  receipt["observed_status"] = s;
  receipt["submitted_status"] = "submitted";
  receipt["final_status"] = terminal ? json(s) : json(nullptr);
  receipt["submitted"] = true;
  receipt["final"] = terminal;
  receipt["watermarks"] = Watermarks(job);
  return receipt;
}

// evidence_route, rebuilt as exactly {requested, selected, reasons}.
Result<json> EvidenceRoute(const Fields& body) {
  auto route = body.Object("evidence_route");
  if (!route) return route.error();
  auto requested = route->NonEmptyString("requested");
  if (!requested) return requested.error();
  auto selected = Enum(*route, "selected", std::array<std::string_view, 2>{"raw", "compiled"});
  if (!selected) return selected.error();
  auto reasons = route->Array("reasons");
  if (!reasons) return reasons.error();
  for (size_t i = 0; i < (*reasons)->size(); ++i) {
    const json& reason = (**reasons)[i];
    if (!reason.is_string()) {
      return Violation(route->PathOf("reasons") + "[" + std::to_string(i) + "]",
                       "must be a string (got " + std::string(internal::KindOf(&reason)) + ")");
    }
  }
  return json{{"requested", **requested}, {"selected", **selected}, {"reasons", **reasons}};
}

// The members of prompt_evidence the receipt needs.
struct Prompt {
  const std::string* content;
  const std::string* content_sha256;
};

// prompt_evidence, checked.
Result<Prompt> PromptEvidence(const Fields& body) {
  auto prompt = body.Object("prompt_evidence");
  if (!prompt) return prompt.error();
  for (const char* key : {"schema_version", "format", "mode", "content_sha256", "trust_boundary"}) {
    if (auto s = prompt->NonEmptyString(key); !s) return s.error();
  }
  auto content = prompt->String("content");
  if (!content) return content.error();
  if (!IsValidUtf8(**content)) return prompt->Fail("content", "must be valid UTF-8");
  constexpr std::array<std::string_view, 2> kFormats = {"text/plain", "application/json"};
  if (auto f = Enum(*prompt, "format", kFormats); !f) return f.error();
  constexpr std::array<std::string_view, 2> kModes = {"raw_hierarchical",
                                                      "compiled_evidence_packet"};
  if (auto m = Enum(*prompt, "mode", kModes); !m) return m.error();
  auto sha = prompt->NonEmptyString("content_sha256");
  if (!sha) return sha.error();
  if (!internal::IsSha256Hex(**sha)) {
    return prompt->Fail("content_sha256", "must be 64 lower-case hex digits");
  }
  auto count = prompt->Integer("content_character_count");
  if (!count) return count.error();
  const size_t length = CodePointLength(**content);
  const bool equal = (*count)->is_number_unsigned()
                         ? (*count)->get<std::uint64_t>() == length
                         : (*count)->get<std::int64_t>() == static_cast<std::int64_t>(length);
  if (!equal) {
    return prompt->Fail("content_character_count", "must equal the code-point length of content, " +
                                                       std::to_string(length) + " (got " +
                                                       (*count)->dump() + ")");
  }
  if (auto v = prompt->Bool("source_text_verbatim"); !v) return v.error();
  return Prompt{*content, *sha};
}

}  // namespace

bool IsSafeServerId(std::string_view id) {
  if (id.empty() || id.size() > kMaxServerIdBytes || id == ".") return false;
  if (id.find("..") != std::string_view::npos) return false;
  for (const char c : id) {
    if (c < 0x21 || c > 0x7E || c == '/' || c == '\\') return false;
  }
  return true;
}

Status CheckServerId(std::string_view id, std::string_view path) {
  if (IsSafeServerId(id)) return Ok();
  return Violation(path,
                   "must be a safe id (1..128 printable ASCII characters, no '/', '\\' or "
                   "'..') (got " +
                       Quote(id) + ")");
}

Result<json> JobReceipt(const json& job) { return JobAt(job, "job"); }

Result<json> RecallReceipt(const json& response, std::string_view expected_scope) {
  return RecallReceipt(json(response), expected_scope);
}

Result<json> RecallReceipt(json&& response, std::string_view expected_scope,
                           const ElidedMember* elided) {
  auto body = Fields::Of(response, "recall");
  if (!body) return body.error();
  for (const char* key : {"query_id", "scope_name", "index_job_id"}) {
    if (auto s = body->NonEmptyString(key); !s) return s.error();
  }
  const auto& scope = body->Find("scope_name")->get_ref<const std::string&>();
  if (auto s = CheckExpectedScope(*body, scope, expected_scope); !s) return s.error();
  auto route = EvidenceRoute(*body);
  if (!route) return route.error();
  auto prompt = PromptEvidence(*body);
  if (!prompt) return prompt.error();
  if (auto e = body->Object("evidence"); !e) return e.error();
  const std::string evidence_sha256 = Sha256Hex(*prompt->content);
  if (evidence_sha256 != *prompt->content_sha256) {
    return Violation("recall.prompt_evidence.content_sha256", "does not match sha256 of content");
  }

  const bool was_elided = elided != nullptr && elided->elided;
  json watermarks = Watermarks(response, was_elided ? body->Find("evidence") : nullptr, elided);
  json receipt = std::move(response);  // nothing below reads `response` or `body`
  receipt["evidence_route"] = std::move(*route);
  receipt["schema_version"] = kRecallReceiptSchemaVersion;
  receipt["contract_schema_version"] = kContractSchemaVersion;
  receipt["receipt_type"] = "recall";
  receipt["submitted_status"] = "completed";
  receipt["final_status"] = "completed";
  receipt["submitted"] = true;
  receipt["final"] = true;
  receipt["status_url"] = nullptr;
  receipt["watermarks"] = std::move(watermarks);
  receipt["evidence_sha256"] = evidence_sha256;
  return receipt;
}

Result<json> IngestReceipt(const json& response, std::string_view expected_scope) {
  auto body = Fields::Of(response, "ingest");
  if (!body) return body.error();
  auto scope = body->NonEmptyString("scope_name");
  if (!scope) return scope.error();
  if (auto s = CheckExpectedScope(*body, **scope, expected_scope); !s) return s.error();

  // The bulk shape has `jobs`; a single JobView (what /ingest really returns, §1.4.2) is wrapped
  // so that both go through the same checks and give the same receipt.
  json wrapped;
  const json* bulk = &response;
  const json* jobs = nullptr;
  const bool single = body->Find("jobs") == nullptr && body->Find("job_id") != nullptr;
  if (single) {
    wrapped = json{{"scope_name", **scope}, {"jobs", json::array({response})}};
    bulk = &wrapped;
    jobs = &wrapped["jobs"];
  } else {
    auto array = body->Array("jobs");
    if (!array || (*array)->empty()) {
      return body->Fail(
          "jobs", "must be a non-empty array (got " +
                      std::string(array ? "an empty array" : internal::KindOf(body->Find("jobs"))) +
                      ")");
    }
    jobs = *array;
  }

  const auto job_path = [&](size_t i) {
    return single ? std::string("ingest") : "ingest.jobs[" + std::to_string(i) + "]";
  };
  json receipts = json::array();
  for (size_t i = 0; i < jobs->size(); ++i) {
    auto receipt = JobAt((*jobs)[i], job_path(i));
    if (!receipt) return receipt.error();
    receipts.push_back(std::move(*receipt));
  }
  json job_ids = json::array();
  std::vector<std::string_view> statuses;
  for (size_t i = 0; i < receipts.size(); ++i) {
    const auto& id = receipts[i]["job_id"].get_ref<const std::string&>();
    for (size_t j = 0; j < i; ++j) {
      if (job_ids[j].get_ref<const std::string&>() == id) {
        return Violation(job_path(i) + ".job_id",
                         "duplicates " + job_path(j) + ".job_id " + Quote(id));
      }
    }
    job_ids.push_back(id);
    statuses.push_back(receipts[i]["status"].get_ref<const std::string&>());
  }
  for (size_t i = 0; i < receipts.size(); ++i) {
    const auto& job_scope = receipts[i]["scope_name"].get_ref<const std::string&>();
    if (job_scope != **scope) {
      return Violation(job_path(i) + ".scope_name",
                       "is " + Quote(job_scope) + ", not the response scope " + Quote(**scope));
    }
  }

  const std::string status(IngestStatus(statuses));
  const bool terminal = IsTerminalStatus(status);
  json receipt = {
      {"schema_version", kIngestReceiptSchemaVersion},
      {"contract_schema_version", kContractSchemaVersion},
      {"receipt_type", "ingest"},
      {"scope_name", **scope},
      {"job_ids", job_ids},
      {"status", status},
      {"submitted_status", "submitted"},
      {"observed_status", status},
      {"final_status", terminal ? json(status) : json(nullptr)},
      {"submitted", true},
      {"final", terminal},
      {"watermarks", Watermarks(*bulk)},
  };
  if (receipts.size() == 1) {
    receipt["job_id"] = receipts[0]["job_id"];
    receipt["status_url"] = receipts[0]["status_url"];
  }
  receipt["jobs"] = std::move(receipts);
  return receipt;
}

json QueuedIngestReceipt(std::string_view scope, std::string_view queue_item_id,
                         std::string_view error_message) {
  return json{
      {"schema_version", kIngestReceiptSchemaVersion},
      {"contract_schema_version", kContractSchemaVersion},
      {"receipt_type", "ingest"},
      {"scope_name", SanitizeUtf8(scope)},
      {"status", "pending"},
      {"submitted_status", "submitted"},
      {"observed_status", "pending"},
      {"final_status", nullptr},
      {"submitted", true},
      {"final", false},
      {"watermarks", json::object()},
      {"queue_item_id", SanitizeUtf8(queue_item_id)},
      {"jobs", json::array()},
      {"error", {{"code", "queued_for_reconciliation"}, {"message", SanitizeUtf8(error_message)}}},
  };
}

namespace {
constexpr std::array<const char*, 4> kWatermarkKeys = {
    "source_event_seq", "promoted_event_seq", "indexed_event_seq", "source_raw_token_estimate"};
}  // namespace

std::vector<std::string> WatermarkKeys() { return {kWatermarkKeys.begin(), kWatermarkKeys.end()}; }

json Watermarks(const json& value, const json* elided_node, const ElidedMember* elided) {
  const auto& kKeys = kWatermarkKeys;
  std::array<const json*, 4> found{};
  size_t missing = kKeys.size();
  // Pre-order with an explicit stack: children are pushed last-first, so they pop first-first.
  std::vector<const json*> stack{&value};
  while (!stack.empty() && missing > 0) {
    const json& node = *stack.back();
    stack.pop_back();
    if (&node == elided_node && elided != nullptr) {
      // The walk would have gone through the elided object here, whole, in the same order
      // that the reader used to pick what it found.
      for (size_t i = 0; i < kKeys.size() && i < elided->found.size(); ++i) {
        if (found[i] == nullptr && !elided->found[i].is_null()) {
          found[i] = &elided->found[i];
          --missing;
        }
      }
      continue;
    }
    if (node.is_object()) {
      for (size_t i = 0; i < kKeys.size(); ++i) {
        if (found[i] != nullptr) continue;
        const auto it = node.find(kKeys[i]);
        if (it != node.end() && internal::IsStrictInteger(*it)) {
          found[i] = &*it;
          --missing;
        }
      }
    }
    if (node.is_structured()) {
      for (auto it = node.rbegin(); it != node.rend(); ++it) {
        if (it->is_structured()) stack.push_back(&*it);
      }
    }
  }
  json out = json::object();
  bool available = false;
  for (size_t i = 0; i < kKeys.size(); ++i) {
    out[kKeys[i]] = found[i] != nullptr ? *found[i] : json(nullptr);
    available = available || found[i] != nullptr;
  }
  out["available"] = available;
  return out;
}

bool IsTerminalStatus(std::string_view status) {
  return status == "succeeded" || status == "failed" || status == "cancelled";
}

std::string_view IngestStatus(const std::vector<std::string_view>& job_statuses) {
  if (job_statuses.empty()) return "submitted";
  const auto all = [&](auto predicate) {
    return std::all_of(job_statuses.begin(), job_statuses.end(), predicate);
  };
  if (all([](std::string_view s) { return s == "succeeded"; })) return "succeeded";
  if (all([](std::string_view s) { return s == "cancelled"; })) return "cancelled";
  // All terminal and not all succeeded: at least one failed or cancelled (rule 3).
  if (all([](std::string_view s) { return IsTerminalStatus(s); })) return "failed";
  return "submitted";
}

}  // namespace tmcra::receipts
