# Build rules for tests/test_example_plugin.c, which runs `cmake --install` on this build
# tree, builds examples/mlp_gan against the installed prefix and trains with the installed
# ganfw: all of it shared with the other example suites (tests/example_common.cmake).
if(TARGET test_example_plugin)
  include(${CMAKE_CURRENT_LIST_DIR}/example_common.cmake)
  ganfw_example_test(test_example_plugin)
endif()
