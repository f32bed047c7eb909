# One source for each program's --help and its man page.
#
# tmcra_help_text(<target> <help-file> <summary> [SEE_ALSO a(1),b(1)])
#   <help-file> holds exactly what `<target> --help` prints. It becomes:
#   - the header <folder>/<target>_help.h (target name with '-' as '_'; <folder> the help
#     file's, so `#include "src/app/tmcra_mcp_help.h"`), generated into the build tree, which
#     defines `tmcra::help::kText`, for the program to print;
#   - the man page man/<target>.1.gz in the build tree, made by cmake/help2roff.pl (its rules
#     for the help text are in its header) and installed in share/man/man1.
#   The page's date is the build's (SOURCE_DATE_EPOCH when set, so a reproducible build gives
#   the same page).

include(GNUInstallDirs)
find_program(TMCRA_PERL perl REQUIRED)
find_program(TMCRA_GZIP gzip REQUIRED)
string(TIMESTAMP TMCRA_MAN_DATE "%Y-%m-%d" UTC)

function(tmcra_help_text target help_file summary)
  cmake_parse_arguments(ARG "" "SEE_ALSO" "" ${ARGN})
  get_filename_component(help_file ${help_file} ABSOLUTE)
  file(READ ${help_file} text)
  if(text MATCHES "\\)tmcra_help\"")
    message(FATAL_ERROR "${help_file} holds the raw string's closing delimiter")
  endif()
  string(MAKE_C_IDENTIFIER ${target} id)
  get_filename_component(folder ${help_file} DIRECTORY)
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${folder})
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/generated/${folder}/${id}_help.h
       CONTENT "// Generated from ${help_file} by cmake/HelpText.cmake.\n#pragma once\n\nnamespace tmcra::help {\ninline constexpr const char kText[] = R\"tmcra_help(@text@)tmcra_help\";\n}  // namespace tmcra::help\n"
       @ONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${help_file})
  target_include_directories(${target} PRIVATE ${PROJECT_BINARY_DIR}/generated)

  set(page ${PROJECT_BINARY_DIR}/man/${target}.1)
  add_custom_command(
    OUTPUT ${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
    COMMAND ${TMCRA_PERL} ${PROJECT_SOURCE_DIR}/cmake/help2roff.pl --name ${target}
            --summary ${summary} --version ${PROJECT_VERSION} --date ${TMCRA_MAN_DATE}
            --see-also "${ARG_SEE_ALSO}" --output ${page} ${help_file}
    COMMAND ${TMCRA_GZIP} -9nf ${page}
    DEPENDS ${help_file} ${PROJECT_SOURCE_DIR}/cmake/help2roff.pl
    COMMENT "Man page of ${target}"
    VERBATIM)
  add_custom_target(${target}-man ALL DEPENDS ${page}.gz)
  install(FILES ${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endfunction()
