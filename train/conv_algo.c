/*
 * conv_algo.c - ranked convolution algorithms with fallback and a cache
 * (conv_algo.h). Plain C: the device's cuDNN code supplies the lists and
 * the tries, the tests fake both.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/conv_algo.h"

void nn_algo_list_init(nn_algo_list *l)
{
	memset(l, 0, sizeof(*l));
	l->chosen = -1;
}

int nn_algo_eligible(const nn_algo_list *l, int i, int mode, size_t ws_limit)
{
	if (i < 0 || i >= l->n || i >= NN_ALGO_MAX)
		return 0;
	const nn_algo_cand *c = &l->c[i];
	return c->usable && !(l->failed & (1u << i)) &&
	       c->workspace <= ws_limit &&
	       (mode != NN_ALGO_DETERMINISTIC || c->deterministic);
}

int nn_algo_next(const nn_algo_list *l, int mode, size_t ws_limit)
{
	if (nn_algo_eligible(l, l->chosen, mode, ws_limit))
		return l->chosen;
	for (int i = 0; i < l->n; i++)
		if (nn_algo_eligible(l, i, mode, ws_limit))
			return i;
	return -1;
}

const char *nn_algo_mode_name(int mode)
{
	switch (mode) {
	case NN_ALGO_BENCHMARK:
		return "benchmark";
	case NN_ALGO_HEURISTIC:
		return "heuristic";
	case NN_ALGO_DETERMINISTIC:
		return "deterministic";
	default:
		return NULL;
	}
}

int nn_algo_mode_parse(const char *name)
{
	for (int m = 0; name && nn_algo_mode_name(m); m++)
		if (!strcmp(name, nn_algo_mode_name(m)))
			return m;
	return -1;
}

/* Why candidate i is passed over, for the message; NULL if it is not. */
static const char *why_not(const nn_algo_list *l, int i, int mode,
			   size_t ws_limit)
{
	const nn_algo_cand *c = &l->c[i];
	if (!c->usable)
		return "not supported";
	if (l->failed & (1u << i))
		return "failed";
	if (c->workspace > ws_limit)
		return "workspace";
	if (mode == NN_ALGO_DETERMINISTIC && !c->deterministic)
		return "nondeterministic";
	return NULL;
}

/* "N ranked: algo 1 (failed), algo 6 (workspace)..." into buf */
static void describe(const nn_algo_list *l, int mode, size_t ws_limit,
		     char *buf, size_t len)
{
	size_t at = (size_t)snprintf(buf, len, "%d ranked", l->n);
	for (int i = 0; i < l->n && at < len; i++) {
		const char *why = why_not(l, i, mode, ws_limit);
		at += (size_t)snprintf(buf + at, len - at, "%s algo %d (%s)",
				       i ? "," : ":", l->c[i].algo,
				       why ? why : "eligible");
	}
}

int nn_algo_run(nn_algo_list *l, int mode, size_t ws_limit, nn_algo_try_fn fn,
		void *ud, const char *what, ims_error *err)
{
	if (l->n > NN_ALGO_MAX)
		l->n = NN_ALGO_MAX;
	for (;;) {
		int i = nn_algo_next(l, mode, ws_limit);
		if (i < 0)
			break;
		int rc = fn(ud, &l->c[i], err);
		if (rc < 0)
			return rc;
		if (rc == NN_ALGO_RAN) {
			l->chosen = i;
			return 0;
		}
		/* never again: a candidate that failed once is not retried
		 * every step */
		l->failed |= 1u << i;
		if (l->chosen == i)
			l->chosen = -1;
	}
	char list[320];
	describe(l, mode, ws_limit, list, sizeof(list));
	const char *m = nn_algo_mode_name(mode);
	return ims_fail(err, IMS_EUNSUPPORTED,
			"cannot %s: no %s algorithm ran within a %zu-byte "
			"workspace (%s)",
			what, m ? m : "?", ws_limit, list);
}

int nn_algo_cache_get(nn_algo_cache *c, const void *key, size_t key_len,
		      nn_algo_entry **out, int *added, ims_error *err)
{
	*out = NULL;
	*added = 0;
	RETURN_IF(key_len > NN_ALGO_KEY_MAX, err, IMS_EINVAL,
		  "cannot cache a convolution algorithm: a %zu-byte key",
		  key_len);
	for (int i = 0; i < c->n; i++)
		if (c->e[i].key_len == key_len &&
		    !memcmp(c->e[i].key, key, key_len)) {
			*out = &c->e[i];
			return 0;
		}
	if (c->n == c->cap) {
		int cap = c->cap ? 2 * c->cap : 32;
		void *p = realloc(c->e, (size_t)cap * sizeof(*c->e));
		RETURN_IF(!p, err, IMS_ENOMEM,
			  "cannot cache a convolution algorithm: out of memory");
		c->e = p;
		c->cap = cap;
	}
	nn_algo_entry *e = &c->e[c->n++];
	memset(e, 0, sizeof(*e));
	memcpy(e->key, key, key_len);
	e->key_len = key_len;
	for (int d = 0; d < NN_ALGO_DIRS; d++)
		nn_algo_list_init(&e->dir[d]);
	*out = e;
	*added = 1;
	return 0;
}

void nn_algo_cache_release(nn_algo_cache *c)
{
	if (!c)
		return;
	free(c->e);
	memset(c, 0, sizeof(*c));
}
