# test_ref_trainer_distill steps the distill trainer with two cnn nets and SGD.
if(TARGET test_ref_trainer_distill)
  target_sources(test_ref_trainer_distill PRIVATE ${CMAKE_CURRENT_LIST_DIR}/ref_trainer.c)
  add_dependencies(test_ref_trainer_distill ganfw_plugin_cnn ganfw_plugin_distill
                   ganfw_plugin_sgd)
endif()
