/*
 * imshard_model.c - `imshard-model`: the commands that use a trained
 * network (eval, predict, export). `imshard eval ...` runs this program
 * (imshard.c), so users type imshard; it links the training libraries,
 * which the data-side commands never load.
 */
#include <stdio.h>
#include <string.h>

#include "imshard_model.h"

struct subcommand {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct subcommand commands[] = {
	{"eval", cmd_eval, "top-1, top-5, loss, per class and the confusion matrix on a split"},
	{"predict", cmd_predict, "class names and probabilities for image files"},
	{"export", cmd_export, "a checkpoint's weights as safetensors for PyTorch"},
	{NULL, NULL, NULL}};

static void usage(FILE *f)
{
	fprintf(f, "usage: imshard <command> [options]   (or imshard-model <command>)\n\n"
		   "Uses a network trained by imshard-train.\n\n"
		   "commands:\n");
	for (const struct subcommand *c = commands; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->help);
	fprintf(f, "\n'imshard <command> --help' describes a command's options.\n"
		   "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	const char *name = argv[1];
	if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
		usage(stdout);
		return CLI_EXIT_OK;
	}
	if (!strcmp(name, "--version")) {
		printf("imshard %s\n", IMS_VERSION_STRING);
		return CLI_EXIT_OK;
	}
	for (const struct subcommand *c = commands; c->name; c++) {
		if (strcmp(c->name, name))
			continue;
		cli_pick_blas_kernels(argv);
		/* a weights file truncated while mapped is named, not a
		 * silent SIGBUS */
		ims_mapguard_install("imshard");
		return c->fn(argc - 1, argv + 1);
	}
	cli_error("unknown command '%s' (see 'imshard --help')", name);
	return CLI_EXIT_USAGE;
}
