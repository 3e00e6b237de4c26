# The memory tools' suites (plan, find-batch, compare, OOM advice) run configs through the
# ganfw binary and every real plugin a config in configs/ may name.
foreach(suite test_plan test_compare)
  if(TARGET ${suite})
    add_dependencies(${suite} ganfw)
    foreach(plugin dcgan adam cnn sgd amp checkpoint accumulate)
      if(TARGET ganfw_plugin_${plugin})
        add_dependencies(${suite} ganfw_plugin_${plugin})
      endif()
    endforeach()
  endif()
endforeach()
