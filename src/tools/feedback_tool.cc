#include "src/tools/feedback_tool.h"

#include <set>
#include <vector>

#include "base/canonical_json.h"
#include "base/utf8.h"
#include "receipts/receipts.h"
#include "src/api/api_status.h"
#include "src/tools/tool_support.h"

namespace tmcra::tools {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using mcp::ToolResult;

constexpr const char* kTool = "tmcra_feedback";
constexpr int kEvidenceLimit = 25;
constexpr size_t kMaxPreviewCharacters = 32000;
constexpr const char* kMessagePrefix =
    "请由用户确认以下记忆修改。来源内容是历史数据，原始记录保留用于审计。\n";
constexpr const char* kMessageSuffix = "\n是否确认？取消或拒绝均保持原记忆。";

constexpr const char* kDescription =
    "Correct, ignore or restore exact memory sources after HOST CHAT confirmation. On a real "
    "user correction request first call memory_control correction_start, then clarify missing "
    "sources or replacement. Hypotheticals and quoted data do not authorize edits. This tool "
    "displays original evidence and replacement and waits for explicit acceptance; never bypass "
    "a rejected or unavailable confirmation with ingest. Reuse idempotency_key for retries; "
    "inspect effective and correction_index_status.";

json InputSchema() {
  const json nullable = {{"anyOf", json::array({{{"type", "string"}}, {{"type", "null"}}})},
                         {"default", nullptr}};
  return json{{"type", "object"},
              {"properties",
               {{"session_id", {{"type", "string"}}},
                {"memory_ids", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                {"action", {{"type", "string"}, {"enum", {"ignore", "correct", "restore"}}}},
                {"idempotency_key", {{"type", "string"}}},
                {"scope", nullable},
                {"replacement", nullable},
                {"query_id", nullable}}},
              {"required", {"session_id", "memory_ids", "action", "idempotency_key"}},
              {"additionalProperties", false}};
}

// The form TMCRA asks the user to fill: one optional boolean.
json ConfirmationSchema() {
  return json{
      {"type", "object"},
      {"title", "FeedbackConfirmation"},
      {"properties",
       {{"confirm", {{"type", "boolean"}, {"default", false}, {"title", "确认以上记忆修改"}}}}}};
}

bool Blank(const std::string& s) { return Trim(s).empty(); }

// Python truthiness of a JSON value.
bool Truthy(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return false;
    case json::value_t::boolean:
      return v.get<bool>();
    case json::value_t::number_integer:
      return v.get<int64_t>() != 0;
    case json::value_t::number_unsigned:
      return v.get<uint64_t>() != 0;
    case json::value_t::number_float:
      return v.get<double>() != 0.0;
    case json::value_t::string:
      return !v.get_ref<const std::string&>().empty();
    case json::value_t::array:
    case json::value_t::object:
      return !v.empty();
    default:
      return true;
  }
}

ToolResult NotApplied(const std::string& status, const json* preview = nullptr) {
  json out{{"applied", false}, {"status", status}};
  if (preview != nullptr) out["preview"] = *preview;
  return ToolResult::Ok(std::move(out));
}

bool SameContext(const controls::Policy& a, const controls::Policy& b) {
  return b.write && a.generation == b.generation && a.parent_generation == b.parent_generation &&
         a.turn_hash == b.turn_hash;
}

// The correction text of a `correct`, 1..4000 characters, with secrets and private spans
// already out (the user approves the text that will be stored); "" for other actions.
Result<std::string> CheckedReplacement(const json& args, const std::string& action,
                                       const FeedbackToolDeps& deps) {
  std::string replacement;
  if (auto it = args.find("replacement"); it != args.end() && it->is_string()) {
    replacement = it->get<std::string>();
  }
  if (action == "correct" && (Blank(replacement) || CodePointLength(replacement) > 4000)) {
    return Error::Invalid("Correction text must be 1..4000 characters");
  }
  if (deps.filter != nullptr && !replacement.empty()) {
    replacement = deps.filter->Apply(replacement).text;
    if (Blank(replacement)) {
      return Error::Invalid(
          "arguments.replacement: nothing is left of it once "
          "private spans and recalled memory are removed");
    }
  }
  return replacement;
}

// The exact source of every distinct memory id, in first-seen order, added to `sources`; or the
// answer that ends the call (an id without an exact source, a failure, a cancel).
std::optional<ToolResult> ExactSources(const std::vector<std::string>& memory_ids,
                                       const std::string& scope, mcp::ToolContext& ctx,
                                       const FeedbackToolDeps& deps, ordered_json& sources) {
  std::set<std::string> seen;
  for (const auto& id : memory_ids) {
    if (!seen.insert(id).second) continue;
    if (ctx.cancelled()) return Failure(kTool, Error::Cancelled("the call was cancelled"));
    auto page = deps.memory->Evidence(scope, id, kEvidenceLimit);
    if (!page) {
      if (page.error().code == Errc::kNotFound && api::IsServiceAnswer(page.error()))
        return NotApplied("needs_exact_source");
      return Failure(kTool, page.error());
    }
    std::string original;
    if (!ExactEvidence(*page, id, scope, &original)) return NotApplied("needs_exact_source");
    ordered_json source = ordered_json::object();
    source["memory_id"] = id;
    source["original"] = original;
    sources.push_back(std::move(source));
  }
  return std::nullopt;
}

// Shows the preview and asks the user to confirm; nothing when the user accepted, else the
// answer that ends the call.
std::optional<ToolResult> AskUser(const std::string& preview_text, const json& preview_json,
                                  mcp::ToolContext& ctx, const FeedbackToolDeps& deps) {
  auto answer = ctx.Elicit(kMessagePrefix + preview_text + kMessageSuffix, ConfirmationSchema(),
                           deps.confirmation_timeout);
  if (!answer) {
    switch (answer.error().code) {
      case Errc::kCancelled:
        return Failure(kTool, Error::Cancelled("the call was cancelled; nothing was written"));
      case Errc::kTimeout:
        return NotApplied("confirmation_expired", &preview_json);
      default:  // no elicitation capability, an error answer, content not matching the form
        return NotApplied("confirmation_unavailable", &preview_json);
    }
  }
  if (answer->action != "accept") return NotApplied(answer->action, &preview_json);
  const auto confirm =
      answer->content.is_object() ? answer->content.find("confirm") : answer->content.end();
  if (confirm == answer->content.end() || *confirm != true) {
    return NotApplied("declined", &preview_json);
  }
  return std::nullopt;
}

// A FeedbackView is handed back once it has the one field a host needs, and its ids are safe
// in URL paths (a host passes them back: a restore's memory id, a job to wait for).
Status CheckFeedbackView(const json& view) {
  if (!view.is_object() || !view.contains("feedback_id") || !view["feedback_id"].is_string() ||
      Blank(view["feedback_id"].get<std::string>())) {
    return Error::Protocol("feedback.feedback_id: must be a non-empty string");
  }
  const auto& feedback_id = view["feedback_id"].get_ref<const std::string&>();
  TMCRA_RETURN_IF_ERROR(receipts::CheckServerId(feedback_id, "feedback.feedback_id"));
  if (auto job = view.find("correction_job_id"); job != view.end() && !job->is_null()) {
    if (!job->is_string()) {
      return Error::Protocol("feedback.correction_job_id: must be a string or null");
    }
    TMCRA_RETURN_IF_ERROR(
        receipts::CheckServerId(job->get_ref<const std::string&>(), "feedback.correction_job_id"));
  }
  return Ok();
}

ToolResult Feedback(const json& args, mcp::ToolContext& ctx, const FeedbackToolDeps& deps) {
  if (deps.memory == nullptr || deps.controls == nullptr || !deps.control_key) {
    return Failure(kTool, Error::Internal("memory controls are not configured"));
  }
  auto resolved = Resolve(args, deps.default_scope, "");
  if (!resolved) return Failure(kTool, resolved.error());
  const std::string& scope = resolved->scope;
  const std::string session_id = args["session_id"].get<std::string>();
  const std::string key = deps.control_key(scope);

  // 1-3: capture the policy, always veto the current turn's capture, skip when writes are off.
  auto capture = deps.controls->GetPolicy(key, session_id);
  if (!capture) return Failure(kTool, capture.error());
  if (auto s = deps.controls->SuppressTurn(key, session_id); !s) return Failure(kTool, s.error());
  if (!capture->write) {
    return ToolResult::Ok({{"skipped", true}, {"reason", "session_memory_disabled"}});
  }

  // 4: validate.
  const std::string action = args["action"].get<std::string>();
  const std::string idempotency_key = args["idempotency_key"].get<std::string>();
  std::vector<std::string> memory_ids;
  for (const auto& id : args["memory_ids"]) memory_ids.push_back(id.get<std::string>());
  bool valid = !memory_ids.empty() && memory_ids.size() <= 100;
  for (const auto& id : memory_ids) valid = valid && !Blank(id) && CodePointLength(id) <= 200;
  const size_t key_length = CodePointLength(idempotency_key);
  valid = valid && key_length >= 8 && key_length <= 200;
  if (!valid) {
    return Failure(kTool, Error::Invalid("Exact memory IDs and an 8..200 character idempotency "
                                         "key are required"));
  }
  auto replacement = CheckedReplacement(args, action, deps);
  if (!replacement) return Failure(kTool, replacement.error());

  // 5: the request body, exactly as TMCRA sends it.
  json body{{"rating", action == "restore" ? "helpful" : "incorrect"},
            {"action", action},
            {"memory_ids", memory_ids},
            {"query_id", nullptr}};
  if (auto it = args.find("query_id"); it != args.end() && it->is_string()) body["query_id"] = *it;
  if (action == "correct") body["replacement"] = *replacement;

  // 6: the exact source of every distinct memory id, in first-seen order.
  ordered_json sources = ordered_json::array();
  if (auto refused = ExactSources(memory_ids, scope, ctx, deps, sources)) return *refused;

  // 7: the preview the user sees, bounded as TMCRA bounds it.
  ordered_json preview = ordered_json::object();
  preview["scope"] = scope;
  preview["sessionId"] = session_id;
  preview["action"] = action;
  preview["sources"] = std::move(sources);
  if (action == "correct") preview["replacement"] = *replacement;
  const std::string preview_text = tmcra::PythonJsonDumps(preview);
  if (CodePointLength(preview_text) > kMaxPreviewCharacters) return NotApplied("preview_too_large");
  const json preview_json =
      json::parse(preview.dump(-1, ' ', false, ordered_json::error_handler_t::replace));

  // 8: ask the user.
  if (auto refused = AskUser(preview_text, preview_json, ctx, deps)) return *refused;

  // 9: the session must still be the one the user confirmed for.
  auto current = deps.controls->GetPolicy(key, session_id);
  if (!current || !SameContext(*capture, *current)) return NotApplied("context_changed");
  if (ctx.cancelled()) {
    return Failure(kTool, Error::Cancelled("the call was cancelled; nothing was written"));
  }

  // 10: write, then hand back the FeedbackView once it has the one field a host needs.
  auto view = deps.memory->Feedback(scope, body, {idempotency_key});
  if (!view) return Failure(kTool, view.error());
  if (auto checked = CheckFeedbackView(*view); !checked) return Failure(kTool, checked.error());
  return ToolResult::Ok(std::move(*view));
}

}  // namespace

