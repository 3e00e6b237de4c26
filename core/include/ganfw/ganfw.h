/* Everything a plugin author needs: include this one header. */
#ifndef GANFW_GANFW_H
#define GANFW_GANFW_H

#include "status.h"
#include "tensor.h"
#include "host.h"
#include "plugin.h"
#include "model.h"
#include "optim.h"
#include "memory.h"
#include "objective.h"
#include "trainer.h"
#include "layer_plugin.h"

#define GANFW_VERSION_STRING "0.1.0"

#endif
