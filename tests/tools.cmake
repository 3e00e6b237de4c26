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

# tests/test_cli.c points a plugin_path at the test plugins (<build>/tests/plugins), which
# the default search never sees, and validates configs naming the sgd plugin.
if(TARGET test_cli)
  add_dependencies(test_cli ganfw_test_plugins)
  if(TARGET ganfw_plugin_sgd)
    add_dependencies(test_cli ganfw_plugin_sgd)
  endif()
endif()
