/*
 * cmd_export.c - `imshard export`: a checkpoint's weights and buffers
 * (no optimiser state) as a safetensors file under torchvision's names,
 * which PyTorch loads with strict=True; the model card goes along in its
 * metadata, so eval, predict and --init read the file as they read a
 * checkpoint.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "imshard_model.h"
#include "train/checkpoint.h"

static const cli_command command = {
	"export",
	"imshard export CHECKPOINT -o WEIGHTS.safetensors [options]",
	"Writes a checkpoint's model weights and buffers (batch-norm running\n"
	"statistics and counters; no optimiser state, no training position) as\n"
	"a safetensors file under torchvision's tensor names.",
	"PyTorch loads it into the same model built with the same class count:\n\n"
	"  import torch, torchvision, safetensors.torch\n"
	"  m = torchvision.models.resnet18(num_classes=10)\n"
	"  m.load_state_dict(safetensors.torch.load_file(\"w.safetensors\"), strict=True)\n\n"
	"(convnet7 is imshard's own: docs/TRAINING.md, \"Exporting to PyTorch\",\n"
	"gives its PyTorch definition.) Floats are F32, num_batches_tracked I64\n"
	"scalars, as model.state_dict() holds them. The metadata keeps the model\n"
	"card (model, classes and names, input size, mean/std, validation crop),\n"
	"so 'imshard eval' and 'imshard predict' take the file as they take the\n"
	"checkpoint, and --init loads it. Every tensor of the model is checked to\n"
	"be in the checkpoint with its shape before anything is written; the\n"
	"file is written atomically (a temporary renamed over it).\n\n"
	"The model and class count come from the checkpoint (--model and\n"
	"--classes for weights that lack them); --size, --mean, --std and\n"
	"--val-crop-frac change what is recorded.\n\n"
	"Exit status: 0 written, 1 a missing or damaged checkpoint, a write\n"
	"failure, or an -o that exists without --force, 2 bad usage (also: -o\n"
	"is a folder, a device, FIFO or socket, or is the checkpoint)."};

int cmd_export(int argc, char **argv)
{
	model_flags mf = {0};
	const char *out = NULL;
	int force = 0;
	const cli_opt opts[] = {
		{"output", 'o', CLI_STRING, &out, "FILE", "the safetensors file to write (required)", 0, 0},
		{"force", 'f', CLI_FLAG, &force, NULL, "replace FILE when it exists", 0, 0},
		MODEL_CARD_OPTIONS(&mf),
		{"quiet", 'q', CLI_FLAG, &mf.quiet, NULL, "no notes on stderr", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	int rc = model_one_process(&command, "write the whole file again");
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
	const char *pos[1];
	int np = 0;
	rc = cli_parse(&command, opts, argc, argv, pos, 1, 1, &np);
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
	if (!out)
		return cli_usage_error(&command, "-o WEIGHTS.safetensors is required");
	if (ims_same_file(pos[0], out))
		return cli_usage_error(&command,
				       "-o '%s' is the checkpoint itself: write the "
				       "export elsewhere",
				       out);
	struct stat st;
	/* a folder cannot be replaced by a file: refused before the
	 * weights are written out for nothing */
	if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
		return cli_usage_error(&command, "-o '%s' is a folder: name the file to "
				       "write, e.g. '%s/weights.safetensors'",
				       out, out);
	/* The weights are written beside -o and renamed over it: over a
	 * device, FIFO or socket (or a link to one: /dev/stdout) that would
	 * replace the special file itself, as root /dev/null included, with
	 * a regular file, --force or not. */
	if (stat(out, &st) == 0 && !S_ISREG(st.st_mode))
		return cli_usage_error(&command, "-o '%s' is not a regular file (a "
				       "device, FIFO or socket): name a file to "
				       "write",
				       out);
	/* as pack, convert and sample treat an output that is there: a
	 * failure (1), not a mistake in the command line */
	if (!force && lstat(out, &st) == 0) {
		cli_error("export: '%s' exists (--force replaces it)", out);
		return CLI_EXIT_FAIL;
	}
	/* read once: the card and the weights are this one file's */
	st_file *wf = NULL;
	rc = model_weights_open("export", pos[0], &wf);
	if (rc)
		return rc;
	nn_model_card card;
	rc = model_card_resolve("export", wf, &mf, NN_CARD_MODEL | NN_CARD_CLASSES,
				&card);
	if (rc) {
		st_close(wf);
		return rc;
	}
	if (!(card.have & NN_CARD_NAMES))
		cli_info(mf.quiet,
			 "export: '%s' records no class names, nor will '%s' "
			 "(--classes FILE adds them)",
			 pos[0], out);
	ims_error err;
	nn_ctx ctx;
	nn_model *m = NULL;
	nn_model_card_text text;
	memset(&text, 0, sizeof(text));
	int ctx_ok = 0;
	/* the weights do not depend on the input size: any the model takes */
	const int size = (card.have & NN_CARD_SIZE) ? card.size : 224;
	rc = nn_ctx_init_cpu(&ctx, 1, &err);
	ctx_ok = rc == 0;
	/* no weights drawn: every tensor is loaded below, or the load fails */
	if (!rc)
		rc = nn_model_create_unset(&ctx, card.model, card.classes, size, size, 1,
					   &m, &err);
	if (!rc)
		rc = nn_model_set_use(m, NN_USE_EVAL, &err);
	if (!rc)
		rc = nn_model_load_weights_file(wf, m, 1, &err); /* verified when opened */
	st_close(wf);
	if (!rc)
		rc = nn_model_card_format(&card, &text, &err);
	/* safetensors metadata is JSON, so UTF-8: a checkpoint whose name
	 * is not (a Latin-1 file name) was refused after its weights were
	 * read. exported_from is a note for people; it records the name as
	 * messages print it, \xHH for such bytes. */
	size_t from_len = 4 * strlen(pos[0]) + 4;
	char *from = malloc(from_len);
	if (!rc && !from)
		rc = ims_fail(&err, IMS_ENOMEM, "out of memory");
	if (!rc) {
		const char *meta[2 * 8 + 3];
		size_t n = 0;
		for (; text.kv[n]; n++)
			meta[n] = text.kv[n];
		meta[n++] = "exported_from";
		meta[n++] = ims_escape(pos[0], from, from_len);
		meta[n] = NULL;
		rc = nn_checkpoint_save(out, m, NULL, meta, &err);
	}
	free(from);
	if (rc < 0)
		cli_error("export: %s", err.msg);
	else
		cli_info(mf.quiet, "export: wrote %d %s of %s to '%s'",
			 nn_model_tensor_count(m),
			 ims_plural((uint64_t)nn_model_tensor_count(m), "tensor", "tensors"),
			 card.model, out);
	nn_model_card_text_release(&text);
	nn_model_free(m);
	if (ctx_ok)
		nn_ctx_release(&ctx);
	nn_model_card_release(&card);
	return rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
