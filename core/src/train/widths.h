/* model.widths: the out channels the config gives layers of the model's nets (structured
 * channel pruning's reduced widths, docs/PRUNING.md), applied while the model builds
 * them (nn/net.h, ganfw_net_set_widths):
 *
 *   model:
 *     plugin: cnn
 *     widths: {conv1: 8, layer1: {0: {conv1: 8, conv2: 8}}}   # layer1.0.conv1: 8, ...
 *
 * A layer name is a dotted path, written as nested maps (YAML keys hold no '.'; `--set
 * model.widths.layer1.0.conv1=8` writes the same). A model of several nets prefixes the first
 * part with the net and a colon: {"generator:main": {0: 256}} is generator's main.0. With
 * model.nets, each role's section has its own widths. */
#ifndef GANFW_TRAIN_WIDTHS_H
#define GANFW_TRAIN_WIDTHS_H

#include <stdint.h>

#include "config/config.h"
#include "runtime/ctx.h"

typedef struct ganfw_widths ganfw_widths;

/* Reads `section.widths` (section: the model's, `where` its key: "model" or
 * "model.nets.student"). *out is NULL when the section has none; else owned by the caller
 * (ganfw_widths_destroy, any time after ganfw_widths_finish). A value that is no positive
 * integer, or a map that is no map, is GANFW_ERR_CONFIG naming its place. */
ganfw_status ganfw_widths_open(const ganfw_cfg *section, const char *where, ganfw_widths **out);
void ganfw_widths_destroy(ganfw_widths *w); /* accepts NULL */

/* Makes w (NULL: nothing to do) a net_build hook of ctx, after the hook ctx has (model.insert,
 * which runs first), until ganfw_widths_finish. */
void ganfw_widths_arm(ganfw_widths *w, ganfw_ctx *ctx);
/* After the model's create: puts ctx's previous hook back, then, when the model was `created`,
 * an error for entries of a net it did not build, or unprefixed entries in a model of several
 * nets. */
ganfw_status ganfw_widths_finish(ganfw_widths *w, ganfw_ctx *ctx, int32_t created);

#endif
