# test_trainer_distill trains a classifier (cnn), distills it, and reads pairs.
if(TARGET test_trainer_distill)
  add_dependencies(test_trainer_distill ganfw_plugin_cnn ganfw_plugin_distill ganfw_plugin_adam
                   ganfw_plugin_sgd ganfw_plugin_autoencoder ganfw_plugin_convae)
endif()
