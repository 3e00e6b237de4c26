# The fuzz corpora as regression tests of the normal build: for every harness
# tests/fuzz/fuzz_NAME.c, an executable fuzz_replay_NAME (the harness + tests/fuzz/replay_main.c,
# built with this build's compiler and sanitizers, linked to ganfw_core) that feeds each
# file of tests/fuzz/corpus/NAME/ to the harness once; CTest runs it as fuzz_replay_NAME.
# The fuzzing itself (clang, libFuzzer) is tests/fuzz/run.sh.
file(GLOB GANFW_FUZZ_HARNESSES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.c)
foreach(src ${GANFW_FUZZ_HARNESSES})
  get_filename_component(stem ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" name ${stem})
  add_executable(fuzz_replay_${name} ${src} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.c)
  target_include_directories(fuzz_replay_${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
  target_link_libraries(fuzz_replay_${name} PRIVATE ganfw_core)
  add_test(NAME fuzz_replay_${name}
           COMMAND fuzz_replay_${name} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${name})
endforeach()
