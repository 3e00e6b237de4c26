/* A net's exponential moving average (train.ema: {decay, start}; a GAN's generator, or with
 * a trainer plugin train.ema.net's), as BigGAN's and
 * StyleGAN's G_ema: an f32 copy of each of G's trainable parameters (allocated under the
 * owner name "generator_ema", category param), equal to the parameters up to step `start`
 * and then, after every G step, torch.lerp(ema, param, 1 - decay). Saved in checkpoints as
 * "generator_ema.<param>"; `ganfw sample` and `ganfw score` draw with these weights unless
 * told --no-ema. BatchNorm buffers are not averaged: samples use batch statistics. */
#ifndef GANFW_EMA_H
#define GANFW_EMA_H

#include "io/checkpoint.h"
#include "train/session.h"

struct ganfw_ema {
  int64_t n;
  ganfw_tensor **avg;     /* [n] the averages */
  const char **names;     /* [n] the parameters' names (borrowed from the net) */
  const ganfw_param *src; /* [n] G's parameters (the optimizer's list, borrowed) */
  double decay;
  int64_t start;   /* steps up to this one copy the parameters */
  int32_t net;     /* the session's net (s->nets[net]) whose optimizer's parameters these are */
  char prefix[80]; /* "<role>_ema": the owner name and the checkpoint's tensor prefix */
};

/* Reads train.ema (absent: *decay 0, off); a decay outside (0, 1) or a negative start is
 * GANFW_ERR_CONFIG naming the key. train.ema.net names the averaged net of a trainer plugin
 * (*net, borrowed; NULL when not given: a GAN's generator, a trainer's generating net);
 * refused for a classifier. */
ganfw_status ganfw_ema_read(const ganfw_cfg *train, int32_t family, double *decay, int64_t *start,
                            const char **net);
/* The averages of the parameters of s->nets[net]'s optimizer, starting as their copy, named
 * "<role>_ema"; *out owned by the caller (ganfw_ema_destroy). */
ganfw_status ganfw_ema_create(ganfw_session *s, int32_t net, double decay, int64_t start,
                              ganfw_ema **out);
void ganfw_ema_destroy(ganfw_ema *e); /* accepts NULL */
/* After G's optimizer step of training step `step` (1-based). */
ganfw_status ganfw_ema_update(ganfw_ema *e, ganfw_backend *be, int64_t step);
/* The averages as a checkpoint's extra tensors of their net's entry ("<role>_ema.*"). */
void ganfw_ema_ckpt(const ganfw_ema *e, ganfw_ckpt_net *net);
/* Loads the generator's weights from `ckpt` (a checkpoint or state_dict file) and, when
 * use_ema and the file has the averages, puts them in place of its parameters; *used is 1
 * when it did. */
ganfw_status ganfw_ema_load_generator(ganfw_session *s, const char *ckpt, int32_t use_ema,
                                      int32_t *used);

#endif
