/* The whole training run of `ganfw CONFIG` for a session driven by a trainer plugin
 * (family GANFW_MODEL_NETS): core/src/train/train_program.c. */
#ifndef GANFW_TRAIN_PROGRAM_H
#define GANFW_TRAIN_PROGRAM_H

#include "train/session.h"

ganfw_status ganfw_train_program(ganfw_session *s);

#endif
