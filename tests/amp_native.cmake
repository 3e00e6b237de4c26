# tests/test_amp_native.c plans and runs DC-GAN AMP steps through the real plugins.
if(TARGET test_amp_native)
  add_dependencies(test_amp_native ganfw_plugin_amp ganfw_plugin_dcgan ganfw_plugin_adam)
endif()
