# The memory-strategy suite trains DC-GAN steps through the real plugins (dcgan, adam,
# accumulate, checkpoint, amp), so they are built first.
if(TARGET test_memory_strategies)
  foreach(plugin dcgan adam accumulate checkpoint amp)
    if(TARGET ganfw_plugin_${plugin})
      add_dependencies(test_memory_strategies ganfw_plugin_${plugin})
    endif()
  endforeach()
endif()
