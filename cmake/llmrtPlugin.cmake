# llmrt_add_plugin(<target> KIND <kind> NAME <name> SOURCES ...)
# Builds a plugin .so the way the loader expects: only llmrt_plugin_get exported, no "lib"
# prefix, named <kind>-<name>.so, placed in the plugin folder of the build tree (when built
# in-tree) and installed to <libdir>/llmrt/plugins. Shipped with the SDK for third parties.
include_guard(GLOBAL)
include(GNUInstallDirs)

function(llmrt_add_plugin target)
  cmake_parse_arguments(P "" "KIND;NAME" "SOURCES" ${ARGN})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE llmrt::sdk)
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME "${P_KIND}-${P_NAME}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(DEFINED LLMRT_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${LLMRT_PLUGIN_OUTPUT_DIR}")
  endif()
  if(NOT APPLE)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/llmrt/plugins)
  set_property(GLOBAL APPEND PROPERTY LLMRT_PLUGIN_TARGETS ${target}) # what a build ships
endfunction()
