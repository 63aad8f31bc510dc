/*
 * train_print.h - what imshard-train prints of a run: the loop
 * (train/train.h) reports events through callbacks and these turn them
 * into lines on stderr, "imshard-train: ..." each, and --profile's table
 * on stdout.
 *
 * Rank 0 prints the run's lines (every rank gets the same events); a
 * rank note is its own rank's; --quiet prints neither. Warnings and
 * damaged records are printed under --quiet too: no run may remove,
 * replace or doubt something without a word.
 */
#ifndef IMSHARD_TRAIN_PRINT_H
#define IMSHARD_TRAIN_PRINT_H

#include "train/train.h"

/* The callbacks' context: the run's options and this process's rank.
 * Owned by the caller and alive while the events table is in use. */
typedef struct train_printer {
	const nn_train_opts *o;
	int rank;
} train_printer;

/* Fills *ev with the printing callbacks, ev->ctx = p; the rest zero. */
void train_print_events(train_printer *p, nn_train_events *ev);

/* One line on stderr: "imshard-train: " and the message, escaped whole
 * (paths, tensor and class names come from outside, and a control byte
 * in one must not reach the terminal). */
void train_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --profile's table on stdout: milliseconds per step and each piece's
 * share of the timed steps' compute. */
void train_print_profile(const nn_train_profile *p);

#endif
