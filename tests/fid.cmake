# test_fid compares against tests/ref/gen_fid.py's references, and trains tiny GAN and
# classifier runs to score them through the library and the ganfw binary.
if(TARGET test_fid)
  set_tests_properties(test_fid PROPERTIES FIXTURES_REQUIRED torch_refs)
  add_dependencies(test_fid ganfw ganfw_plugin_cnn ganfw_plugin_dcgan ganfw_plugin_adam)
endif()
