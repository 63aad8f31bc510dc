/*
 * adapter.c - the table of dataset adapters (one per file ds_<name>.c).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets.h"

static const ds_adapter *const table[] = {
	&ds_adapter_folder,   &ds_adapter_caltech256, &ds_adapter_fruits,
	&ds_adapter_inat2017, &ds_adapter_cifar10,    &ds_adapter_imagenet,
	NULL};

const ds_adapter *const *ds_adapters(void)
{
	return table;
}

const ds_adapter *ds_adapter_find(const char *name)
{
	for (const ds_adapter *const *a = table; *a; a++)
		if (strcmp((*a)->name, name) == 0)
			return *a;
	return NULL;
}
