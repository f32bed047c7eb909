// SHA-256, as lower-case hex. Self-contained (no OpenSSL): the x86 SHA extensions when the CPU
// has them, else portable C++. tmcra-mcp links no crypto library: a hook is a new process on
// every event, and libcrypto cost about 0.5 ms and 1.5 MiB of resident memory per process
// (docs/benchmarks.md, "Hooks").
#pragma once

#include <string>
#include <string_view>

namespace tmcra {

std::string Sha256Hex(std::string_view bytes);

// The same digest by the portable code whatever the CPU has (tests compare both ways).
std::string Sha256HexPortable(std::string_view bytes);

}  // namespace tmcra
