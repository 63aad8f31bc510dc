/*
 * pack.c - the packing pipeline: list rows -> checked/re-encoded payloads
 * -> shard writer, in list order, in parallel.
 *
 * A window of slots, a few per thread, holds rows in flight. Threads claim
 * the next row with an atomic counter (never more than the window ahead of
 * the writer), process it into its slot and mark the slot ready; whichever
 * thread gets the writer lock appends ready slots to the shard writer in
 * row order. So the writer sees rows strictly in list order, the output
 * does not depend on the thread count, the serial LMDB work overlaps the
 * parallel decode/encode work, and no thread waits at a barrier behind a
 * large image. Memory is the window of payloads plus per-thread scratch,
 * whatever the list length.
 */
#define _GNU_SOURCE
#include "pack.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "augment/augment.h"
#include "pack_internal.h"
#include "recordio/recordio.h"

/* Source files above this size are refused as absurd for one image. */
#define PACK_MAX_FILE_BYTES (1ull << 30)
/* Buffers grown past this by an unusually large image are freed after
 * use, so one panorama does not pin its size in every slot for the rest
 * of the run: memory stays bounded by typical images. */
#define PACK_KEEP_CAPACITY (16u << 20)

const char *pack_encoding_name(pack_encoding e)
{
	switch (e) {
	case PACK_KEEP: return "keep";
	case PACK_JPEG: return "jpeg";
	case PACK_PNG: return "png";
	case PACK_RAW: return "raw";
	}
	return "unknown";
}

int pack_encoding_parse(const char *s)
{
	for (int e = PACK_KEEP; e <= PACK_RAW; e++)
		if (strcmp(s, pack_encoding_name((pack_encoding)e)) == 0)
			return e;
	return -1;
}

void pack_opts_init(pack_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->max_errors = -1;
	o->max_label = DS_LABEL_AUTO;
}

/* One row's outcome, filled by a worker, consumed by the writer thread. */
typedef struct slot {
	int status;              /* 0 packed, < 0 skipped */
	char why[IMS_ERRMSG_MAX];
	rio_record rec;          /* payload points into buf */
	ims_buf buf;
	uint64_t bytes_in;
} slot;

typedef struct worker {
	aug_codec *codec;
	aug_image decoded, resized, cropped;
	ims_buf file;
} worker;

typedef struct job {
	const ds_list *list;
	const pack_opts *o;
	int quality;
	aug_fit fit;
	int geometry; /* any of resize/max_size/center_crop */
} job;

/* Reads a whole file into b, reusing its memory. */
static int read_into(const char *path, ims_buf *b, ims_error *err)
{
	/* A FIFO or a device among the images is skipped, never waited on. */
	int fd;
	struct stat st;
	int rc = ims_open_read(path, &fd, &st, NULL);
	RETURN_IF(rc == IMS_EFORMAT, err, rc, "not a regular file (%s)",
		  ims_file_kind(st.st_mode));
	RETURN_IF(rc < 0, err, rc, "cannot open: %s", strerror(errno));
	if ((uint64_t)st.st_size > PACK_MAX_FILE_BYTES)
		GOTO_FAIL(out, rc, err, IMS_ELIMIT, "file of %lld bytes is too large for one image",
			  (long long)st.st_size);
	size_t size = (size_t)st.st_size;
	b->len = 0;
	if (ims_buf_grow(b, size, NULL) < 0)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "out of memory");
	size_t got = 0;
	while (got < size) {
		ssize_t n = read(fd, b->data + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot read: %s", strerror(errno));
		if (n == 0)
			break;
		got += (size_t)n;
	}
	b->len = got;
out:
	close(fd);
	return rc;
}

static int pack_keep(const job *j, worker *w, slot *s, ims_error *err)
{
	aug_image_info info;
	if (j->o->check_decode) {
		aug_decode_opts d = {AUG_CHANNELS_NATIVE, 0, 0, 0};
		FORWARD_IF_ERR(aug_decode(w->codec, s->buf.data, s->buf.len, &d,
					  &w->decoded, &info, err));
	} else {
		FORWARD_IF_ERR(aug_probe(w->codec, s->buf.data, s->buf.len, &info, err));
	}
	RETURN_IF(s->buf.len > UINT32_MAX, err, IMS_ELIMIT, "file too large");
	rio_record *r = &s->rec;
	r->encoding = info.format == AUG_FORMAT_PNG ? RIO_ENC_PNG : RIO_ENC_JPEG;
	r->flags = RIO_FLAG_ORIGINAL;
	r->channels = (uint8_t)info.channels;
	r->orientation = (uint8_t)info.orientation;
	r->width = (uint32_t)info.width;
	r->height = (uint32_t)info.height;
	r->orig_width = (uint32_t)info.upright_width;
	r->orig_height = (uint32_t)info.upright_height;
	return 0;
}

