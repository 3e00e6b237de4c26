# test_ref_trainer_ae steps the autoencoder trainer with the convae model and SGD.
if(TARGET test_ref_trainer_ae)
  add_dependencies(test_ref_trainer_ae ganfw_plugin_convae ganfw_plugin_autoencoder
                   ganfw_plugin_sgd)
endif()
