# test_trainer_plugin trains with the autoencoder trainer and the convae model.
if(TARGET test_trainer_plugin)
  add_dependencies(test_trainer_plugin ganfw_plugin_convae ganfw_plugin_autoencoder
                   ganfw_plugin_adam ganfw_plugin_accumulate ganfw_plugin_cnn
                   ganfw_plugin_checkpoint)
endif()
