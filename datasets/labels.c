/*
 * labels.c - how large a class id a list may hold.
 *
 * Labels come from the data (a list a user wrote, im2rec's float column),
 * but everything downstream sizes itself by them: the manifest lists a
 * class for every label up to the largest, its class counts, the
 * trainer's last layer. One stray label (99999999) once made a pack grow
 * to 24 GB before the kernel killed it. So a list's labels are bounded by
 * what the user declared (class names, --max-label) or, failing that, by
 * the labels the list itself uses: the number of distinct labels is
 * counted with a hash set, which costs memory per row, never per possible
 * label.
 */
#define _GNU_SOURCE
#include "datasets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Open addressing over label + 1 (0 marks an empty slot). */
typedef struct label_set {
	uint32_t *slot;
	size_t cap, n; /* cap is a power of two */
} label_set;

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

static int set_grow(label_set *s)
{
	size_t cap = s->cap ? s->cap * 2 : 256;
	uint32_t *slot = calloc(cap, sizeof(uint32_t));
	if (!slot)
		return -1;
	for (size_t i = 0; i < s->cap; i++) {
		uint32_t k = s->slot[i];
		if (!k)
			continue;
		size_t j = mix(k) & (cap - 1);
		while (slot[j])
			j = (j + 1) & (cap - 1);
		slot[j] = k;
	}
	free(s->slot);
	s->slot = slot;
	s->cap = cap;
	return 0;
}

static int set_add(label_set *s, int32_t label)
{
	if (2 * (s->n + 1) > s->cap && set_grow(s) < 0)
		return -1;
	uint32_t k = (uint32_t)label + 1;
	size_t j = mix(k) & (s->cap - 1);
	while (s->slot[j]) {
		if (s->slot[j] == k)
			return 0;
		j = (j + 1) & (s->cap - 1);
	}
	s->slot[j] = k;
	s->n++;
	return 0;
}

int ds_list_distinct_labels(const ds_list *l, size_t *distinct, ims_error *err)
{
	label_set s = {0};
	for (size_t i = 0; i < l->count; i++) {
		if (l->items[i].label < 0)
			continue;
		if (set_add(&s, l->items[i].label) < 0) {
			free(s.slot);
			return ims_fail(err, IMS_ENOMEM,
					"cannot count the labels of a list of %zu rows: out of memory",
					l->count);
		}
	}
	*distinct = s.n;
	free(s.slot);
	return 0;
}

int ds_label_limit(const ds_list *l, int64_t max_label, ds_label_bound *b,
		   ims_error *err)
{
	memset(b, 0, sizeof(*b));
	RETURN_IF(max_label < DS_LABEL_ANY || max_label > DS_LABEL_CEILING, err,
		  IMS_EINVAL, "a largest label of %lld is not in 0..%d",
		  (long long)max_label, DS_LABEL_CEILING);
	b->n_classes = l->n_classes;
	if (max_label == DS_LABEL_ANY) {
		b->limit = INT32_MAX;
		b->why = DS_BOUND_ANY;
	} else if (max_label >= 0) {
		b->limit = max_label;
		b->why = DS_BOUND_MAX_LABEL;
	} else if (l->n_classes > 0) {
		b->limit = (int64_t)l->n_classes - 1;
		b->why = DS_BOUND_CLASSES;
	} else {
		FORWARD_IF_ERR(ds_list_distinct_labels(l, &b->distinct, err));
		uint64_t spread = (uint64_t)b->distinct * DS_LABEL_SPREAD;
		b->limit = (int64_t)(spread > DS_LABEL_FREE ? spread : DS_LABEL_FREE) - 1;
		b->why = DS_BOUND_SPREAD;
	}
	if (b->why != DS_BOUND_ANY && b->limit > DS_LABEL_CEILING) {
		b->limit = DS_LABEL_CEILING;
		if (b->why != DS_BOUND_MAX_LABEL)
			b->why = DS_BOUND_CEILING;
	}
	return 0;
}

int ds_label_refuse(const ds_label_bound *b, int32_t label, ims_error *err)
{
	switch (b->why) {
	case DS_BOUND_MAX_LABEL:
		return ims_fail(err, IMS_EINVAL, "label %d is above --max-label %lld",
				(int)label, (long long)b->limit);
	case DS_BOUND_CLASSES:
		return ims_fail(err, IMS_EINVAL,
				"label %d has no class name: the class names give %zu "
				"(labels 0 to %zu); give the classes file that goes with "
				"the list (--classes FILE), or --max-label N for labels "
				"past the names",
				(int)label, b->n_classes, b->n_classes - 1);
	case DS_BOUND_SPREAD:
		return ims_fail(err, IMS_EINVAL,
				"label %d is far beyond the %zu distinct label%s of the "
				"list (without class names, labels stay below %lld); for "
				"a sparse label space give --max-label N or --classes FILE "
				"naming every class",
				(int)label, b->distinct, b->distinct == 1 ? "" : "s",
				(long long)b->limit + 1);
	case DS_BOUND_CEILING:
	case DS_BOUND_ANY:
		break;
	}
	return ims_fail(err, IMS_EINVAL,
			"label %d is above %d, the largest class id imshard accepts "
			"(a manifest names every class up to the largest label)",
			(int)label, DS_LABEL_CEILING);
}

int ds_list_check_labels(const ds_list *l, size_t first, int64_t max_label,
			 size_t *bad_row, ims_error *err)
{
	ds_label_bound b;
	FORWARD_IF_ERR(ds_label_limit(l, max_label, &b, err));
	for (size_t i = first; i < l->count; i++) {
		int32_t label = l->items[i].label;
		if (label >= 0 && label <= b.limit)
			continue;
		if (bad_row)
			*bad_row = i;
		if (label < 0)
			return ims_fail(err, IMS_EINVAL, "label %d is negative",
					(int)label);
		return ds_label_refuse(&b, label, err);
	}
	return 0;
}
