/*
 * imshard_model.c - `imshard-model`: the commands that use a trained
 * network (eval, predict, export). `imshard eval ...` runs this program
 * (imshard.c), so users type imshard; it links the training libraries,
 * which the data-side commands never load.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "imshard_model.h"
#include "train/nn.h"

static const cli_subcommand commands[] = {
	{"eval", cmd_eval, "top-1, top-5, loss, per class and the confusion matrix on a split"},
	{"predict", cmd_predict, "class names and probabilities for image files"},
	{"export", cmd_export, "a checkpoint's weights as safetensors for PyTorch"},
	{NULL, NULL, NULL}};

static void before_command(char **argv)
{
	/* OpenBLAS's kernels and threads, chosen when it loads: a restart
	 * with better ones, once (nn.h) */
	if (nn_blas_restart_env())
		execv("/proc/self/exe", argv); /* failed: go on as we are */
	/* a weights file truncated while mapped is named, not a silent
	 * SIGBUS */
	ims_mapguard_install("imshard");
}

int main(int argc, char **argv)
{
	return cli_run_subcommand(
		argc, argv, commands,
		"usage: imshard <command> [options]   (or imshard-model <command>)",
		"Uses a network trained by imshard-train.", before_command);
}
