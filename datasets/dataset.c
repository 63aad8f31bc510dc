/*
 * dataset.c - the ds_dataset helpers every adapter shares.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets.h"

void ds_convert_opts_init(ds_convert_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->val_ratio = -1;
}

void ds_dataset_release(ds_dataset *d)
{
	if (!d)
		return;
	for (int i = 0; i < d->n_splits; i++)
		ds_list_release(&d->splits[i].list);
	for (size_t i = 0; i < d->n_notes; i++)
		free(d->notes[i]);
	free(d->notes);
	memset(d, 0, sizeof(*d));
}

ds_split_list *ds_dataset_add_split(ds_dataset *d, const char *name)
{
	if (d->n_splits >= DS_MAX_SPLITS || strlen(name) >= sizeof(d->splits[0].name))
		return NULL;
	ds_split_list *s = &d->splits[d->n_splits++];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	ds_list_init(&s->list);
	return s;
}

int ds_dataset_note(ds_dataset *d, const char *fmt, ...)
{
	char *line;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return IMS_ENOMEM;
	char **notes = realloc(d->notes, (d->n_notes + 1) * sizeof(*notes));
	if (!notes) {
		free(line);
		return IMS_ENOMEM;
	}
	notes[d->n_notes++] = line;
	d->notes = notes;
	return 0;
}
