#include "base/log.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace tmcra {

std::optional<spdlog::level::level_enum> ParseLogLevel(std::string_view name) {
  static constexpr std::pair<std::string_view, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace},       {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},         {"warn", spdlog::level::warn},
      {"warning", spdlog::level::warn},      {"error", spdlog::level::err},
      {"critical", spdlog::level::critical}, {"off", spdlog::level::off},
  };
  for (const auto& [key, level] : kLevels) {
    if (key == name) return level;
  }
  return std::nullopt;
}

void InitLogging(spdlog::level::level_enum default_level) {
  auto logger =
      std::make_shared<spdlog::logger>("tmcra", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [tmcra] %v");
  auto level = default_level;
  const char* env = std::getenv("TMCRA_LOG_LEVEL");
  bool bad_level = false;
  if (env != nullptr && *env != '\0') {
    if (auto parsed = ParseLogLevel(env)) {
      level = *parsed;
    } else {
      bad_level = true;
    }
  }
  logger->set_level(level);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
  if (bad_level) spdlog::warn("TMCRA_LOG_LEVEL is not a known level; using info");
}

}  // namespace tmcra
