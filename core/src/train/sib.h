/* Memory strategy step_in_backward (ganfw_exec_options.step_in_backward), the core's half:
 * the generator's or the classifier's optimizer (optimizer 0 of the built-in GAN and
 * classifier trainers) updates each layer's parameters inside its last backward, as soon as
 * that layer's gradients are final (net.h's grad hook), and each gradient's storage goes
 * back to the allocator right after (runtime/tensor.h's storage release; the executor takes
 * it again before the layer's next backward writes it). The discriminator steps after its
 * whole backward as before, and its gradients' storage goes back after that step. The grad
 * category's peak drops from every net's gradients to the discriminator's (a GAN) or one
 * layer's (a classifier). */
#ifndef GANFW_TRAIN_SIB_H
#define GANFW_TRAIN_SIB_H

#include "train/session.h"

typedef struct ganfw_sib ganfw_sib;

/* After the optimizers exist: refuses what cannot hold with one step in backward (naming
 * the key), releases every gradient's storage and returns the state (owned by the caller:
 * ganfw_sib_destroy). *out is NULL, and GANFW_OK, when s->exec.step_in_backward is 0. */
ganfw_status ganfw_sib_create(ganfw_session *s, ganfw_sib **out);
void ganfw_sib_destroy(ganfw_sib *b); /* accepts NULL */

/* 1 when optimizer opt steps in backward (b may be NULL: never). */
int32_t ganfw_sib_active(const ganfw_sib *b, int32_t opt);
/* Before the backward that makes optimizer opt's gradients final: begins the optimizer's
 * step at its lr and hooks its net. */
ganfw_status ganfw_sib_arm(ganfw_sib *b, int32_t opt);
/* After that backward (its status `st`): unhooks the net and ends the step; returns st, or
 * the first error of an update inside the backward (a non-finite gradient names its
 * parameter), or that of step_end. */
ganfw_status ganfw_sib_finish(ganfw_sib *b, int32_t opt, ganfw_status st);
/* Releases the storage of optimizer opt's gradients (after its whole step). */
ganfw_status ganfw_sib_release(ganfw_sib *b, int32_t opt);

#endif