/* Resizes, crops and encodes (or stores raw) an upright image into the
 * slot; up_w x up_h is the source's upright size, kept in the record. */
static int finish_image(const job *j, worker *w, slot *s, const aug_image *src,
			int up_w, int up_h, ims_error *err)
{
	const pack_opts *o = j->o;
	const aug_image *img = src;
	int sw = src->width, sh = src->height, ow = sw, oh = sh;
	if (j->geometry)
		aug_fit_size(&j->fit, up_w, up_h, &sw, &sh, &ow, &oh);
	if (img->width != sw || img->height != sh) {
		FORWARD_IF_ERR(aug_resize(w->codec, img, sw, sh, &w->resized, err));
		img = &w->resized;
	}
	if (ow != img->width || oh != img->height) {
		FORWARD_IF_ERR(aug_crop_center(img, ow, oh, &w->cropped, err));
		img = &w->cropped;
	}
	rio_record *r = &s->rec;
	switch (o->encoding) {
	case PACK_JPEG:
		FORWARD_IF_ERR(aug_encode_jpeg(w->codec, img, j->quality, &s->buf, err));
		r->encoding = RIO_ENC_JPEG;
		break;
	case PACK_PNG:
		FORWARD_IF_ERR(aug_encode_png(w->codec, img, &s->buf, err));
		r->encoding = RIO_ENC_PNG;
		break;
	default: {
		size_t row = (size_t)img->width * (size_t)img->channels;
		size_t total = row * (size_t)img->height;
		RETURN_IF(total > UINT32_MAX, err, IMS_ELIMIT,
			  "raw image of %zu bytes is too large for one record", total);
		RETURN_IF(ims_buf_reserve(&s->buf, total, NULL) < 0, err,
			  IMS_ENOMEM, "out of memory");
		for (int y = 0; y < img->height; y++)
			memcpy(s->buf.data + (size_t)y * row,
			       img->pixels + (size_t)y * img->stride, row);
		s->buf.len = total;
		r->encoding = RIO_ENC_RAW;
		break;
	}
	}
	RETURN_IF(s->buf.len > UINT32_MAX, err, IMS_ELIMIT, "encoded image too large");
	/* Pixels stored exactly as the source held them are the original. */
	r->flags = (o->encoding == PACK_KEEP && img == src) ? RIO_FLAG_ORIGINAL : 0;
	r->channels = (uint8_t)img->channels;
	r->orientation = 1;
	r->width = (uint32_t)img->width;
	r->height = (uint32_t)img->height;
	r->orig_width = (uint32_t)up_w;
	r->orig_height = (uint32_t)up_h;
	return 0;
}

static int pack_recode(const job *j, worker *w, slot *s, ims_error *err)
{
	const pack_opts *o = j->o;
	aug_image_info info;
	FORWARD_IF_ERR(aug_probe(w->codec, w->file.data, w->file.len, &info, err));
	aug_decode_opts d;
	memset(&d, 0, sizeof(d));
	/* JPEG cannot hold alpha: flatten it on white; keep grey as grey. */
	d.channels = (o->encoding == PACK_JPEG && info.channels == 4) ?
			     AUG_CHANNELS_RGB : AUG_CHANNELS_NATIVE;
	d.apply_orientation = 1;
	if (j->geometry) {
		int sw, sh, ow, oh;
		aug_fit_size(&j->fit, info.upright_width, info.upright_height, &sw,
			     &sh, &ow, &oh);
		d.min_width = sw;
		d.min_height = sh;
	}
	FORWARD_IF_ERR(aug_decode(w->codec, w->file.data, w->file.len, &d,
				  &w->decoded, NULL, err));
	return finish_image(j, w, s, &w->decoded, info.upright_width,
			    info.upright_height, err);
}

