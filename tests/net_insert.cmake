# tests/test_net_insert.c loads the test layer plugin (tests/plugins/layer.c) and the real
# dcgan, cnn and distill plugins from the build tree.
if(TARGET test_net_insert)
  add_dependencies(test_net_insert ganfw_testplugin_tplayer)
  foreach(plugin dcgan cnn distill adam)
    if(TARGET ganfw_plugin_${plugin})
      add_dependencies(test_net_insert ganfw_plugin_${plugin})
    endif()
  endforeach()
endif()
