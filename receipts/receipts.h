// Receipts: Memory API responses, validated and normalised before any result reaches the host.
//
// Every job, recall and ingest response of the Memory API passes through one of the functions
// below. Each checks the response against the contract the Python client enforces
// (docs/contract.md §1.4.1-§1.4.3: validate_job, validate_recall, validate_bulk_ingest) and
// returns the receipt the host sees (§2.1-§2.3), or an Error: a response that fails validation
// never reaches the host as success. The formats and every rule are written down in
// receipts/FORMAT.md.
//
// A failure is Error{Errc::kProtocol, retryable=false, message="<path>: <reason>"}, where the
// path starts with the receipt kind and names the member that failed:
//
//   recall.prompt_evidence.content_sha256: must be 64 lower-case hex digits
//   ingest.jobs[1].attempts: must be an integer >= 0 (got boolean)
//
// Tools report it with the code kInvalidResponseCode. None of these functions throws on any
// input. They are pure (no I/O, no clock) and safe to call from any thread.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_reader.h"
#include "base/result.h"

namespace tmcra::receipts {

using json = nlohmann::json;

// `contract_schema_version` of every receipt.
inline constexpr const char* kContractSchemaVersion = "tmcra.receipts.v1";
// The error code tools give a validation failure (the Python ReceiptValidationError.code).
inline constexpr const char* kInvalidResponseCode = "invalid_response_contract";

// `schema_version` of each receipt.
inline constexpr const char* kJobReceiptSchemaVersion = "tmcra.mcp.job-receipt.v1";
inline constexpr const char* kRecallReceiptSchemaVersion = "tmcra.mcp.recall-receipt.v1";
inline constexpr const char* kIngestReceiptSchemaVersion = "tmcra.mcp.ingest-receipt.v1";

// A JobView (GET /v1/jobs/{id}) as a job receipt: every field of `job` unchanged, plus
// schema_version, contract_schema_version, receipt_type "job", observed_status,
// submitted_status, final_status, submitted, final and watermarks. Paths start with "job".
Result<json> JobReceipt(const json& job);

// A recall response (POST /v1/scopes/{scope}/recall) as a recall receipt: every field
// unchanged except evidence_route (rebuilt as exactly {requested, selected, reasons}), plus the
// receipt fields of §2.2 and evidence_sha256. Tool-layer additions (injectable_context,
// selection, task_handoff, the top-level trust_boundary, dropping evidence) are not made here.
// When `expected_scope` is not empty, a different scope_name is a violation. Paths start with
// "recall".
Result<json> RecallReceipt(const json& response, std::string_view expected_scope = {});
// The same, taking the response's contents instead of copying them (a recall is tens of kB).
// `elided`: the response was read with its `evidence` elided (ElidedMember, watching
// WatermarkKeys()); its watermarks then come from what the reader gathered there, exactly as if
// the walk had gone through the evidence, and the receipt's `evidence` is {}.
Result<json> RecallReceipt(json&& response, std::string_view expected_scope = {},
                           const ElidedMember* elided = nullptr);

// The four watermark keys, in Watermarks' order (what an ElidedMember is to watch).
std::vector<std::string> WatermarkKeys();

// An ingest response (POST /v1/scopes/{scope}/ingest) as an ingest receipt. Both shapes are
// accepted: the bulk shape {scope_name, jobs: [JobView, ...]} and a single JobView, which is
// validated as {scope_name: job.scope_name, jobs: [job]}; for one job the two give identical
// receipts. Paths start with "ingest" ("ingest.jobs[2].status" in the bulk shape,
// "ingest.status" for a single JobView). When `expected_scope` is not empty, a different
// scope_name is a violation.
Result<json> IngestReceipt(const json& response, std::string_view expected_scope = {});

// The ingest receipt returned when the write was queued durably instead of submitted (a
// transport error or a job wait timeout): status "pending", no jobs, watermarks {}, and
// error {code: "queued_for_reconciliation", message: error_message}. Invalid UTF-8 in the
// arguments is replaced.
json QueuedIngestReceipt(std::string_view scope, std::string_view queue_item_id,
                         std::string_view error_message);

// The normalised watermarks of `value` (§2.6): {source_event_seq, promoted_event_seq,
// indexed_event_seq, source_raw_token_estimate: integer or null, available: bool}. A pre-order
// walk; the first JSON integer (not bool, not float) found for a key wins. Object members are
// visited in nlohmann::json's key order (sorted), not the service's insertion order: see
// FORMAT.md. Iterative, so any nesting depth is safe. `elided_node`, a node of `value` that
// stands for an elided object, is taken to hold what `elided` found (ElidedMember::found,
// per WatermarkKeys()) when the walk reaches it.
json Watermarks(const json& value, const json* elided_node = nullptr,
                const ElidedMember* elided = nullptr);

// The longest id IsSafeServerId accepts, in bytes.
inline constexpr size_t kMaxServerIdBytes = 128;

// Whether `id`, issued by the memory, may be passed on to a place that puts it into a URL path
// (a job id into GET /v1/jobs/{id}, a feedback id into .../memory-graph/nodes/{id}/evidence):
// 1..kMaxServerIdBytes bytes of printable ASCII (0x21..0x7E), without '/', '\' or "..", and
// not ".". Every id TMCRA's service, tmcra-memd and the embedded engine issue has this form
// ("job_<hex>", "fb_<hex>", UUIDs). FORMAT.md, "Value types".
bool IsSafeServerId(std::string_view id);

// The protocol error "<path>: must be a safe id (...) (got <quoted id>)" when `id` is not one.
Status CheckServerId(std::string_view id, std::string_view path);

// True for "succeeded", "failed" and "cancelled".
bool IsTerminalStatus(std::string_view status);

// The ingest status derived from its jobs' statuses (§2.3 rules 1-4): all succeeded ->
// "succeeded"; else all cancelled -> "cancelled"; else all terminal (so some failed or
// cancelled) -> "failed"; else "submitted". An empty list gives "submitted".
std::string_view IngestStatus(const std::vector<std::string_view>& job_statuses);

}  // namespace tmcra::receipts
