/*
 * checkpoint.h - checkpoints and weight loading over safetensors files
 * (train/safetensors.h), for the models of train/nn.h. A checkpoint holds,
 * in this order:
 *   - every tensor of the model under its torchvision state_dict name, in
 *     nn_model_tensor order: trained tensors and running statistics as F32
 *     with the tensor's shape, counters (num_batches_tracked) as I64
 *     scalars. PyTorch loads such a file with
 *     model.load_state_dict(safetensors.torch.load_file(path), strict=False)
 *     (strict=False, or drop the "optim." keys first);
 *   - when an optimiser is saved, each of its state buffers sliced per
 *     trained tensor as "optim.<state>.<tensor>" (F32, the tensor's shape;
 *     e.g. "optim.exp_avg.fc.weight") and "optim.step" (I64 scalar);
 *   - metadata "format": "imshard-checkpoint-1", the caller's entries and
 *     "checksum": "crc32c:XXXXXXXX", st_checksum of everything else in the
 *     file (every tensor's bytes, names, dtypes and shapes, and every
 *     other metadata entry), which loading verifies when it is there.
 *
 * Caveats:
 *   - The model and optimiser are used by one thread at a time; these
 *     functions read or write them, so no step may run meanwhile.
 *   - Loading checks every tensor it will use before writing any: on error
 *     the model (and optimiser) are exactly as they were.
 *   - Model and optimiser storage is read and written in place on the CPU
 *     backend (its device memory is host memory); on a device it is copied
 *     whole through host memory (nn_ctx_to_host / nn_ctx_to_device), so a
 *     checkpoint written on a GPU loads on the CPU and back.
 */
#ifndef IMSHARD_CHECKPOINT_H
#define IMSHARD_CHECKPOINT_H

#include "common/common.h"
#include "train/nn.h"
#include "train/optim.h"
#include "train/safetensors.h"

/*
 * Writes the model m and, when opt is not NULL, its optimiser (made for
 * nn_model_params' count) to path, atomically (st_writer_write: readers see
 * the old file or the whole new one). meta is NULL or a NULL-terminated
 * list of key, value, key, value, ... strings (UTF-8) stored as metadata;
 * the keys "format" and "checksum" are reserved. Nothing is kept after
 * the call.
 * Errors: IMS_EINVAL (optimiser size differs from the model's, a key
 * without a value, "format" or "checksum" in meta, invalid UTF-8, a model
 * of nn_model_create_unset whose weights were never loaded), IMS_EIO
 * (message names the file), IMS_ENOMEM.
 */
int nn_checkpoint_save(const char *path, nn_model *m, nn_optim *opt,
		       const char *const *meta, ims_error *err);

/*
 * What nn_checkpoint_load_init did, tensor names listed in model order
 * (unexpected: file order). Caller-owned; the strings and arrays are owned
 * by the report and freed by nn_load_report_release.
 */
typedef struct nn_load_report {
	int loaded;        /* model tensors taken from the file */
	char **missing;    /* model tensors absent from the file: kept as
			      they were (the model's initialisation) */
	int n_missing;
	char **unexpected; /* file tensors the model lacks ("optim.*" are
			      not listed) */
	int n_unexpected;
	char **reinit;     /* head tensors whose shape differs in the file
			      (another class count), or every head tensor
			      with NN_INIT_RESET_HEAD: kept as they were */
	int n_reinit;
	int head_reset;    /* NN_INIT_RESET_HEAD was given (a caller that
			      gave it for a reason of its own may say so
			      here: imshard-train sets 2 when the file was
			      trained on other class names) */
	int verified;      /* 1: the file's checksum was there and matched;
			      0: the file has none (not written by
			      nn_checkpoint_save: nothing to verify) */
	uint64_t file_bytes;  /* with NN_INIT_FILE_CRC, the file read: its */
	uint32_t file_crc32c; /* size, and the CRC-32C of all its bytes
				 (st_file_crc32c), so a caller can record
				 which file it started from; else 0 */
} nn_load_report;

/* nn_checkpoint_load_init's flags. */
#define NN_INIT_RESET_HEAD 1u /* keep the model's fresh head even where
				 the file's has the same shape (fine-tuning
				 for other classes of the same count) */
#define NN_INIT_FILE_CRC 4u   /* fill report->file_bytes and file_crc32c
				 (one more read of the whole file) */
#define NN_INIT_VERIFIED 8u   /* nn_checkpoint_load_init_file only: the
				 caller verified this open file already
				 (nn_checkpoint_verify), so its content is
				 not read for the checksum again;
				 report->verified says whether it has one */

/* Frees what r holds and zeroes it. r may be NULL; a zeroed report is
 * fine. */
void nn_load_report_release(nn_load_report *r);

