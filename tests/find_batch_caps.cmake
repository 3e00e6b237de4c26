# tests/test_find_batch_caps.c and tests/test_metrics_peak.c run configs through the ganfw
# binary and in-process, with the plugins their configs name.
foreach(suite test_find_batch_caps test_metrics_peak)
  if(TARGET ${suite})
    add_dependencies(${suite} ganfw)
    foreach(plugin dcgan adam cnn accumulate)
      if(TARGET ganfw_plugin_${plugin})
        add_dependencies(${suite} ganfw_plugin_${plugin})
      endif()
    endforeach()
  endif()
endforeach()
