# test_trainer_pix2pix trains with the pix2pix trainer and the unet_patchgan model.
if(TARGET test_trainer_pix2pix)
  add_dependencies(test_trainer_pix2pix ganfw_plugin_unet_patchgan ganfw_plugin_pix2pix
                   ganfw_plugin_adam)
endif()
