# Suites that load the real plugins from <build>/plugins (plugins/*/*) need them built first.
foreach(pair "test_ref_adam:adam" "test_dcgan:dcgan" "test_ref_dcgan:dcgan"
        "test_plugin_host:adam" "test_plugin_host:adamw" "test_plugin_host:accumulate"
        "test_plugin_host:sgd")
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 suite)
  list(GET pair 1 plugin)
  if(TARGET ${suite} AND TARGET ganfw_plugin_${plugin})
    add_dependencies(${suite} ganfw_plugin_${plugin})
  endif()
endforeach()
