/*
 * imshard.c - the data-side command: dispatches to one cmd_<name> per
 * subcommand through a table (after git.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imshard.h"

/*
 * eval, predict and export use a trained network: they are imshard-model's
 * (tools/imshard_model.c), installed beside this program, which runs it
 * in its place. So `imshard info` or `imshard --help` loads no BLAS, MPI
 * or CUDA library, and under mpirun the ranks become imshard-model
 * processes (exec keeps the process and its environment).
 */
static int run_model_program(int argc, char **argv)
{
	char self[4096], path[4096 + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		cli_error("%s: cannot find this program's folder: %s", argv[0],
			  strerror(errno));
		return CLI_EXIT_FAIL;
	}
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (slash)
		slash[1] = '\0';
	snprintf(path, sizeof(path), "%s%s", slash ? self : "", "imshard-model");
	char **args = calloc((size_t)argc + 2, sizeof(char *));
	if (!args) {
		cli_error("%s: out of memory", argv[0]);
		return CLI_EXIT_FAIL;
	}
	args[0] = "imshard-model";
	for (int i = 0; i < argc; i++)
		args[i + 1] = argv[i];
	execv(path, args);
	cli_error("%s: cannot run '%s': %s (eval, predict and export are "
		  "imshard-model's, installed beside imshard)",
		  argv[0], path, strerror(errno));
	free(args);
	return CLI_EXIT_FAIL;
}

static const cli_subcommand commands[] = {
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
	{"eval", run_model_program, "evaluate a trained model on a split (top-1, top-5, per class, confusion)"},
	{"predict", run_model_program, "predict the classes of image files with a trained model"},
	{"export", run_model_program, "write a checkpoint's weights as safetensors for PyTorch"},
	{NULL, NULL, NULL}};

int main(int argc, char **argv)
{
	return cli_run_subcommand(
		argc, argv, commands, "usage: imshard <command> [options]",
		"Turns image datasets into sharded LMDB record files; evaluates\n"
		"and uses the networks imshard-train trains from them.",
		NULL);
}
