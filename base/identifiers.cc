#include "base/identifiers.h"

namespace tmcra {

namespace {

bool IsAlnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// ^[A-Za-z0-9][A-Za-z0-9<extra>]{0,max_length-1}$
bool Matches(std::string_view value, std::string_view extra, size_t max_length) {
  if (value.empty() || value.size() > max_length || !IsAlnum(value.front())) return false;
  for (const char c : value) {
    if (!IsAlnum(c) && extra.find(c) == std::string_view::npos) return false;
  }
  return true;
}

}  // namespace

bool IsValidScope(std::string_view scope) { return Matches(scope, "_.-", 128); }

bool IsValidAgentId(std::string_view agent_id) { return Matches(agent_id, "_.:@/-", 200); }

bool IsValidIntegrationId(std::string_view integration_id) {
  return Matches(integration_id, "_.:-", 128);
}

bool IsValidRequestId(std::string_view request_id) { return IsValidIntegrationId(request_id); }

}  // namespace tmcra
