/*
 * loss_scale.h - dynamic loss scaling for --precision fp16: the host-side
 * state machine that decides, step by step, the scale S the loss gradient
 * is multiplied by and whether a step's gradients may be applied.
 *
 * fp16 keeps 5 exponent bits: small gradients rounded to fp16 flush to
 * zero. The loss gradient is multiplied by S so they stay in range, and
 * the gradients are divided by S again (in fp32) before the optimiser
 * reads them. Too large an S overflows to Inf or NaN somewhere in
 * backward; that step is then skipped and S halved. The rules (PyTorch's
 * GradScaler defaults):
 *   - S starts at NN_LOSS_SCALE_INIT (2^16);
 *   - a step whose gradients hold an Inf or NaN is skipped (weights and
 *     optimiser state unchanged; the trainer still counts the step), S is
 *     halved down to NN_LOSS_SCALE_MIN (1), and the count of good steps
 *     restarts;
 *   - after NN_LOSS_SCALE_INTERVAL (2000) good steps in a row S doubles,
 *     up to NN_LOSS_SCALE_MAX (2^24), and the count restarts.
 * A disabled scaler (bf16, fp32) keeps S = 1 and applies every step.
 * S is always a power of two, so scaling and unscaling are exact.
 *
 * An fp16 forward pass that overflows leaves a loss that is not finite:
 * nn_loss_scale_check_loss makes that step an overflow too.
 *
 * Caveats: plain data, no allocation, no threads. With several ranks,
 * every rank must feed update() the same found_inf (the trainer checks the
 * allreduced gradients and sums the flag over ranks), so their scalers
 * stay identical.
 */
#ifndef IMSHARD_LOSS_SCALE_H
#define IMSHARD_LOSS_SCALE_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define NN_LOSS_SCALE_INIT 65536.0f
#define NN_LOSS_SCALE_MIN 1.0f
#define NN_LOSS_SCALE_MAX 16777216.0f
#define NN_LOSS_SCALE_INTERVAL 2000u

typedef struct nn_loss_scale {
	int enabled;      /* 1: fp16's dynamic scaling; 0: S stays 1 */
	float scale;      /* S */
	uint32_t good;    /* good steps in a row since S last changed */
	uint64_t skipped; /* steps skipped for overflow, in all */
} nn_loss_scale;

/* Starts a scaler: enabled, S = NN_LOSS_SCALE_INIT; disabled, S = 1. */
void nn_loss_scale_init(nn_loss_scale *s, int enabled);

/* The S to multiply this step's loss gradient by. */
float nn_loss_scale_value(const nn_loss_scale *s);

/*
 * Records one step's outcome: found_inf != 0 when its (allreduced,
 * unscaled) gradients held an Inf or NaN. Returns 1 when the step's
 * gradients are to be applied, 0 when the step is skipped (found_inf on
 * an enabled scaler). A disabled scaler returns 1 and changes nothing.
 */
int nn_loss_scale_update(nn_loss_scale *s, int found_inf);

/*
 * What a step does whose loss, summed over ranks, is `loss` (every rank
 * passes the same sum, so every rank decides alike):
 *   NN_LOSS_FINITE    the loss is finite: go on;
 *   NN_LOSS_OVERFLOW  it is not, on an enabled scaler above
 *                     NN_LOSS_SCALE_MIN: fp16's forward pass overflowed
 *                     (a 16-bit result beyond 65504); the step is treated
 *                     as an overflow (nn_loss_scale_update with found_inf:
 *                     skipped, S halved), as one in backward would be;
 *   NN_LOSS_STOP      it is not, and the run ends: bf16 and fp32 have
 *                     fp32's range, so the model or the data diverged;
 *                     fp16 at S = NN_LOSS_SCALE_MIN can skip no further.
 * Changes nothing.
 */
enum { NN_LOSS_STOP = -1, NN_LOSS_FINITE = 0, NN_LOSS_OVERFLOW = 1 };
int nn_loss_scale_check_loss(const nn_loss_scale *s, double loss);

/* 1 when an enabled scaler is at NN_LOSS_SCALE_MIN: gradients that
 * overflow there cannot be brought into range by halving, and the run
 * ends as for a loss that is not finite there; 0 otherwise. */
int nn_loss_scale_at_floor(const nn_loss_scale *s);

/*
 * The state as checkpoint metadata values (decimal strings, each buffer
 * NN_LOSS_SCALE_META_LEN bytes): S, the good-step count, the skipped
 * count. A disabled scaler writes "1" and "0" for the first two.
 */
#define NN_LOSS_SCALE_META_LEN 32
void nn_loss_scale_format(const nn_loss_scale *s, char *scale, char *good,
			  char *skipped);

/*
 * Restores what nn_loss_scale_format wrote, into a scaler set up by
 * nn_loss_scale_init for this run. Any value may be NULL (a checkpoint
 * without it: that part keeps its initial value). skipped is always
 * restored; scale and good only on an enabled scaler and only both
 * together (a checkpoint of an fp32 or bf16 run carries S = 1, which an
 * fp16 run must not start from: its writer leaves them out). Fails with
 * IMS_ECORRUPT and one line naming `path` when a value is not a decimal
 * integer, S is not a power of two in [NN_LOSS_SCALE_MIN,
 * NN_LOSS_SCALE_MAX] or good is not below NN_LOSS_SCALE_INTERVAL; s is
 * then unchanged.
 */
int nn_loss_scale_restore(nn_loss_scale *s, const char *scale,
			  const char *good, const char *skipped,
			  const char *path, ims_error *err);

#endif
