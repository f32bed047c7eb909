# ASan + UBSan for every target of ours when TMCRA_SANITIZE is on (presets asan and ci).
add_library(tmcra_sanitizers INTERFACE)
add_library(tmcra::sanitizers ALIAS tmcra_sanitizers)
if(TMCRA_SANITIZE)
  set(_tmcra_san -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_compile_options(tmcra_sanitizers INTERFACE ${_tmcra_san})
  target_link_options(tmcra_sanitizers INTERFACE ${_tmcra_san})
endif()

# ThreadSanitizer (preset tsan); exclusive with ASan, so never together with TMCRA_SANITIZE.
if(TMCRA_TSAN)
  if(TMCRA_SANITIZE)
    message(FATAL_ERROR "TMCRA_TSAN and TMCRA_SANITIZE cannot be combined")
  endif()
  set(_tmcra_tsan -fsanitize=thread -fno-omit-frame-pointer)
  target_compile_options(tmcra_sanitizers INTERFACE ${_tmcra_tsan})
  target_link_options(tmcra_sanitizers INTERFACE ${_tmcra_tsan})
endif()

# libFuzzer coverage for every target of ours in the ci preset's tree (the tests' code
# included), where the fuzz targets are built; only the fuzz targets themselves link the
# fuzzer's main (-fsanitize=fuzzer). clang only, and with ASan + UBSan, as the fuzz tests run.
if(TMCRA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR NOT TMCRA_SANITIZE)
    message(FATAL_ERROR "TMCRA_FUZZ needs clang and TMCRA_SANITIZE (as the ci preset sets)")
  endif()
  target_compile_options(tmcra_sanitizers INTERFACE -fsanitize=fuzzer-no-link)
endif()
