# test_ref_trainer_distill steps the distill trainer with two cnn nets and SGD.
if(TARGET test_ref_trainer_distill)
  add_dependencies(test_ref_trainer_distill ganfw_plugin_cnn ganfw_plugin_distill
                   ganfw_plugin_sgd)
endif()
