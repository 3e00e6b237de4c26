# test_ref_trainer_ae steps the autoencoder trainer with the convae model and SGD.
if(TARGET test_ref_trainer_ae)
  target_sources(test_ref_trainer_ae PRIVATE ${CMAKE_CURRENT_LIST_DIR}/ref_trainer.c)
  add_dependencies(test_ref_trainer_ae ganfw_plugin_convae ganfw_plugin_autoencoder
                   ganfw_plugin_sgd)
endif()
