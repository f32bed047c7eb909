// Wall-clock time as epoch seconds, and ISO-8601 timestamps in the form the Memory API uses.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tmcra {

// Seconds since the Unix epoch, with microseconds.
double NowSeconds();

// Parses YYYY-MM-DD[T| ]HH:MM[:SS[.ffffff]][Z|±HH[:]MM] and returns epoch seconds. A value
// without a zone is taken as UTC (as the service does). std::nullopt when malformed or out of
// range (years 1..9999).
std::optional<double> ParseIsoTimestamp(std::string_view text);

// `text` re-written the way pydantic v2 serialises the datetime it parses: the same wall-clock
// fields, the fraction as six digits only when non-zero, "Z" for a zero offset, "+HH:MM"
// otherwise, nothing for a naive value. This is what TMCRA's client hashes into idempotency
// keys. std::nullopt when `text` is not a timestamp ParseIsoTimestamp accepts.
std::optional<std::string> PydanticTimestamp(std::string_view text);

// The UTC form pydantic writes: YYYY-MM-DDTHH:MM:SS[.ffffff]Z, the fraction only when non-zero.
std::string FormatIsoUtc(double epoch_seconds);

}  // namespace tmcra
