# TMCRA_HARDEN: the hardened build of the packages (packaging/README.md), the flags Debian's
# dpkg-buildflags gives with hardening=+all: position-independent executables, full RELRO
# (relro + now: the GOT read-only after start-up), _FORTIFY_SOURCE=2 (needs optimisation),
# the strong stack protector, stack-clash protection and control-flow protection. Source
# paths are written relative (-ffile-prefix-map), one of the conditions of a build that gives
# the same bytes twice.
option(TMCRA_HARDEN "Hardened build flags (release and package presets)" OFF)
if(TMCRA_HARDEN)
  add_compile_options(-fPIE -fstack-protector-strong -fstack-clash-protection -fcf-protection
                      -D_FORTIFY_SOURCE=2 -Wformat -Werror=format-security
                      -ffile-prefix-map=${PROJECT_SOURCE_DIR}/=)
  add_link_options(-pie -Wl,-z,relro -Wl,-z,now)
endif()
