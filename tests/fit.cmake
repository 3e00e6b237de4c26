# tests/test_fit.c runs `ganfw fit` in-process and through the binary, with the plugins its
# config names and the memory strategies fit searches.
if(TARGET test_fit)
  add_dependencies(test_fit ganfw)
  foreach(plugin dcgan adam amp accumulate checkpoint)
    if(TARGET ganfw_plugin_${plugin})
      add_dependencies(test_fit ganfw_plugin_${plugin})
    endif()
  endforeach()
endif()
# A strategy that refuses accumulation, named as step_in_backward, in a folder of its own
# that only test_fit's config names (plugins.cmake's rule, which is included after this file).
add_library(ganfw_testplugin_fit_refuse MODULE ${CMAKE_CURRENT_LIST_DIR}/plugins/fit_refuse.c)
target_include_directories(ganfw_testplugin_fit_refuse PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
set_target_properties(ganfw_testplugin_fit_refuse PROPERTIES
  PREFIX "" OUTPUT_NAME ganfw_step_in_backward C_VISIBILITY_PRESET hidden
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/plugins/fit)
if(TARGET test_fit)
  add_dependencies(test_fit ganfw_testplugin_fit_refuse)
endif()
