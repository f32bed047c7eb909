#include "memory/ingest_validation.h"

#include <set>

#include "base/canonical_json.h"
#include "base/clock.h"
#include "base/identifiers.h"
#include "base/utf8.h"

namespace tmcra::memory {

namespace {

using json = nlohmann::json;

json LocArray(const std::string& loc) {
  json out = json::array({"body"});
  size_t start = 0;
  while (start <= loc.size()) {
    const size_t dot = loc.find('.', start);
    const std::string part =
        loc.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos) {
      out.push_back(std::stoll(part));
    } else {
      out.push_back(part);
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

// Reads a required or optional string, trimmed, with code-point bounds.
Result<std::string> String(const json& obj, const std::string& key, const std::string& loc,
                           size_t min, size_t max, bool required) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return ValidationError(loc, "Field required", "missing");
    return std::string();
  }
  if (!it->is_string())
    return ValidationError(loc, "Input should be a valid string", "string_type");
  std::string value = Trim(it->get<std::string>());
  const size_t length = CodePointLength(value);
  if (length < min) {
    return ValidationError(
        loc,
        "String should have at least " + std::to_string(min) + " character" + (min == 1 ? "" : "s"),
        "string_too_short");
  }
  if (length > max) {
    return ValidationError(loc, "String should have at most " + std::to_string(max) + " characters",
                           "string_too_long");
  }
  return value;
}

Status CheckKeys(const json& obj, std::initializer_list<const char*> allowed,
                 const std::string& prefix) {
  for (const auto& [key, value] : obj.items()) {
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (!known) {
      return ValidationError(prefix.empty() ? key : prefix + "." + key,
                             "Extra inputs are not permitted", "extra_forbidden");
    }
  }
  return Ok();
}

Result<std::string> Enum(const json& obj, const std::string& key, const std::string& loc,
                         std::initializer_list<const char*> allowed, const char* fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (fallback != nullptr) return std::string(fallback);
    return ValidationError(loc, "Field required", "missing");
  }
  std::string list;
  for (const char* a : allowed) {
    if (it->is_string() && Trim(it->get<std::string>()) == a) return std::string(a);
    list += list.empty() ? "" : ", ";
    list += std::string("'") + a + "'";
  }
  return ValidationError(loc, "Input should be " + list, "enum");
}

constexpr const char* kAgentProducerKeys[] = {"agent_id", "agent_name", "agent_role",
                                              "agent_specialty", "agent_team"};

Status CheckMetadata(const json& metadata, const std::string& role, const std::string& loc) {
  if (!metadata.is_object()) {
    return ValidationError(loc, "Input should be a valid dictionary", "dict_type");
  }
  if (metadata.size() > 64) return ValidationError(loc, "metadata may have at most 64 keys");
  for (const auto& [key, value] : metadata.items()) {
    if (Trim(key).empty()) return ValidationError(loc, "metadata keys must be non-empty strings");
  }
  if (metadata.dump(-1, ' ', false, json::error_handler_t::replace).size() > 8192) {
    return ValidationError(loc, "metadata must be at most 8192 bytes as compact JSON");
  }
  if (auto it = metadata.find("actor_role"); it != metadata.end()) {
    if (!it->is_string() || it->get<std::string>() != role) {
      return ValidationError(loc + ".actor_role", "actor_role must equal the message role");
    }
  }
  const auto bounded = [&](const char* key, size_t max) -> Status {
    auto it = metadata.find(key);
    if (it == metadata.end() || it->is_null()) return Ok();
    if (!it->is_string() || CodePointLength(it->get<std::string>()) > max) {
      return ValidationError(loc + "." + key, std::string(key) + " must be a string of at most " +
                                                  std::to_string(max) + " characters");
    }
    return Ok();
  };
  for (auto s : {bounded("target_agent_id", 200), bounded("agent_id", 200),
                 bounded("agent_name", 200), bounded("agent_role", 120)}) {
    if (!s) return s;
  }
  if (role == "user") {
    for (const char* key : kAgentProducerKeys) {
      if (metadata.contains(key)) {
        return ValidationError(loc + "." + key,
                               "user messages cannot carry an agent producer; use target_agent_id");
      }
    }
    if (auto agent = metadata.find("agent"); agent != metadata.end() && agent->is_object()) {
      for (const auto& [key, value] : agent->items()) {
        for (const char* producer : kAgentProducerKeys) {
          if (key == producer || "agent_" + key == producer) {
            return ValidationError(loc + ".agent." + key,
                                   "user messages cannot carry an agent producer");
          }
        }
      }
    }
  }
  return Ok();
}

}  // namespace

Error ValidationError(const std::string& loc, const std::string& message, const std::string& type) {
  json details = json::array({{{"loc", LocArray(loc)}, {"msg", message}, {"type", type}}});
  return Error::Api(Errc::kInvalidArgument, "validation_error", loc + ": " + message,
                    details.dump());
}

