/* Internal to the config: YAML text to a config node, for override.c (--set values).
 * Implemented in config_yaml.c; files are loaded through ganfw_config_load (config.h). */
#ifndef GANFW_CONFIG_YAML_H
#define GANFW_CONFIG_YAML_H

#include "config/config_tree.h"

/* Parses the YAML `text` of a --set value into a node located as `name` (interned);
 * an empty text is a null. *out is owned by the caller (cfg_node_free). GANFW_ERR_CONFIG
 * for a syntax error, naming `name`. */
ganfw_status cfg_yaml_parse_value(ganfw_config *c, const char *text, const char *name,
                                  ganfw_cfg **out);

#endif
