# test_ref_trainer_pix2pix steps the pix2pix trainer with the unet_patchgan model and SGD.
if(TARGET test_ref_trainer_pix2pix)
  target_sources(test_ref_trainer_pix2pix PRIVATE ${CMAKE_CURRENT_LIST_DIR}/ref_trainer.c)
  add_dependencies(test_ref_trainer_pix2pix ganfw_plugin_unet_patchgan ganfw_plugin_pix2pix
                   ganfw_plugin_sgd)
endif()