Result<IngestRequest> ValidateIngest(const json& body) {
  if (!body.is_object()) {
    return ValidationError("body", "Input should be a valid dictionary", "dict_type");
  }
  if (auto s =
          CheckKeys(body, {"session_id", "messages", "consistency", "slow_policy", "metadata"}, "");
      !s) {
    return s.error();
  }
  IngestRequest req;
  auto session = String(body, "session_id", "session_id", 1, kMaxIdChars, true);
  if (!session) return session.error();
  req.session_id = *session;

  auto messages = body.find("messages");
  if (messages == body.end()) return ValidationError("messages", "Field required", "missing");
  if (!messages->is_array()) {
    return ValidationError("messages", "Input should be a valid list", "list_type");
  }
  if (messages->empty()) {
    return ValidationError("messages", "List should have at least 1 item", "too_short");
  }
  if (messages->size() > 1000) {
    return ValidationError("messages", "List should have at most 1000 items", "too_long");
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string loc = "messages." + std::to_string(i);
    if (!m.is_object())
      return ValidationError(loc, "Input should be a valid dictionary", "dict_type");
    if (auto s = CheckKeys(m, {"message_id", "role", "content", "timestamp", "metadata"}, loc);
        !s) {
      return s.error();
    }
    IngestMessage msg;
    auto id = String(m, "message_id", loc + ".message_id", 1, kMaxIdChars, true);
    if (!id) return id.error();
    msg.message_id = *id;
    auto role = Enum(m, "role", loc + ".role", {"user", "assistant", "system", "tool"}, nullptr);
    if (!role) return role.error();
    msg.role = *role;
    auto content = String(m, "content", loc + ".content", 1, 200000, true);
    if (!content) return content.error();
    msg.content = *content;
    auto ts = m.find("timestamp");
    if (ts == m.end() || ts->is_null()) {
      return ValidationError(loc + ".timestamp", "Field required", "missing");
    }
    std::optional<double> when;
    if (ts->is_string()) {
      when = ParseIsoTimestamp(Trim(ts->get<std::string>()));
    } else if (ts->is_number() && !ts->is_boolean()) {
      when = ts->get<double>();
    }
    if (!when) {
      return ValidationError(loc + ".timestamp", "Input should be a valid datetime",
                             "datetime_parsing");
    }
    msg.occurred_at = *when;
    msg.timestamp = FormatIsoUtc(*when);
    msg.metadata = json::object();
    if (auto md = m.find("metadata"); md != m.end() && !md->is_null()) {
      if (auto s = CheckMetadata(*md, msg.role, loc + ".metadata"); !s) return s.error();
      msg.metadata = *md;
    }
    if (!seen.insert(msg.message_id).second) {
      return ValidationError(loc + ".message_id", "message_id must be unique within the request");
    }
    req.messages.push_back(std::move(msg));
  }
  auto consistency =
      Enum(body, "consistency", "consistency", {"eventual", "read_your_writes"}, "eventual");
  if (!consistency) return consistency.error();
  req.consistency = *consistency;
  auto slow = Enum(body, "slow_policy", "slow_policy", {"auto", "deferred", "force"}, "auto");
  if (!slow) return slow.error();
  req.slow_policy = *slow;
  req.metadata = json::object();
  if (auto md = body.find("metadata"); md != body.end() && !md->is_null()) {
    if (!md->is_object()) {
      return ValidationError("metadata", "Input should be a valid dictionary", "dict_type");
    }
    req.metadata = *md;
  }
  return req;
}

json IngestRequest::ToJson() const {
  json msgs = json::array();
  for (const auto& m : messages) {
    msgs.push_back({{"message_id", m.message_id},
                    {"role", m.role},
                    {"content", m.content},
                    {"timestamp", m.timestamp},
                    {"occurred_at", m.occurred_at},
                    {"metadata", m.metadata}});
  }
  return json{{"session_id", session_id},
              {"messages", std::move(msgs)},
              {"consistency", consistency},
              {"slow_policy", slow_policy},
              {"metadata", metadata}};
}

IngestRequest IngestRequest::FromJson(const json& payload) {
  IngestRequest req;
  req.session_id = payload.at("session_id").get<std::string>();
  req.consistency = payload.value("consistency", "eventual");
  req.slow_policy = payload.value("slow_policy", "auto");
  req.metadata = payload.value("metadata", json::object());
  for (const auto& m : payload.at("messages")) {
    IngestMessage msg;
    msg.message_id = m.at("message_id").get<std::string>();
    msg.role = m.at("role").get<std::string>();
    msg.content = m.at("content").get<std::string>();
    msg.timestamp = m.at("timestamp").get<std::string>();
    msg.occurred_at = m.at("occurred_at").get<double>();
    msg.metadata = m.value("metadata", json::object());
    req.messages.push_back(std::move(msg));
  }
  return req;
}

}  // namespace tmcra::memory
