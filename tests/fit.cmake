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