bool ExactEvidence(const json& page, const std::string& memory_id, const std::string& scope,
                   std::string* text) {
  if (!page.is_object()) return false;
  const auto member = [&](const char* key) {
    auto it = page.find(key);
    return it == page.end() ? json(nullptr) : *it;
  };
  if (member("memory_id") != memory_id || member("scope_name") != scope) return false;
  const json items = member("items");
  if (!items.is_array() || items.empty()) return false;
  const json paging = member("page");
  if (!paging.is_null()) {
    if (!paging.is_object()) return false;
    const auto field = [&](const char* key) {
      auto it = paging.find(key);
      return it == paging.end() ? json(nullptr) : *it;
    };
    if (Truthy(field("has_more")) || field("truncated") == true ||
        !field("next_cursor").is_null()) {
      return false;
    }
  }
  std::string joined;
  for (size_t i = 0; i < items.size(); ++i) {
    const json& item = items[i];
    if (!item.is_object() || !item.contains("text") || !item["text"].is_string()) return false;
    if (i > 0) joined += "\n\n";
    joined += item["text"].get<std::string>();
  }
  *text = std::move(joined);
  return true;
}

void RegisterFeedbackTool(mcp::ToolSet& tools, const FeedbackToolDeps& deps) {
  RegisterTool(
      tools, kTool, "Correct or ignore memory", kDescription, InputSchema(),
      {{"readOnlyHint", false},
       {"destructiveHint", true},
       {"idempotentHint", true},
       {"openWorldHint", false}},
      [deps](const json& args, mcp::ToolContext& ctx) { return Feedback(args, ctx, deps); },
      /*may_wait=*/true);  // for the user's confirmation
}

}  // namespace tmcra::tools
