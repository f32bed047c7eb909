// The service's grammars for the names the client puts into request paths and headers
// (tmcra-contract.md §1.4 and §1.5). A value that fails them would be refused with 422, and
// checking them before a request is sent also keeps "/", "..", "?", "#", "%", CR and LF out of
// paths and headers (reliability-security.md §4.4, test row S5). All are ASCII-only grammars.
#pragma once

#include <string_view>

namespace tmcra::config {

// Scope names: ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$
bool IsValidScope(std::string_view scope);

// X-TMCRA-Agent-ID: ^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,199}$
bool IsValidAgentId(std::string_view agent_id);

// X-TMCRA-Integration-ID: ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$
bool IsValidIntegrationId(std::string_view integration_id);

}  // namespace tmcra::config
