/* The current plugin call of each thread (see plugin_frame.h). */
#include "base/plugin_frame.h"

_Thread_local const ganfw_plugin_frame *ganfw_plugin_frame_tls;
