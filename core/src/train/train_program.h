/* What `ganfw eval` and `sample` need of a trainer plugin's run (core/src/train/
 * train_program.c, which also holds its trainer under the one loop, train/loop.h). */
#ifndef GANFW_TRAIN_PROGRAM_H
#define GANFW_TRAIN_PROGRAM_H

#include "train/program.h"
#include "train/session.h"

/* The first n images of ds (fewer when it has fewer) and their labels (f32 [n,1], 0 when
 * unlabelled), in order: a sample grid's inputs. Both new tensors are the caller's. */
ganfw_status ganfw_program_grid_inputs(ganfw_session *s, const ganfw_dataset *ds, int64_t n,
                                       ganfw_tensor **x, ganfw_tensor **labels);
/* The trainer's sample() grid for inputs x (nets in eval mode), back in [0, 1] through
 * data.normalize, written to the PNG `path`. GANFW_ERR_UNSUPPORTED when the trainer draws
 * no samples. */
ganfw_status ganfw_program_write_grid(ganfw_program *prog, ganfw_tensor *x, ganfw_tensor *labels,
                                      const char *path);
/* Every net of the trainer from a checkpoint or state_dict file ("<role>.<name>"), strictly;
 * optimizer state is not read. */
ganfw_status ganfw_program_load_weights(ganfw_session *s, const char *path);

#endif
