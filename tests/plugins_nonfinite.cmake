# tests/test_nonfinite.c: the ganfw binary, the real plugins it trains with, and the test
# strategy tpnan (tests/plugins/nonfinite.c) that makes a known layer go non-finite at a
# known step. After plugins.cmake, which defines ganfw_test_plugin.
ganfw_test_plugin(tpnan nonfinite.c)
if(TARGET test_nonfinite)
  add_dependencies(test_nonfinite ganfw ganfw_testplugin_tpnan ganfw_plugin_dcgan
                   ganfw_plugin_adam ganfw_plugin_cnn ganfw_plugin_sgd)
  if(TARGET ganfw_plugin_amp)
    add_dependencies(test_nonfinite ganfw_plugin_amp)
  endif()
endif()
