# Build rules for tests/test_example_sagan.c, which runs `cmake --install` on this build tree,
# builds examples/sagan (a layer plugin) against the installed prefix, checks the layer against
# PyTorch through the core and trains examples/sagan/dcgan_sagan.yaml with the installed ganfw:
# all of it shared with the other example suites (tests/example_common.cmake).
if(TARGET test_example_sagan)
  include(${CMAKE_CURRENT_LIST_DIR}/example_common.cmake)
  ganfw_example_test(test_example_sagan)
endif()
