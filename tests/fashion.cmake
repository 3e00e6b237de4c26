# tests/test_fashion.c trains the cnn classifier with Adam, in-process and through the ganfw
# binary (SIGTERM, resume, `ganfw eval`): both and the plugins are built first.
if(TARGET test_fashion)
  add_dependencies(test_fashion ganfw ganfw_plugin_cnn ganfw_plugin_adam)
endif()
