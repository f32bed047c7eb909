# What `cmake --install` puts beside the programs, and the packages CPack makes of it
# (packaging/README.md): `cmake --preset package && cmake --build --preset package &&
# cpack --preset package` gives build/package/tmcra-mcp_<version>_amd64.deb and
# tmcra-mcp-<version>-linux-amd64.tar.gz.
#
# TMCRA_PACKAGE adds the system files of the Debian package (the systemd units, /etc/tmcra,
# the maintainer scripts); it needs CMAKE_INSTALL_PREFIX=/usr, as the package preset sets.

option(TMCRA_PACKAGE "Install the system files of the Debian package (prefix /usr)" OFF)
set(TMCRA_PACKAGE_MAINTAINER "tmcra-mcp maintainers <maintainers@tmcra-mcp.invalid>"
    CACHE STRING "The Maintainer of the Debian package")
include(GNUInstallDirs)

# Every install: the documents, the license and the notices.
install(FILES LICENSE NOTICE README.md SECURITY.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
add_custom_command(
  OUTPUT ${PROJECT_BINARY_DIR}/packaging/changelog.gz
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/packaging
  COMMAND ${TMCRA_GZIP} -9n -c ${PROJECT_SOURCE_DIR}/CHANGELOG.md
          > ${PROJECT_BINARY_DIR}/packaging/changelog.gz
  DEPENDS ${PROJECT_SOURCE_DIR}/CHANGELOG.md)
add_custom_target(tmcra-changelog ALL DEPENDS ${PROJECT_BINARY_DIR}/packaging/changelog.gz)
install(FILES ${PROJECT_BINARY_DIR}/packaging/changelog.gz DESTINATION ${CMAKE_INSTALL_DOCDIR})

# tmcra-memd@.service: tmcra-memd.service with each path of its own made the instance's.
function(tmcra_instance_unit in out)
  file(READ ${in} unit)
  string(FIND "${unit}" "[Unit]" at)
  string(SUBSTRING "${unit}" ${at} -1 unit)
  set(unit "# tmcra-memd@.service, made from tmcra-memd.service (its comments say how to use both) by\n# cmake/Packaging.cmake.\n${unit}")
  foreach(pair "Description=tmcra memory server (tmcra-memd)|Description=tmcra memory server (tmcra-memd instance %i)"
               "/etc/tmcra/memd.env|/etc/tmcra/memd-%i.env"
               "/etc/tmcra/tls/|/etc/tmcra/tls/%i/"
               "%S/tmcra-memd |%S/tmcra-memd-%i "
               "XDG_CACHE_HOME=%C\n|XDG_CACHE_HOME=%C/tmcra-memd-%i\n"
               "StateDirectory=tmcra-memd\n|StateDirectory=tmcra-memd-%i\n"
               "CacheDirectory=tmcra-memd\n|CacheDirectory=tmcra-memd-%i\n")
    string(REPLACE "|" ";" pair "${pair}")
    list(GET pair 0 from)
    list(GET pair 1 to)
    string(FIND "${unit}" "${from}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${in} has no '${from}' to make the instance unit of")
    endif()
    string(REPLACE "${from}" "${to}" unit "${unit}")
  endforeach()
  # @ONLY: the unit's own ${TMCRA_MEMD_LISTEN} is systemd's, not CMake's.
  file(CONFIGURE OUTPUT ${out} CONTENT "${unit}" @ONLY)
  file(READ ${out} written)
  string(FIND "${written}" "--listen \${TMCRA_MEMD_LISTEN} $TMCRA_MEMD_OPTIONS" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${out} lost the unit's settings on its command line")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${in})
endfunction()

set(units ${PROJECT_SOURCE_DIR}/packaging/systemd)
tmcra_instance_unit(${units}/tmcra-memd.service ${PROJECT_BINARY_DIR}/packaging/tmcra-memd@.service)
install(FILES ${units}/low-port.conf DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

if(TMCRA_PACKAGE)
  if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    message(FATAL_ERROR "TMCRA_PACKAGE needs CMAKE_INSTALL_PREFIX=/usr (the package preset)")
  endif()
  # Debian 12 keeps units in /lib (the usrmerge moratorium).
  install(FILES ${units}/tmcra-memd.service ${PROJECT_BINARY_DIR}/packaging/tmcra-memd@.service
          DESTINATION /lib/systemd/system)
  install(FILES ${units}/memd.env DESTINATION /etc/tmcra)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
  # packaging/README.md: the package, the service and its settings.
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
          RENAME README.Debian)
  string(TIMESTAMP TMCRA_PACKAGE_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
  configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/changelog.in
                 ${PROJECT_BINARY_DIR}/packaging/changelog.Debian @ONLY)
  add_custom_command(
    OUTPUT ${PROJECT_BINARY_DIR}/packaging/changelog.Debian.gz
    COMMAND ${TMCRA_GZIP} -9nf -k ${PROJECT_BINARY_DIR}/packaging/changelog.Debian
    DEPENDS ${PROJECT_BINARY_DIR}/packaging/changelog.Debian)
  add_custom_target(tmcra-changelog-debian ALL
                    DEPENDS ${PROJECT_BINARY_DIR}/packaging/changelog.Debian.gz)
  install(FILES ${PROJECT_BINARY_DIR}/packaging/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DOCDIR})
endif()

# CPack: the .deb and the .tar.gz hold the same tree, the tarball under one directory,
# tmcra-mcp-<version>-linux-amd64/ (usr/, etc/, lib/: the programs run from where they are).
set(CPACK_PACKAGE_NAME tmcra-mcp)
set(CPACK_PACKAGE_VENDOR "The tmcra-mcp authors")
set(CPACK_PACKAGE_CONTACT "${TMCRA_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "durable memory for AI coding agents (MCP server)")
set(CPACK_PACKAGE_DESCRIPTION
    "tmcra-mcp gives AI coding agents (Claude Code, Codex, Claude Desktop,
Cursor, VS Code, Gemini CLI) a durable memory over the Model Context
Protocol: a stdio MCP server with an embedded SQLite memory, host hooks
that recall and keep memory every turn, tmcra-mcp-setup to register it
with the hosts, and tmcra-memd, the same memory served over HTTPS to a
team (SQLite or PostgreSQL), with a systemd unit.")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB TGZ)
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_FILE_NAME "tmcra-mcp-${PROJECT_VERSION}-linux-amd64")
set(CPACK_THREADS 1)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${TMCRA_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libcurl is loaded with dlopen (src/config/libcurl.h), so dpkg-shlibdeps cannot see it; adduser
# makes the system user in postinst.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libcurl4 (>= 7.88.1), adduser")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "postgresql (>= 15)")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles
    ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
    ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
    ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