/*
 * Initialises m from the weights in the safetensors file at path, for
 * fine-tuning (--init): a checkpoint of nn_checkpoint_save or torchvision
 * weights exported with safetensors.torch.save_file(model.state_dict()).
 * A file with a "checksum" entry is verified first (report->verified);
 * one without is taken as it is. Each model tensor is looked up by name
 * (with NN_INIT_RESET_HEAD in flags, head tensors are not loaded at all
 * and listed in report->reinit):
 *   - same shape: loaded. Floats from F32, F16, BF16 (exact) or F64
 *     (rounded); counters from any integer type, or from a float type
 *     when every value is a whole number;
 *   - other shape, tensor in the head (nn_tensor_info.head): left as it
 *     is, listed in report->reinit;
 *   - other shape elsewhere: IMS_EINVAL, "cannot load 'PATH': tensor
 *     'layer1.0.conv1.weight' has shape [64, 3, 3, 3] in the file, the
 *     model needs [64, 64, 3, 3]";
 *   - absent: left as it is, listed in report->missing.
 * Every float tensor loaded must hold finite values (as float32: an F64
 * beyond float's range is infinite), a running variance (a batch norm's
 * "*.running_var") finite values not below 0: a NaN or infinity makes
 * every loss NaN, and batch norm divides by the variance's square root.
 * A head tensor left as it is is not read. File tensors the model lacks
 * are listed in report->unexpected, except "optim.*" ones. The
 * optimiser's state is never read. report may be NULL; otherwise it is overwritten (release an
 * earlier one first), with NN_INIT_FILE_CRC in flags its file_bytes and
 * file_crc32c computed over the whole file, and, on error, left empty.
 * Errors: st_open's (IMS_ENOTFOUND, IMS_EIO, IMS_EFORMAT, IMS_ECORRUPT,
 * IMS_ELIMIT), IMS_ECORRUPT (content and checksum differ), IMS_EINVAL
 * (shape mismatch outside the head, a fractional float counter, a running
 * variance below 0 or not finite: "cannot load 'PATH': tensor
 * 'bn1.running_var' holds -0.5 at element 3 (as float32): ...", another
 * value that is not finite: "cannot load 'PATH': tensor 'fc.weight' holds
 * NaN at element 3 (as float32): ..."; the first one found is named),
 * IMS_EUNSUPPORTED (a float tensor stored as an integer or F8 type, a
 * counter stored as F8), IMS_ELIMIT (a U64 counter above INT64_MAX),
 * IMS_ENOMEM; m is then unchanged. Loading fewer tensors than the model
 * has is no error here: the caller decides (imshard-train refuses it
 * without --init-partial). A load of every model tensor makes a model of
 * nn_model_create_unset runnable (nn_model_set_loaded); one of fewer
 * leaves it refusing to run.
 */
int nn_checkpoint_load_init(const char *path, nn_model *m, unsigned flags,
			    nn_load_report *report, ims_error *err);

/*
 * As nn_checkpoint_load_init, from f, a file the caller opened (st_open)
 * and may have read already (its model card, its options): what is
 * loaded is what was read, even when the file at its path is replaced
 * meanwhile. With NN_INIT_VERIFIED in flags, f is taken as verified by
 * the caller (nn_checkpoint_verify of this same open file) and its
 * checksum is not computed again. Messages name st_path(f). f stays open,
 * the caller's.
 */
int nn_checkpoint_load_init_file(const st_file *f, nn_model *m, unsigned flags,
				 nn_load_report *report, ims_error *err);

/*
 * Verifies an open file against the checksum in its metadata, as the
 * loads do: *verified 1 when it has one and it matches, 0 when it has
 * none (a file written by another program). For a program that reads
 * the metadata (the model card) before the tensors: a damaged card is
 * then the damage it is, not a wrong class name. Errors: IMS_ECORRUPT
 * ("cannot load 'PATH': its content does not match its checksum ..."),
 * IMS_EIO.
 */
int nn_checkpoint_verify(const st_file *f, int *verified, ims_error *err);

/*
 * Restores m and, when opt is not NULL, opt exactly (bit for bit) from the
 * checkpoint at path, for --resume: parameters, running statistics,
 * counters, optimiser state and step count, so the next step gives the
 * same bits as an uninterrupted run. The file must hold every model tensor
 * with the model's shape and the checkpoint's dtype (F32, counters I64),
 * and with opt every "optim.<state>.<tensor>" of opt's states and the
 * model's trained tensors plus "optim.step"; it must hold nothing else
 * (other model tensors, or with opt other "optim." state: the file was
 * written for another model or optimiser kind; Adam and AdamW state have
 * the same names and are not told apart). With opt NULL the file's
 * optimiser tensors are ignored. Metadata "format", when present, must be
 * "imshard-checkpoint-1"; a "checksum", when present, must match the
 * content (a checkpoint without one, written before checkpoints had them,
 * is read as it is: the caller can tell by its metadata). A float value
 * that is not finite (a weight, running statistic, or with opt the
 * optimiser's state) and a running variance below 0 are refused as
 * nn_checkpoint_load_init refuses them ("cannot resume from 'PATH':
 * tensor 'optim.exp_avg.fc.weight' holds NaN at element 3 ...").
 * file_out may be NULL; otherwise on success *file_out receives the open
 * file, for st_metadata_get and the like; the caller st_closes it. On
 * error *file_out is NULL.
 * Errors: st_open's (IMS_ENOTFOUND, IMS_EIO, IMS_EFORMAT, IMS_ECORRUPT,
 * IMS_ELIMIT), IMS_EINVAL (message names the missing, misshapen, mistyped
 * or extra tensor, or the tensor holding a value refused above, its first
 * bad element and the value;
 * optimiser size differs from the model's),
 * IMS_ECORRUPT (content and checksum differ, negative step count), IMS_EUNSUPPORTED (another format
 * version), IMS_ENOMEM; m and opt are then unchanged. On success every
 * tensor was written: a model of nn_model_create_unset may run.
 */
int nn_checkpoint_load_resume(const char *path, nn_model *m, nn_optim *opt,
			      st_file **file_out, ims_error *err);

/*
 * As nn_checkpoint_load_resume, from f, a file the caller opened
 * (st_open) and may have read already (its position, its options): what
 * is restored is the file read, even when the checkpoint at its path is
 * replaced meanwhile (a run writing its next one). Messages name
 * st_path(f). f stays open, the caller's.
 */
int nn_checkpoint_load_resume_file(const st_file *f, nn_model *m, nn_optim *opt,
				   ims_error *err);
#endif
