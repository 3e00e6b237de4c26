# tests/test_amp.c loads the amp plugin and trains DC-GAN steps through the real plugins.
if(TARGET test_amp)
  add_dependencies(test_amp ganfw_plugin_amp ganfw_plugin_dcgan ganfw_plugin_adam)
endif()
