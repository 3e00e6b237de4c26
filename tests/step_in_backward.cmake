# The step-in-backward suite trains DC-GAN and CNN steps through the real plugins.
if(TARGET test_step_in_backward)
  foreach(plugin dcgan cnn adam adam8bit sgd accumulate zero amp step_in_backward)
    if(TARGET ganfw_plugin_${plugin})
      add_dependencies(test_step_in_backward ganfw_plugin_${plugin})
    endif()
  endforeach()
endif()
