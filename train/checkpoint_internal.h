/*
 * checkpoint_internal.h - what checkpoint.c shares with the files beside
 * it in the checkpoint library (not installed, not for other libraries):
 * the check of the values every load takes (checkpoint_values.c).
 */
#ifndef IMSHARD_CHECKPOINT_INTERNAL_H
#define IMSHARD_CHECKPOINT_INTERNAL_H

#include "common/common.h"
#include "train/nn.h"
#include "train/safetensors.h"

/* What a float tensor holds, for ckpt_check_values' rule and message. */
enum { CKPT_VALUES_WEIGHTS, CKPT_VALUES_VARIANCE, CKPT_VALUES_STATE };

/* 1 when ti is a batch norm's running variance ("bn1.running_var"). */
int ckpt_running_var(const nn_tensor_info *ti);

/*
 * Checks every value of float tensor t (F16, BF16, F32 or F64; count
 * elements) as the model will hold it, before anything is written:
 * finite, and with CKPT_VALUES_VARIANCE not below 0. what: CKPT_VALUES_*;
 * action: "cannot load" or "cannot resume from"; path names the file.
 * Errors: IMS_EINVAL naming the tensor, its first bad element and value
 * ("cannot load 'PATH': tensor 'fc.weight' holds NaN at element 3 (as
 * float32): ...").
 */
int ckpt_check_values(const st_tensor *t, size_t count, int what,
		      const char *action, const char *path, ims_error *err);

#endif
