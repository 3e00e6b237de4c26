# GPU suites: every tests/gpu/test_gpu_<name>.c is one executable and one CTest test, built
# only with the CUDA backend (GANFW_HAVE_CUDA). Each exits 77 and prints "no CUDA device,
# skipped" on a machine without a GPU, which CTest reports as skipped, not failed; label
# `gpu` (ctest -L gpu runs only them, tests/gpu/run.sh does).
if(GANFW_HAVE_CUDA)
  file(GLOB GANFW_GPU_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_gpu_*.c)
  foreach(src ${GANFW_GPU_TEST_SOURCES})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_link_libraries(${name} PRIVATE ganfw_testutil)
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES
      SKIP_RETURN_CODE 77
      LABELS gpu
      ENVIRONMENT "GANFW_TEST_BUILD_DIR=${PROJECT_BINARY_DIR};GANFW_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  endforeach()
endif()

# test_cuda_cpu_only (in every build) runs the ganfw binary; the DC-GAN suite the plugins.
if(TARGET test_cuda_cpu_only)
  add_dependencies(test_cuda_cpu_only ganfw)
endif()
foreach(plugin dcgan adam amp checkpoint)
  if(TARGET test_gpu_dcgan AND TARGET ganfw_plugin_${plugin})
    add_dependencies(test_gpu_dcgan ganfw_plugin_${plugin})
  endif()
endforeach()
