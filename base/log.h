// Logging. Everything goes to stderr (or a file): stdout of tmcra-mcp carries JSON-RPC only.
//
// InitLogging() installs the default spdlog logger writing to stderr, with the level taken from
// TMCRA_LOG_LEVEL (trace, debug, info, warn, error, critical, off; default info). Call it once
// from main before any other thread starts.
#pragma once

#include <spdlog/spdlog.h>

#include <optional>
#include <string_view>

namespace tmcra {

// Parses a level name; unknown names give std::nullopt.
std::optional<spdlog::level::level_enum> ParseLogLevel(std::string_view name);

// `default_level` applies when TMCRA_LOG_LEVEL is unset (hooks log warnings and worse only).
void InitLogging(spdlog::level::level_enum default_level = spdlog::level::info);

}  // namespace tmcra
