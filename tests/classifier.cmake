# Suites of the classifier family need its plugins (and test_classifier the ganfw binary and
# every memory strategy, which it trains with) built first.
if(TARGET test_ref_sgd)
  add_dependencies(test_ref_sgd ganfw_plugin_sgd)
endif()
if(TARGET test_classifier)
  add_dependencies(test_classifier ganfw ganfw_plugin_cnn ganfw_plugin_sgd ganfw_plugin_adam)
  foreach(plugin accumulate amp checkpoint)
    if(TARGET ganfw_plugin_${plugin})
      add_dependencies(test_classifier ganfw_plugin_${plugin})
    endif()
  endforeach()
endif()
