# Suites that train through the real plugins and the ganfw binary need them built first.
foreach(suite test_ref_gan_step test_ref_gan_run test_train test_cli)
  if(TARGET ${suite})
    add_dependencies(${suite} ganfw ganfw_plugin_dcgan ganfw_plugin_adam)
  endif()
endforeach()
