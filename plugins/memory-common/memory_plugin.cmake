# memory_plugin(<name>): build plugins/memory-<name> (its memory_<name>.c plus the shared
# machinery) and its unit tests — the shared memory-plugin test driver, run against a mock
# backend (policy), the real CPU backend and the real CUDA backend (exit 77 without a GPU).
function(memory_plugin name)
  set(common ${CMAKE_CURRENT_FUNCTION_LIST_DIR})
  llmrt_add_plugin(memory-${name} KIND memory NAME ${name} SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/memory_${name}.c ${common}/memory_common.c)
  target_include_directories(memory-${name} PRIVATE ${common})
  if(TARGET llmrt_test_support)
    add_executable(test_memory_${name} ${common}/tests/test_memory_plugin.c)
    target_link_libraries(test_memory_${name} PRIVATE llmrt_test_support)
    target_compile_definitions(test_memory_${name} PRIVATE PLUGIN_NAME="${name}"
      PLUGIN_FILE="memory-${name}.so")
    add_dependencies(test_memory_${name} memory-${name})
    foreach(be mock cpu cuda)
      add_test(NAME memory-${name}.${be} COMMAND test_memory_${name} ${be})
      set_tests_properties(memory-${name}.${be} PROPERTIES ENVIRONMENT "${LLMRT_TEST_ENV}"
        SKIP_RETURN_CODE 77)
    endforeach()
  endif()
endfunction()
