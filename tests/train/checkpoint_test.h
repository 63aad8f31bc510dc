/*
 * checkpoint_test.h - shared by the checkpoint's two test programs:
 * test_checkpoint.c (saving and resuming: the layout, bit-exact resume,
 * refusals, damaged files, the checksum, a staged backend) and
 * test_checkpoint_init.c (--init: loading weights into another model);
 * defined in checkpoint_test.c. Names start ckpt_.
 *
 * The models are convnet7 and resnet18 on ckpt_ctx, a two-thread CPU
 * context; files go to ckpt_dir, the program's scratch folder.
 */
#ifndef IMSHARD_CHECKPOINT_TEST_H
#define IMSHARD_CHECKPOINT_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "train/checkpoint.h"
#include "train/nn_internal.h"

extern nn_ctx ckpt_ctx;
extern char ckpt_dir[4096];

/* Makes the scratch folder $IMS_TMP/<tag>-XXXXXX and the CPU context;
 * exits 1 when it cannot. */
void ckpt_setup(const char *tag);

/* ckpt_dir/name into out (n bytes); exits 1 when it does not fit. */
void ckpt_path_in(char *out, size_t n, const char *name);
/* Prints what failed and the library's message, and exits 1. */
void ckpt_die(const char *what, const ims_error *e);

/* A model of `name` on ckpt_ctx (hw x hw input, 2 in a batch); exits on
 * failure. */
nn_model *ckpt_make(const char *name, int classes, int hw, uint64_t seed);
/* Gives every parameter, buffer and counter a value of its own. */
void ckpt_scramble(nn_model *m, uint64_t seed);
/* An optimiser of kind for m's parameters (SGD with momentum 0.9 and
 * weight decay 1e-4); exits on failure. */
nn_optim *ckpt_make_optim(int kind, nn_model *m);
/* One optimiser step from fake gradients drawn from seed (one check). */
void ckpt_step(nn_model *m, nn_optim *opt, uint64_t seed);

/* Tensor ti's bytes in m, and their count in *bytes. */
const void *ckpt_data_of(nn_model *m, const nn_tensor_info *ti, size_t *bytes);
/* 1 when tensor `name` holds the same bits in a and b. */
int ckpt_same_named(nn_model *a, nn_model *b, const char *name);
/* Every tensor of a, bit for bit in b (padding between tensors aside);
 * prints the first that differs. */
int ckpt_same_tensors(nn_model *a, nn_model *b);

/* A copy of all of a model's storage, padding included: a refused load
 * must leave every byte as it was. */
typedef struct ckpt_snap {
	float *p, *b;
	int64_t *c;
	size_t np, nb, nc;
} ckpt_snap;

ckpt_snap ckpt_snap_take(nn_model *m);
int ckpt_snap_same(nn_model *m, const ckpt_snap *s);
void ckpt_snap_free(ckpt_snap *s);

/* 1 when r says nothing was loaded, missing, unexpected or re-initialised. */
int ckpt_report_empty(const nn_load_report *r);

/* How ckpt_write_variant changes a model's tensors on their way to a
 * file. */
typedef struct ckpt_variant {
	const char *const *skip;  /* left out; NULL-terminated, or NULL */
	const char *const *extra; /* added as F32 [2]; NULL-terminated, or NULL */
	int halves;               /* floats as F16, BF16, F64 by tensor index
				     mod 3; counters as I32 or F32 in turn */
	const char *reshape;      /* written with shape `to` (zeros) instead */
	int to_ndim;
	int64_t to[4];
} ckpt_variant;

/* 1 when name is in the NULL-terminated list (which may be NULL). */
int ckpt_listed(const char *const *list, const char *name);
/* Writes m's tensors as v says to path (F32 and I64 unless told); exits
 * on failure. */
void ckpt_write_variant(const char *path, nn_model *m, const ckpt_variant *v);

#endif
