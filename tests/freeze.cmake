# test_freeze trains tiny classifier and GAN runs: their plugins and the ganfw binary first.
if(TARGET test_freeze)
  add_dependencies(test_freeze ganfw ganfw_plugin_cnn ganfw_plugin_dcgan ganfw_plugin_adam
                   ganfw_plugin_sgd)
endif()