/* A record-row (read_row): raw pixels from the dataset's own files. */
static int pack_row_pixels(const job *j, worker *w, slot *s, const ds_entry *e,
			   ims_error *err)
{
	ds_pixels px;
	memset(&px, 0, sizeof(px));
	FORWARD_IF_ERR(j->o->read_row(j->o->root, e, &w->file.data, &w->file.cap,
				      &px, err));
	RETURN_IF(px.width <= 0 || px.height <= 0 ||
			  (px.channels != 1 && px.channels != 3 && px.channels != 4),
		  err, IMS_ECORRUPT, "row reader gave a %dx%dx%d image", px.width,
		  px.height, px.channels);
	w->file.len = (size_t)px.width * px.height * px.channels;
	s->bytes_in = w->file.len;
	aug_image view = {w->file.data, px.width, px.height, px.channels,
			  (size_t)px.width * px.channels, w->file.cap};
	return finish_image(j, w, s, &view, px.width, px.height, err);
}

static void trim(worker *w)
{
	if (w->decoded.capacity > PACK_KEEP_CAPACITY)
		aug_image_release(&w->decoded);
	if (w->resized.capacity > PACK_KEEP_CAPACITY)
		aug_image_release(&w->resized);
	if (w->cropped.capacity > PACK_KEEP_CAPACITY)
		aug_image_release(&w->cropped);
	if (w->file.cap > PACK_KEEP_CAPACITY)
		ims_buf_release(&w->file);
}

static void process(const job *j, worker *w, uint64_t row, slot *s)
{
	const ds_entry *e = &j->list->items[row];
	ims_error err;
	ims_error_clear(&err);
	memset(&s->rec, 0, sizeof(s->rec));
	s->bytes_in = 0;
	s->why[0] = '\0';
	char path[8192];
	int rc = 0;
	if (j->o->read_row)
		rc = pack_row_pixels(j, w, s, e, &err);
	else
		rc = ims_path_join(path, sizeof(path), j->o->root, e->path, &err);
	if (rc == 0 && !j->o->read_row) {
		ims_buf *in = j->o->encoding == PACK_KEEP ? &s->buf : &w->file;
		rc = read_into(path, in, &err);
		if (rc == IMS_ENOTFOUND) /* " cat/1.jpg": say why it is missing */
			ds_path_space_hint(j->o->root, e->path, err.msg + strlen(err.msg),
					   sizeof(err.msg) - strlen(err.msg));
		if (rc == 0 && in->len == 0)
			rc = ims_fail(&err, IMS_EFORMAT, "empty file");
		if (rc == 0) {
			s->bytes_in = in->len;
			rc = j->o->encoding == PACK_KEEP ? pack_keep(j, w, s, &err) :
							   pack_recode(j, w, s, &err);
		}
	}
	trim(w);
	if (rc < 0) {
		s->status = rc;
		snprintf(s->why, sizeof(s->why), "%s", err.msg[0] ? err.msg : ims_strerror(rc));
		return;
	}
	rio_record *r = &s->rec;
	r->label = e->label;
	r->n_extra = (uint16_t)e->n_extra;
	for (int k = 0; k < e->n_extra && k < RIO_MAX_EXTRA_LABELS; k++)
		r->extra[k] = e->extra[k];
	r->payload = s->buf.data;
	r->payload_len = (uint32_t)s->buf.len;
	r->payload_crc = ims_crc32c(0, s->buf.data, s->buf.len);
	s->status = 0;
}

/* Writer-side state, touched only by the thread running the single
 * section. */
typedef struct sink {
	rio_writer *w;
	FILE *errors;
	char errors_path[4096], errors_tmp[4200];
	/* A split of this name existed when the writer opened (--force): a
	 * failed run leaves it whole, its errors file included. */
	int replacing;
	int discard; /* opts->discard_errors */
	char manifest[4200];
	char first_skip[600]; /* "'path': why" of the first skipped file */
	int cur_shard;
	/* With opts->shards: ranges of rows that gave a shard (at least one
	 * record), and the last of them. */
	int filled, last_filled;
	uint64_t done, packed, skipped, bytes_in, bytes_out;
} sink;

