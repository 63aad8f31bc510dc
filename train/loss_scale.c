/*
 * loss_scale.c - fp16's dynamic loss scale (see loss_scale.h). Host
 * arithmetic on powers of two only, so every value is exact in float.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/loss_scale.h"

void nn_loss_scale_init(nn_loss_scale *s, int enabled)
{
	s->enabled = enabled != 0;
	s->scale = s->enabled ? NN_LOSS_SCALE_INIT : 1.0f;
	s->good = 0;
	s->skipped = 0;
}

float nn_loss_scale_value(const nn_loss_scale *s)
{
	return s->enabled ? s->scale : 1.0f;
}

int nn_loss_scale_update(nn_loss_scale *s, int found_inf)
{
	if (!s->enabled)
		return 1;
	if (found_inf) {
		s->skipped++;
		s->good = 0;
		if (s->scale > NN_LOSS_SCALE_MIN)
			s->scale *= 0.5f;
		return 0;
	}
	if (++s->good >= NN_LOSS_SCALE_INTERVAL) {
		s->good = 0;
		if (s->scale < NN_LOSS_SCALE_MAX)
			s->scale *= 2.0f;
	}
	return 1;
}

int nn_loss_scale_at_floor(const nn_loss_scale *s)
{
	return s->enabled && s->scale <= NN_LOSS_SCALE_MIN;
}

int nn_loss_scale_check_loss(const nn_loss_scale *s, double loss)
{
	if (isfinite(loss))
		return NN_LOSS_FINITE;
	/* at the floor S cannot halve again: a run that overflows there
	 * would skip step after step, so it stops as bf16 and fp32 do */
	return s->enabled && s->scale > NN_LOSS_SCALE_MIN ? NN_LOSS_OVERFLOW
							   : NN_LOSS_STOP;
}

void nn_loss_scale_format(const nn_loss_scale *s, char *scale, char *good,
			  char *skipped)
{
	snprintf(scale, NN_LOSS_SCALE_META_LEN, "%.0f",
		 (double)nn_loss_scale_value(s));
	snprintf(good, NN_LOSS_SCALE_META_LEN, "%u",
		 s->enabled ? s->good : 0u);
	snprintf(skipped, NN_LOSS_SCALE_META_LEN, "%llu",
		 (unsigned long long)s->skipped);
}

/* A decimal integer without sign or spaces, as format writes them. */
static int parse_u64(const char *str, uint64_t *v)
{
	if (!str || *str < '0' || *str > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(str, &end, 10);
	if (errno || *end)
		return -1;
	*v = x;
	return 0;
}

int nn_loss_scale_restore(nn_loss_scale *s, const char *scale,
			  const char *good, const char *skipped,
			  const char *path, ims_error *err)
{
	uint64_t sk = s->skipped, sc = 0, g = 0;
	RETURN_IF(skipped && parse_u64(skipped, &sk), err, IMS_ECORRUPT,
		  "cannot resume from '%s': its skipped_steps '%s' is not a "
		  "count",
		  path, skipped);
	const int both = s->enabled && scale && good;
	if (both) {
		RETURN_IF(parse_u64(scale, &sc) || sc < NN_LOSS_SCALE_MIN ||
				  sc > NN_LOSS_SCALE_MAX || (sc & (sc - 1)),
			  err, IMS_ECORRUPT,
			  "cannot resume from '%s': its loss_scale '%s' is not a "
			  "power of two from 1 to 2^24",
			  path, scale);
		RETURN_IF(parse_u64(good, &g) || g >= NN_LOSS_SCALE_INTERVAL, err,
			  IMS_ECORRUPT,
			  "cannot resume from '%s': its loss_scale_good_steps '%s' "
			  "is not a count below %u",
			  path, good, NN_LOSS_SCALE_INTERVAL);
		s->scale = (float)sc;
		s->good = (uint32_t)g;
	}
	s->skipped = sk;
	return 0;
}
