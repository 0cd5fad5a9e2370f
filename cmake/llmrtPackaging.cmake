# llmrtPackaging.cmake — what an installation has besides the binary, libllmrt, the plugins and
# the SDK, and the Debian package of it all (`cpack -G DEB` in the build folder):
#   man pages     llmrt(1) and llmrt-CMD(1) for every command, from the --help text at build
#                 time (packaging/gen-man.sh)
#   runtime.ini   the system configuration: this build's template with every key commented
#                 out (packaging/gen-runtime-ini.sh), in <prefix>/etc/llmrt — /etc/llmrt for
#                 prefix /usr, where /usr/bin/llmrt looks for it (config_ini.c)
#   llmrt.service `llmrt serve` under its own user (made by packaging/postinst), loopback
#                 unless the config says otherwise, in <prefix>/lib/systemd/system
#   completion    packaging/llmrt.bash in share/bash-completion/completions
# The binary finds libllmrt through its RPATH ($ORIGIN/../<libdir>) and the plugins beside it
# (<exe>/../<libdir>/llmrt/plugins), so a package unpacked anywhere runs.
set(LLMRT_PKG_DIR ${CMAKE_BINARY_DIR}/packaging)
get_property(LLMRT_PLUGIN_TARGETS GLOBAL PROPERTY LLMRT_PLUGIN_TARGETS)

add_custom_command(OUTPUT ${LLMRT_PKG_DIR}/man/llmrt.1.gz
  COMMAND bash ${CMAKE_SOURCE_DIR}/packaging/gen-man.sh $<TARGET_FILE:llmrt>
          ${LLMRT_PKG_DIR}/man ${PROJECT_VERSION}
  DEPENDS llmrt ${CMAKE_SOURCE_DIR}/packaging/gen-man.sh
  COMMENT "man pages from llmrt --help" VERBATIM)
add_custom_command(OUTPUT ${LLMRT_PKG_DIR}/runtime.ini
  COMMAND bash ${CMAKE_SOURCE_DIR}/packaging/gen-runtime-ini.sh $<TARGET_FILE:llmrt>
          ${LLMRT_PKG_DIR}/runtime.ini
  DEPENDS llmrt ${LLMRT_PLUGIN_TARGETS} ${CMAKE_SOURCE_DIR}/packaging/gen-runtime-ini.sh
  COMMENT "the system runtime.ini from llmrt config --template" VERBATIM)
add_custom_target(llmrt_packaging ALL
  DEPENDS ${LLMRT_PKG_DIR}/man/llmrt.1.gz ${LLMRT_PKG_DIR}/runtime.ini)

install(DIRECTORY ${LLMRT_PKG_DIR}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
  FILES_MATCHING PATTERN "*.1.gz")
install(FILES packaging/llmrt.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
  RENAME llmrt)
# Where they go depends on the prefix the install runs with (cpack's is /usr), so it is
# decided then. An existing runtime.ini is an operator's: kept.
install(CODE "
  if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    set(LLMRT_ETC /etc/llmrt)
  else()
    set(LLMRT_ETC \"\${CMAKE_INSTALL_PREFIX}/etc/llmrt\")
  endif()
  if(EXISTS \"\$ENV{DESTDIR}\${LLMRT_ETC}/runtime.ini\")
    message(STATUS \"Kept: \$ENV{DESTDIR}\${LLMRT_ETC}/runtime.ini\")
  else()
    file(INSTALL DESTINATION \"\${LLMRT_ETC}\" TYPE FILE FILES \"${LLMRT_PKG_DIR}/runtime.ini\")
  endif()
  set(LLMRT_BIN \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/llmrt\")
  configure_file(\"${CMAKE_SOURCE_DIR}/packaging/llmrt.service.in\"
                 \"${LLMRT_PKG_DIR}/llmrt.service\" @ONLY)
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\" TYPE FILE
       FILES \"${LLMRT_PKG_DIR}/llmrt.service\")
")

# ---- cpack -G DEB ----
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME llmrt)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "llmrt maintainers <llmrt@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "small, fast LLM inference runtime with pluggable host-memory paths")
set(CPACK_PACKAGE_DESCRIPTION
  "llmrt runs Hugging Face checkpoints (Qwen3 dense and AWQ) on CPU and CUDA, with an OpenAI-compatible server (llmrt serve, the llmrt service), an A/B benchmark and the plugin SDK (headers, CMake package, pkg-config, libllmrt).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr) # the prefix of the install cpack runs (with CPACK_SET_DESTDIR)
set(CPACK_SET_DESTDIR ON) # absolute destinations (/etc/llmrt) inside the package
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# dpkg-shlibdeps finds the Debian libraries it links; a CUDA build also links the toolkit's,
# which no Debian package provides, so there the list is written out
find_program(LLMRT_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(LLMRT_DPKG_SHLIBDEPS AND NOT LLMRT_HAVE_CUDA)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/lib)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "passwd")
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libc6, libinih1, libjansson4, libpcre2-8-0, libutf8proc2, libmicrohttpd12, libcairo2, passwd")
endif()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${CMAKE_SOURCE_DIR}/packaging/postinst ${CMAKE_SOURCE_DIR}/packaging/prerm
  ${CMAKE_SOURCE_DIR}/packaging/postrm ${CMAKE_SOURCE_DIR}/packaging/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