static void tsv_field(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

static int note_skip(const job *j, sink *k, uint64_t row, const slot *s,
		     ims_error *err)
{
	const ds_entry *e = &j->list->items[row];
	if (!k->errors) {
		/* its temporary, never through a link planted at that name */
		int fd;
		FORWARD_IF_ERR(ims_temp_create(k->errors_path, k->errors_tmp,
					       sizeof(k->errors_tmp), &fd, err));
		k->errors = fdopen(fd, "w");
		if (!k->errors) {
			const int why = errno; /* fdopen's: the discard resets it */
			ims_temp_discard(fd, k->errors_tmp);
			return ims_fail(err, IMS_EIO, "cannot write '%s': %s",
					k->errors_path, strerror(why));
		}
		fputs("row\tindex\tpath\treason\n", k->errors);
	}
	fprintf(k->errors, "%llu\t%llu\t", (unsigned long long)row,
		(unsigned long long)e->index);
	tsv_field(k->errors, e->path);
	fputc('\t', k->errors);
	tsv_field(k->errors, s->why);
	fputc('\n', k->errors);
	if (k->skipped == 0) {
		char ep[300];
		snprintf(k->first_skip, sizeof(k->first_skip), "'%s': %s",
			 ims_escape(e->path, ep, sizeof(ep)), s->why);
	}
	k->skipped++;
	if (j->o->skipped)
		j->o->skipped(j->o->ctx, row, e->path, s->why);
	return 0;
}

/* Where a failed run's skipped files are named: its errors file, or, when
 * the split it would have replaced is kept (with that split's own errors
 * file), only here, by the first of them. */
static const char *skips_named(const sink *k, char *buf, size_t len)
{
	if (k->replacing)
		snprintf(buf, len, "the first: %s; '%s' is kept as it was, with its errors file",
			 k->first_skip, k->manifest);
	else if (k->discard)
		snprintf(buf, len, "the first: %s", k->first_skip);
	else
		snprintf(buf, len, "see '%s'", k->errors_path);
	return buf;
}

/*
 * A failed run's errors file: where no split of this name exists, it is
 * published, so that the skipped files stay named (nothing else of the
 * run is left); where one does, that split keeps its own and ours goes;
 * with opts->discard_errors it goes in any case.
 * Decided under the split's lock: the writer's while it is open, else
 * taken again (held elsewhere: another run owns the name now, ours goes).
 */
static void settle_errors(sink *k, const pack_opts *o)
{
	if (!k->errors_tmp[0] || access(k->errors_tmp, F_OK) != 0)
		return;
	rio_lock *l = NULL;
	if (!k->w && rio_lock_take(o->out_dir, o->name, &l, NULL) < 0) {
		unlink(k->errors_tmp);
		return;
	}
	if (o->discard_errors || access(k->manifest, F_OK) == 0 ||
	    rename(k->errors_tmp, k->errors_path) != 0)
		unlink(k->errors_tmp);
	rio_lock_release(l);
}

/* Appends one processed row to the writer (or records its skip). */
static int drain_one(const job *j, sink *k, slot *s, uint64_t row,
		     ims_error *err)
{
	const pack_opts *o = j->o;
	uint64_t n = j->list->count;
	if (o->shards > 0) {
		int target = (int)(row * (uint64_t)o->shards / n);
		if (target != k->cur_shard) {
			FORWARD_IF_ERR(rio_writer_new_shard(k->w, err));
			k->cur_shard = target;
		}
	}
	k->bytes_in += s->bytes_in;
	if (s->status == 0) {
		int rc = rio_writer_add(k->w, &s->rec, err);
		/* a failed write (a full disk) is the shard's, named */
		if (rc == IMS_EIO)
			return rc;
		if (rc < 0)
			return ims_fail_context(err, "cannot pack '%s'",
						j->list->items[row].path);
		k->packed++;
		k->bytes_out += s->rec.payload_len;
		if (k->cur_shard != k->last_filled) {
			k->filled++;
			k->last_filled = k->cur_shard;
		}
	} else if (s->status == IMS_ENOMEM) { /* no fault of the file: not skipped */
		return ims_fail(err, IMS_ENOMEM, "cannot pack '%s': %s", /* says memory */
				j->list->items[row].path, s->why);
	} else {
		FORWARD_IF_ERR(note_skip(j, k, row, s, err));
		char where[9000];
		RETURN_IF(o->max_errors >= 0 && k->skipped > (uint64_t)o->max_errors,
			  err, IMS_ELIMIT,
			  "stopped after %llu skipped %s (--max-errors %lld); %s",
			  (unsigned long long)k->skipped,
			  ims_plural(k->skipped, "file", "files"), (long long)o->max_errors,
			  skips_named(k, where, sizeof(where)));
	}
	if (s->buf.cap > PACK_KEEP_CAPACITY)
		ims_buf_release(&s->buf);
	k->done++;
	if (o->progress && ((k->done & 15) == 0 || k->done == n))
		o->progress(o->ctx, k->done, n);
	return 0;
}

static char *options_json(const job *j)
{
	const pack_opts *o = j->o;
	ims_json_watch(); /* the manifest's options, whole or none */
	cJSON *r = cJSON_CreateObject();
	if (!r)
		return NULL;
	/* Informative paths: bytes that are not UTF-8 are written as \xHH so
	 * that the manifest stays UTF-8 JSON. */
	char e[8192];
	if (o->source)
		cJSON_AddStringToObject(r, "list", ims_utf8_valid(o->source, NULL) ? o->source :
						   ims_escape(o->source, e, sizeof(e)));
	cJSON_AddStringToObject(r, "root", !o->root ? "" :
					   ims_utf8_valid(o->root, NULL) ? o->root :
					   ims_escape(o->root, e, sizeof(e)));
	cJSON_AddStringToObject(r, "encoding", pack_encoding_name(o->encoding));
	cJSON_AddNumberToObject(r, "resize", o->resize);
	cJSON_AddNumberToObject(r, "max_size", o->max_size);
	cJSON_AddBoolToObject(r, "center_crop", o->center_crop != 0);
	if (o->encoding == PACK_JPEG)
		cJSON_AddNumberToObject(r, "quality", j->quality);
	if (o->shards)
		cJSON_AddNumberToObject(r, "shards", o->shards);
	else
		cJSON_AddNumberToObject(r, "shard_size",
					(double)(o->shard_bytes ? o->shard_bytes : 1ull << 30));
	cJSON_AddBoolToObject(r, "check_decode", o->check_decode != 0);
	char *s = ims_json_print(r, 0);
	cJSON_Delete(r);
	return s;
}

int pack_check_names(const ds_list *list, const char *split, ims_error *err)
{
	char e[600];
	RETURN_IF(split && !ims_utf8_valid(split, NULL), err, IMS_EINVAL,
		  "split name '%s' is not UTF-8, which a manifest must be (docs/FORMAT.md); choose another -o NAME",
		  ims_escape(split, e, sizeof(e)));
	for (size_t c = 0; c < list->n_classes; c++) {
		RETURN_IF(!ims_utf8_valid(list->classes[c], NULL), err, IMS_EINVAL,
			  "class %zu's name '%s' is not UTF-8, which a manifest must be (docs/FORMAT.md): rename it (a class folder: e.g. convmv -f latin1 -t utf8 --notest), or give UTF-8 names with --classes FILE",
			  c, ims_escape(list->classes[c], e, sizeof(e)));
		/* The names go on as lines of classes files (extract, list,
		 * convert), and verify holds a manifest to the same rules:
		 * the library refuses what a classes file given to the CLI
		 * could not hold. */
		const char *why = ims_name_line_problem(list->classes[c]);
		RETURN_IF(why, err, IMS_EINVAL,
			  "class %zu's name '%s' %s: a class name must be one line of a classes file (docs/FORMAT.md)",
			  c, ims_escape(list->classes[c], e, sizeof(e)), why);
	}
	size_t first = 0, dup = 0;
	int d = ims_find_duplicate((const char *const *)list->classes, list->n_classes,
				   &first, &dup);
	RETURN_IF(d < 0, err, IMS_ENOMEM, "out of memory");
	RETURN_IF(d, err, IMS_EINVAL, "class %zu's name '%s' repeats class %zu's",
		  dup, ims_escape(list->classes[dup], e, sizeof(e)), first);
	return 0;
}

static int check_opts(const ds_list *list, const pack_opts *o, ims_error *err)
{
	RETURN_IF(!o->root || !o->out_dir || !o->name, err, IMS_EINVAL,
		  "root, output folder and name are required");
	RETURN_IF(o->encoding < PACK_KEEP || o->encoding > PACK_RAW, err, IMS_EINVAL,
		  "unknown encoding %d", (int)o->encoding);
	RETURN_IF(o->order < PACK_ORDER_AUTO || o->order > PACK_ORDER_SHUFFLED, err,
		  IMS_EINVAL, "unknown order %d", (int)o->order);
	RETURN_IF(o->encoding == PACK_KEEP &&
			  (o->resize || o->max_size || o->center_crop),
		  err, IMS_EINVAL,
		  "--resize, --max-size and --center-crop need --encoding jpeg, png or raw (keep stores files unchanged)");
	RETURN_IF(o->shards < 0 || o->shards > 99999, err, IMS_EINVAL,
		  "shard count %d is not in 1..99999", o->shards);
	RETURN_IF(o->shards && o->shard_bytes, err, IMS_EINVAL,
		  "give either a shard count or a shard size, not both");
	RETURN_IF(o->quality < 0 || o->quality > 100, err, IMS_EINVAL,
		  "JPEG quality %d is not in 1..100", o->quality);
	RETURN_IF(o->quality && o->encoding != PACK_JPEG, err, IMS_EINVAL,
		  "a JPEG quality applies to encoding jpeg only, not %s",
		  pack_encoding_name(o->encoding));
	RETURN_IF(o->resize < 0 || o->resize > AUG_MAX_SIDE || o->max_size < 0 ||
			  o->max_size > AUG_MAX_SIDE,
		  err, IMS_EINVAL, "sizes must be in 1..%d pixels", AUG_MAX_SIDE);
	RETURN_IF(list->count == 0, err, IMS_EINVAL, "the list is empty");
	RETURN_IF((uint64_t)o->shards > list->count, err, IMS_EINVAL,
		  "cannot make %d shards from a list of %zu images", o->shards,
		  list->count);
	FORWARD_IF_ERR(pack_check_names(list, o->name, err));
	size_t bad_path = SIZE_MAX;
	int prc = ds_list_check_paths(list, 0, o->read_row ? NULL : o->root,
				      &bad_path, err);
	if (prc < 0 && bad_path != SIZE_MAX)
		return ims_fail_context(err, "cannot pack row %zu", bad_path);
	FORWARD_IF_ERR(prc);
	/* Before anything is sized by the labels (class names, counts, the
	 * manifest): a stray huge label would otherwise cost memory for every
	 * class up to it. */
	size_t bad = SIZE_MAX;
	int rc = ds_list_check_labels(list, 0, o->max_label, &bad, err);
	if (rc < 0 && bad != SIZE_MAX)
		return ims_fail_context(err, "cannot pack row %zu ('%s')", bad,
					list->items[bad].path);
	FORWARD_IF_ERR(rc);
	struct stat st;
	RETURN_IF(stat(o->root, &st) != 0, err, IMS_ENOTFOUND,
		  "cannot open image root '%s': %s", o->root, strerror(errno));
	RETURN_IF(!S_ISDIR(st.st_mode), err, IMS_EINVAL,
		  "image root '%s' is not a folder", o->root);
	return 0;
}

int pack_list_order(const ds_list *l, pack_order *order, const char **why,
		    ims_error *err)
{
	int in_order = 1;
	size_t runs = l->count ? 1 : 0;
	for (size_t i = 1; i < l->count; i++) {
		in_order &= l->items[i].index > l->items[i - 1].index;
		runs += l->items[i].label != l->items[i - 1].label;
	}
	const char *w = "rows in index order";
	*order = PACK_ORDER_LIST;
	if (!in_order) {
		size_t distinct = 0;
		FORWARD_IF_ERR(ds_list_distinct_labels(l, &distinct, err));
		if (distinct > 1 && runs == distinct) {
			w = "rows grouped by class";
		} else {
			w = "rows out of index order";
			*order = PACK_ORDER_SHUFFLED;
		}
	}
	if (why)
		*why = w;
	return 0;
}

int pack_run(const ds_list *list, const pack_opts *o, pack_report *rep,
	     ims_error *err)
{
	memset(rep, 0, sizeof(*rep));
	rep->listed = list->count;
	double t0 = ims_now();
	FORWARD_IF_ERR(check_opts(list, o, err));
	FORWARD_IF_ERR(ds_list_find_repeats(list, &rep->repeats, err));
	rep->order = o->order;
	if (o->order == PACK_ORDER_AUTO)
		FORWARD_IF_ERR(pack_list_order(list, &rep->order, &rep->order_why, err));

	job j;
	memset(&j, 0, sizeof(j));
	j.list = list;
	j.o = o;
	j.quality = o->quality ? o->quality : 95;
	j.fit.shorter = o->resize;
	j.fit.max_longer = o->max_size;
	j.fit.center_crop = o->center_crop;
	j.fit.allow_upscale = 1;
	j.geometry = o->resize || o->max_size || o->center_crop;

	int threads = o->threads > 0 ? o->threads : omp_get_num_procs();
	if (threads > 256)
		threads = 256;
	/* The window: enough rows in flight per thread to keep every thread
	 * busy while the writer catches up, few enough to bound memory. */
	size_t window = (size_t)threads * 16;

	int rc = 0;
	sink k;
	memset(&k, 0, sizeof(k));
	k.cur_shard = 0;
	k.last_filled = -1;
	slot *slots = calloc(window, sizeof(*slots));
	uint64_t *ready = calloc(window, sizeof(*ready));
	worker *workers = calloc((size_t)threads, sizeof(*workers));
	char *opts_json = NULL;
	if (!slots || !ready || !workers)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "out of memory");
	for (int t = 0; t < threads; t++)
		GOTO_IF_ERR(out, rc, aug_codec_create(&workers[t].codec, err));

	rio_writer_opts wo;
	memset(&wo, 0, sizeof(wo));
	wo.dir = o->out_dir;
	wo.name = o->name;
	wo.shard_bytes = o->shards ? 0 : (o->shard_bytes ? o->shard_bytes : 1ull << 30);
	wo.force = o->force;
	wo.initial_map_size = o->initial_map_size;
	GOTO_IF_ERR(out, rc, rio_writer_open(&wo, &k.w, err));
	rio_writer_set_order(k.w, rep->order == PACK_ORDER_SHUFFLED ? RIO_ORDER_SHUFFLED :
								      RIO_ORDER_LIST);
	int plen = snprintf(k.errors_path, sizeof(k.errors_path), "%s/%s.errors.tsv",
			    o->out_dir, o->name);
	if (plen < 0 || (size_t)plen >= sizeof(k.errors_path))
		GOTO_FAIL(out, rc, err, IMS_EINVAL, "output path '%s/%s' is too long",
			  o->out_dir, o->name);
	snprintf(k.manifest, sizeof(k.manifest), "%s/%s.json", o->out_dir, o->name);
	k.replacing = access(k.manifest, F_OK) == 0;
	k.discard = o->discard_errors;
	ims_temp_sweep_for(k.errors_path, NULL); /* litter of killed packs */

	uint64_t n = list->count;
	uint64_t next_row = 0; /* next row to claim */
	uint64_t written = 0;  /* rows drained so far; changed under the lock */
	int stop = 0;
	ims_error stop_err;
	ims_error_clear(&stop_err);
	omp_lock_t writer_lock;
	omp_init_lock(&writer_lock);

#pragma omp parallel num_threads(threads)
	{
		worker *w = &workers[omp_get_thread_num()];
		for (;;) {
			if (__atomic_load_n(&stop, __ATOMIC_ACQUIRE))
				break;
			/* Drain whatever is ready, in order, if nobody else is. */
			if (omp_test_lock(&writer_lock)) {
				uint64_t wr = __atomic_load_n(&written, __ATOMIC_ACQUIRE);
				int r = 0;
				while (wr < n && r == 0 &&
				       __atomic_load_n(&ready[wr % window], __ATOMIC_ACQUIRE) == wr + 1) {
					r = drain_one(&j, &k, &slots[wr % window], wr, &stop_err);
					__atomic_store_n(&ready[wr % window], 0, __ATOMIC_RELAXED);
					wr++;
					__atomic_store_n(&written, wr, __ATOMIC_RELEASE);
				}
				if (r == 0 && o->cancel && *o->cancel)
					r = ims_fail(&stop_err, IMS_EINTR, "interrupted");
				if (r < 0)
					__atomic_store_n(&stop, r, __ATOMIC_RELEASE);
				omp_unset_lock(&writer_lock);
				if (r < 0 || wr == n)
					break;
			}
			/* Claim the next row if the window has room. */
			uint64_t row = __atomic_load_n(&next_row, __ATOMIC_ACQUIRE);
			uint64_t wr = __atomic_load_n(&written, __ATOMIC_ACQUIRE);
			if (row < n && row < wr + window) {
				if (__atomic_compare_exchange_n(&next_row, &row, row + 1, 0,
								__ATOMIC_ACQ_REL,
								__ATOMIC_ACQUIRE)) {
					process(&j, w, row, &slots[row % window]);
					__atomic_store_n(&ready[row % window], row + 1,
							 __ATOMIC_RELEASE);
				}
				continue;
			}
			if (wr >= n)
				break;
			/* Nothing to claim: the writer (or a slow row) is behind. */
			sched_yield();
		}
	}
	omp_destroy_lock(&writer_lock);

	/* The errors file stays a temporary until the split is published
	 * (rio_writer_finish renames it), or the run fails (settle_errors). */
	if (k.errors) {
		int bad = fflush(k.errors) != 0 || fsync(fileno(k.errors)) != 0;
		bad |= fclose(k.errors) != 0;
		k.errors = NULL;
		if (bad) {
			int e = errno;
			unlink(k.errors_tmp);
			if (!stop)
				GOTO_FAIL(out, rc, err, IMS_EIO, "cannot write '%s': %s",
					  k.errors_tmp, strerror(e));
		}
	}
	rep->packed = k.packed;
	rep->skipped = k.skipped;
	rep->bytes_in = k.bytes_in;
	rep->bytes_out = k.bytes_out;
	if (stop) {
		rc = stop;
		if (err)
			*err = stop_err;
		goto out;
	}
	if (k.packed == 0) {
		char where[9000];
		GOTO_FAIL(out, rc, err, IMS_EFORMAT,
			  "no image could be packed: all %llu files were skipped (%s)",
			  (unsigned long long)k.skipped, skips_named(&k, where, sizeof(where)));
	}

	opts_json = options_json(&j);
	size_t nc = ds_list_num_classes(list);
	const char **names = calloc(nc ? nc : 1, sizeof(char *));
	char (*numbers)[24] = calloc(nc ? nc : 1, 24);
	if (!names || !numbers) {
		free(names);
		free(numbers);
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < nc; i++) {
		if (i < list->n_classes) {
			names[i] = list->classes[i];
		} else {
			snprintf(numbers[i], 24, "%zu", i);
			names[i] = numbers[i];
		}
	}
	rio_writer_meta meta;
	memset(&meta, 0, sizeof(meta));
	meta.encoding = pack_encoding_name(o->encoding);
	meta.classes = names;
	meta.n_classes = nc;
	meta.skipped = k.skipped;
	char errors_name[4200];
	snprintf(errors_name, sizeof(errors_name), "%s.errors.tsv", o->name);
	meta.errors_file = k.skipped ? errors_name : NULL;
	meta.errors_tmp = k.skipped ? k.errors_tmp : NULL;
	meta.options_json = opts_json;
	char *manifest = NULL;
	const size_t shards = rio_writer_shards(k.w);
	rc = rio_writer_finish(k.w, &meta, &manifest, err);
	k.w = NULL;
	free(names);
	free(numbers);
	if (rc == 0) {
		snprintf(rep->manifest, sizeof(rep->manifest), "%s", manifest);
		if (k.skipped)
			snprintf(rep->errors, sizeof(rep->errors), "%s", k.errors_path);
		if (o->shards > k.filled)
			rep->shards_left_out = o->shards - k.filled;
		rep->shards = (int)shards;
	}
	free(manifest);
out:
	if (k.errors)
		fclose(k.errors);
	if (rc < 0)
		settle_errors(&k, o);
	rio_writer_abort(k.w);
	if (workers)
		for (int t = 0; t < threads; t++) {
			aug_codec_destroy(workers[t].codec);
			aug_image_release(&workers[t].decoded);
			aug_image_release(&workers[t].resized);
			aug_image_release(&workers[t].cropped);
			ims_buf_release(&workers[t].file);
		}
	if (slots)
		for (size_t i = 0; i < window; i++)
			ims_buf_release(&slots[i].buf);
	free(slots);
	free(ready);
	free(workers);
	free(opts_json);
	rep->seconds = ims_now() - t0;
	return rc;
}
