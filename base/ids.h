// Identifiers from the operating system's random source.
#pragma once

#include <string>

namespace tmcra {

// A random (version 4, RFC 9562) UUID in its 36-character lower-case form, from getrandom(2).
std::string UuidV4();

}  // namespace tmcra
