# Plugins built against the frozen ABI 1.0 headers (tests/abi10/include, never the current
# ones) into <build>/tests/plugins/abi10/: test_plugin_host.c loads and runs them with the
# current core. Included by tests/plugins.cmake, which defines ganfw_test_plugins.
set(GANFW_ABI10_DIR ${PROJECT_BINARY_DIR}/tests/plugins/abi10)
function(ganfw_abi10_plugin name source)
  cmake_parse_arguments(OP "" "" "DEFS" ${ARGN})
  add_library(ganfw_abi10_${name} MODULE ${CMAKE_CURRENT_LIST_DIR}/${source})
  target_include_directories(ganfw_abi10_${name} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/include)
  target_compile_definitions(ganfw_abi10_${name} PRIVATE ${OP_DEFS})
  set_target_properties(ganfw_abi10_${name} PROPERTIES
    PREFIX "" OUTPUT_NAME ganfw_${name} C_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${GANFW_ABI10_DIR})
  add_dependencies(ganfw_test_plugins ganfw_abi10_${name})
endfunction()

# The same 1.0 sources, unchanged, built against today's headers into .../abi10src/.
set(GANFW_ABI10_SRC_DIR ${PROJECT_BINARY_DIR}/tests/plugins/abi10src)
function(ganfw_abi10_today name source)
  add_library(ganfw_abi10src_${name} MODULE ${CMAKE_CURRENT_LIST_DIR}/${source})
  target_include_directories(ganfw_abi10src_${name} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_definitions(ganfw_abi10src_${name} PRIVATE OLD_TODAY=1)
  # the 1.0 sources initialise their vtables positionally, to 1.0's last member: valid C
  # whose newer members are zero, which is what the ABI promises they mean
  target_compile_options(ganfw_abi10src_${name} PRIVATE -Wno-missing-field-initializers)
  set_target_properties(ganfw_abi10src_${name} PROPERTIES
    PREFIX "" OUTPUT_NAME ganfw_${name} C_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${GANFW_ABI10_SRC_DIR})
  add_dependencies(ganfw_test_plugins ganfw_abi10src_${name})
endfunction()
ganfw_abi10_today(old_sgd old_sgd.c)
ganfw_abi10_today(old_mem old_mem.c)
ganfw_abi10_today(old_model old_model.c)

ganfw_abi10_plugin(old_sgd old_sgd.c)
ganfw_abi10_plugin(old_sgd_poison old_sgd.c DEFS [[OLD_NAME="old_sgd_poison"]] OLD_POISON=1)
ganfw_abi10_plugin(old_mem old_mem.c)
ganfw_abi10_plugin(old_model old_model.c)
