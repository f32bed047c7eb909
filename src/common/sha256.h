// SHA-256 (OpenSSL), as lower-case hex.
#pragma once

#include <string>
#include <string_view>

namespace tmcra {

std::string Sha256Hex(std::string_view bytes);

}  // namespace tmcra
