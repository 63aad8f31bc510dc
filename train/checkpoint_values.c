/*
 * checkpoint_values.c - the values every load of weights takes, checked
 * before anything is written (checkpoint_internal.h): --init, --resume,
 * eval, predict and export alike.
 */
#include "train/checkpoint_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Element i of float tensor t as the model will hold it (F64 rounded). */
static float f32_at(const st_tensor *t, size_t i)
{
	const uint8_t *p = t->data;
	switch (t->dtype) {
	case ST_F16:
		return ims_f16_to_f32(ims_load_le16(p + 2 * i));
	case ST_BF16:
		return ims_bf16_to_f32(ims_load_le16(p + 2 * i));
	case ST_F64: {
		uint64_t b = 0;
		for (int k = 7; k >= 0; k--)
			b = b << 8 | p[8 * i + (size_t)k];
		double d;
		memcpy(&d, &b, sizeof(d));
		return (float)d;
	}
	default: {
		uint32_t b = ims_load_le32(p + 4 * i);
		float f;
		memcpy(&f, &b, sizeof(f));
		return f;
	}
	}
}

int ckpt_running_var(const nn_tensor_info *ti)
{
	static const char suffix[] = "running_var";
	const size_t n = strlen(ti->name), k = sizeof(suffix) - 1;
	return ti->kind == NN_TENSOR_RUNNING && n >= k &&
	       !strcmp(ti->name + n - k, suffix);
}

/*
 * Every value of float tensor t (count elements) as the model will hold
 * it, in one pass, before anything is written; every load checks each
 * float tensor it takes (--init, --resume, eval, predict, export alike).
 *   - A NaN or infinite weight, running statistic or optimiser state
 *     makes every loss NaN (at once, at the next validation, or at the
 *     next step), and the run would stop there blaming the learning rate
 *     or the data, eval blame the network's output. A finite F64 beyond
 *     float's range counts as infinite: that is what the model would
 *     hold.
 *   - Batch norm divides by sqrt(running_var + eps): below -eps that is
 *     NaN, between -eps and 0 a channel silently scaled up. Training never
 *     writes such a value (a variance is a mean of squares, updated as a
 *     convex mix), so one comes from a damaged file re-signed or an
 *     edited one.
 */
int ckpt_check_values(const st_tensor *t, size_t count, int what,
		      const char *action, const char *path, ims_error *err)
{
	/* F32, what checkpoints hold: a branch-free scan of the bits (no
	 * element is converted; blocks of a fixed count, which the compiler
	 * vectorises), then the element found below. An exponent of all ones
	 * is an infinity or a NaN; a word above the sign bit alone is below
	 * 0 (-0 is a variance). */
	if (t->dtype == ST_F32) {
		enum { BLOCK = 16 };
		const uint8_t *p = t->data;
		const uint32_t below = what == CKPT_VALUES_VARIANCE ? 0x80000000u : 0xffffffffu;
		uint32_t bad = 0;
		size_t k = 0;
		for (; k + BLOCK <= count && !bad; k += BLOCK)
			for (int j = 0; j < BLOCK; j++) {
				const uint32_t b = ims_load_le32(p + 4 * (k + (size_t)j));
				bad |= (uint32_t)((b & 0x7f800000u) == 0x7f800000u) |
				       (uint32_t)(b > below);
			}
		for (; k < count && !bad; k++) {
			const uint32_t b = ims_load_le32(p + 4 * k);
			bad |= (uint32_t)((b & 0x7f800000u) == 0x7f800000u) |
			       (uint32_t)(b > below);
		}
		if (!bad)
			return 0;
	}
	size_t i = 0;
	float v = 0;
	for (; i < count; i++) {
		v = f32_at(t, i);
		if (!isfinite(v) || (what == CKPT_VALUES_VARIANCE && v < 0))
			break;
	}
	if (i == count)
		return 0;
	char text[32];
	if (isfinite(v))
		snprintf(text, sizeof(text), "%g", (double)v);
	else
		snprintf(text, sizeof(text), "%s", isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf");
	const char *why =
		what == CKPT_VALUES_VARIANCE
			? "a running variance is a finite number not below 0 "
			  "(batch norm divides by its square root); the file is "
			  "damaged or was edited, use another copy"
		: what == CKPT_VALUES_STATE
			? "optimiser state that is not finite makes the weights "
			  "NaN at the next step; use a copy saved before it "
			  "diverged"
			: "weights that are not finite make every loss NaN; use a "
			  "copy saved before it diverged";
	return ims_fail(err, IMS_EINVAL,
			"%s '%s': tensor '%s' holds %s at element %zu (as float32): %s",
			action, path, t->name, text, i, why);
}
