/* model.widths inside net_build (internal to nn/): the output channels (features) a config
 * gives named conv2d, conv_transpose2d and linear layers, propagated through the graph to
 * every layer that depends on them before the shapes are inferred and the parameters made.
 * The rules are docs/PRUNING.md's, "model.widths: a narrower net from the same model". */
#ifndef GANFW_NET_WIDTHS_H
#define GANFW_NET_WIDTHS_H

#include "nn/layer.h"
#include "nn/net.h"

/* Sets the args of layers[0..n) (inputs resolved, nothing initialised) for the widths
 * w[0..nw) of net `net_name` whose input is in[0..in_ndim) (batch 1): each named layer's
 * out channels, then in channels / features and norm channels downstream. Errors (a name no
 * layer has, with the nearest; a layer of another type; a width <= 0 or above the layer's;
 * an add fed different widths; a layer that cannot follow a width change; the net's output
 * changing) are GANFW_ERR_CONFIG naming the key (its file:line:col from w[i].where), the
 * layer or the add and what feeds it. Nothing is changed on failure. */
ganfw_status ganfw_net_widths_apply(const char *net_name, ganfw_layer **layers, int32_t n,
                                    const int64_t *in, int32_t in_ndim, const ganfw_net_width *w,
                                    int32_t nw);

#endif
