# An INTERFACE target every target of ours links: one place for warning flags.
add_library(tmcra_warnings INTERFACE)
add_library(tmcra::warnings ALIAS tmcra_warnings)
target_compile_options(tmcra_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
  -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual)
if(TMCRA_WERROR)
  target_compile_options(tmcra_warnings INTERFACE -Werror)
endif()
