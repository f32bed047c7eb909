# An INTERFACE target every target of ours links: one place for warning flags.
add_library(tmcra_warnings INTERFACE)
add_library(tmcra::warnings ALIAS tmcra_warnings)
target_compile_options(tmcra_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
  -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual)
# gcc 12 at -O2 and above reports -Wrestrict inside libstdc++'s std::string copies of short
# literals ("accessing 9223372036854775810 or more bytes ... at offset -3"), for correct code:
# GCC bug 105329, fixed in gcc 13. The warning is off for that compiler only.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(tmcra_warnings INTERFACE -Wno-restrict)
endif()
if(TMCRA_WERROR)
  target_compile_options(tmcra_warnings INTERFACE -Werror)
endif()
