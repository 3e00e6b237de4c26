# Build rules for tests/test_plugin_layer.c, the suite of layers defined by plugins. The
# example layer plugin examples/pixelnorm is used four ways:
#  - its layer (pixelnorm.c) is compiled into the suite, for the gradient checks;
#  - the whole model plugin is built from the public headers alone into
#    <build>/tests/plugin_layer/ganfw_pixelnorm_gan.so, for `plan` against a real step;
#  - the suite installs this build tree into a temporary prefix and builds the example out
#    of tree against it (cmake, compiler and flags from the header tests/example_common.cmake
#    generates), then runs the installed ganfw on it;
#  - tests/gpu/test_gpu_tensor_math.c (CUDA builds) runs the layer on the device.
if(TARGET test_ref_penalty) # the plugin layer's double backward against PyTorch
  target_sources(test_ref_penalty PRIVATE ${PROJECT_SOURCE_DIR}/examples/pixelnorm/pixelnorm.c)
  target_include_directories(test_ref_penalty PRIVATE ${PROJECT_SOURCE_DIR}/examples/pixelnorm)
endif()
if(TARGET test_plugin_layer)
  set(GANFW_PIXELNORM_DIR ${PROJECT_SOURCE_DIR}/examples/pixelnorm)
  target_sources(test_plugin_layer PRIVATE ${GANFW_PIXELNORM_DIR}/pixelnorm.c)
  include(${CMAKE_CURRENT_LIST_DIR}/example_common.cmake)
  target_include_directories(test_plugin_layer PRIVATE ${GANFW_PIXELNORM_DIR}
                             ${CMAKE_CURRENT_BINARY_DIR}/example_common)

  add_library(ganfw_example_pixelnorm_gan MODULE ${GANFW_PIXELNORM_DIR}/pixelnorm_gan.c
              ${GANFW_PIXELNORM_DIR}/pixelnorm.c)
  target_include_directories(ganfw_example_pixelnorm_gan PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_link_libraries(ganfw_example_pixelnorm_gan PRIVATE m)
  set_target_properties(ganfw_example_pixelnorm_gan PROPERTIES
    PREFIX "" OUTPUT_NAME ganfw_pixelnorm_gan C_VISIBILITY_PRESET hidden C_STANDARD 11
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/plugin_layer)
  add_dependencies(test_plugin_layer ganfw_example_pixelnorm_gan)
  # The install needs the binary and every installable plugin: test_example_plugin's target
  # depends on all of them.
  if(TARGET test_example_plugin)
    add_dependencies(test_plugin_layer test_example_plugin)
  endif()
  set_tests_properties(test_plugin_layer PROPERTIES TIMEOUT 600)
endif()
# The CUDA build's GPU suite runs a net of pixel norms on the device against the CPU.
if(TARGET test_gpu_tensor_math)
  target_sources(test_gpu_tensor_math PRIVATE ${PROJECT_SOURCE_DIR}/examples/pixelnorm/pixelnorm.c)
  target_include_directories(test_gpu_tensor_math PRIVATE ${PROJECT_SOURCE_DIR}/examples/pixelnorm)
endif()
