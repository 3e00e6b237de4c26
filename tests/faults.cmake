# I/O fault injection (tests/faults/inject.c): ganfw_faults is the ganfw command line with
# the injector's wrapping open/write/fsync/rename/mkdir linked in, driven by GANFW_FAULT*
# (no LD_PRELOAD, so it works the same under AddressSanitizer). test_io_faults runs it and
# links the injector itself for the writes it makes in-process; test_kill9 runs the plain
# ganfw binary.
add_executable(ganfw_faults ${GANFW_CLI_SOURCES} ${CMAKE_CURRENT_SOURCE_DIR}/faults/inject.c)
target_include_directories(ganfw_faults PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(ganfw_faults PRIVATE ganfw_core ${CMAKE_DL_LIBS} Threads::Threads)
set_target_properties(ganfw_faults PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})

# test_file injects faults into the atomic writer and the appender in-process.
if(TARGET test_file)
  target_sources(test_file PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/faults/inject.c)
  target_link_libraries(test_file PRIVATE ${CMAKE_DL_LIBS})
endif()
if(TARGET test_io_faults)
  target_sources(test_io_faults PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/faults/inject.c)
  target_link_libraries(test_io_faults PRIVATE ${CMAKE_DL_LIBS})
  add_dependencies(test_io_faults ganfw_faults ganfw_plugin_dcgan ganfw_plugin_adam)
  foreach(plugin cnn sgd)
    if(TARGET ganfw_plugin_${plugin})
      add_dependencies(test_io_faults ganfw_plugin_${plugin})
    endif()
  endforeach()
endif()
if(TARGET test_kill9)
  add_dependencies(test_kill9 ganfw ganfw_plugin_dcgan ganfw_plugin_adam)
endif()
