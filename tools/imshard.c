/*
 * imshard.c - the data-side command: dispatches to one cmd_<name> per
 * subcommand through a table (after git.c).
 */
#include <stdio.h>
#include <string.h>

#include "imshard.h"

struct subcommand {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct subcommand commands[] = {
	{"list", cmd_list, "list a folder of class subfolders as .lst files"},
	{"subset", cmd_subset, "take a class-balanced subset of a .lst file"},
	{"pack", cmd_pack, "pack the images of a .lst file into sharded records"},
	{"info", cmd_info, "describe a packed split (records, classes, shards)"},
	{"verify", cmd_verify, "check every record's checksum (and decoding)"},
	{"extract", cmd_extract, "write records back to image files"},
	{"convert", cmd_convert, "convert a downloaded dataset (ImageNet, CIFAR-10, ...) into splits"},
	{"bench-load", cmd_bench_load, "measure how fast a split loads into augmented batches"},
	{"sample", cmd_sample, "write the built-in sample image dataset"},
	{"report", cmd_report, "draw imshard-train runs as an HTML report (curves, balance, speedup)"},
	{NULL, NULL, NULL}};

static void usage(FILE *f)
{
	fprintf(f, "usage: imshard <command> [options]\n\n"
		   "Turns image datasets into sharded LMDB record files.\n\n"
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
	if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 ||
	    strcmp(name, "help") == 0) {
		usage(stdout);
		return CLI_EXIT_OK;
	}
	if (strcmp(name, "--version") == 0) {
		printf("imshard %s\n", IMS_VERSION_STRING);
		return CLI_EXIT_OK;
	}
	for (const struct subcommand *c = commands; c->name; c++)
		if (strcmp(c->name, name) == 0)
			return c->fn(argc - 1, argv + 1);
	cli_error("unknown command '%s' (see 'imshard --help')", name);
	return CLI_EXIT_USAGE;
}
