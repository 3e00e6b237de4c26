# The config reader alone: YAML parsing, extends, --set, getters, the resolved config.
ganfw_fuzzer(config
  SOURCES config/config.c config/config_yaml.c config/override.c base/error.c base/suggest.c
  LIBS PkgConfig::YAML)
