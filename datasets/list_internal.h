/*
 * list_internal.h - what list.c (the ds_list container) shares with
 * classes.c (class-name files). Not a public header.
 */
#ifndef IMSHARD_LIST_INTERNAL_H
#define IMSHARD_LIST_INTERNAL_H

#include "datasets.h"

/* Frees l's class names and leaves it with none. */
void ds_list_free_classes(ds_list *l);

#endif
