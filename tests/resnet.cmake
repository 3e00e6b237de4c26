# The residual models' suites load the cnn and resgan plugins from <build>/plugins.
foreach(suite test_ref_resnet test_resnet)
  foreach(plugin cnn resgan)
    if(TARGET ${suite} AND TARGET ganfw_plugin_${plugin})
      add_dependencies(${suite} ganfw_plugin_${plugin})
    endif()
  endforeach()
endforeach()
