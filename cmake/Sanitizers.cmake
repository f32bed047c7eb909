# ASan + UBSan for every target of ours when TMCRA_SANITIZE is on (presets asan and ci).
add_library(tmcra_sanitizers INTERFACE)
add_library(tmcra::sanitizers ALIAS tmcra_sanitizers)
if(TMCRA_SANITIZE)
  set(_tmcra_san -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_compile_options(tmcra_sanitizers INTERFACE ${_tmcra_san})
  target_link_options(tmcra_sanitizers INTERFACE ${_tmcra_san})
endif()

# libFuzzer coverage for every target of ours in the fuzz preset; only the fuzz targets
# themselves link the fuzzer's main (-fsanitize=fuzzer).
if(TMCRA_FUZZ)
  target_compile_options(tmcra_sanitizers INTERFACE -fsanitize=fuzzer-no-link)
endif()
