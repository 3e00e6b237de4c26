# test_image_folder trains the autoencoder trainer (convae model) on image folders.
if(TARGET test_image_folder)
  add_dependencies(test_image_folder ganfw_plugin_convae ganfw_plugin_autoencoder
                   ganfw_plugin_adam)
endif()
