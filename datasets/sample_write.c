/*
 * sample_write.c - writes the built-in sample dataset (sample.c draws its
 * images) as class folders.
 *
 * Writing goes to a hidden folder first and moves the class folders into
 * place at the end, so an interrupted run never leaves a dataset that looks
 * complete but is not.
 */
#define _GNU_SOURCE
#include "datasets.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "augment/augment.h"
#include "datasets/sample_internal.h"

#define TMP_NAME ".imshard-sample.tmp"
#define MAX_THREADS 32

/* ---- writing class folders ---- */

void ds_sample_opts_init(ds_sample_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->classes = DS_SAMPLE_DEFAULT_CLASSES;
	o->per_class = DS_SAMPLE_DEFAULT_PER_CLASS;
}

static int class_of_name(const char *name)
{
	for (int k = 0; k < K_COUNT; k++)
		if (strcmp(ds_sample_kinds[k].name, name) == 0)
			return k;
	return -1;
}

/* Is name "<class>_<digits>.jpg|.png", a file this module writes? */
static int is_sample_file(const char *cls, const char *name)
{
	size_t n = strlen(cls);
	if (strncmp(name, cls, n) != 0 || name[n] != '_')
		return 0;
	const char *p = name + n + 1;
	size_t digits = strspn(p, "0123456789");
	if (digits < 4)
		return 0;
	p += digits;
	return strcmp(p, ".jpg") == 0 || strcmp(p, ".png") == 0;
}

static int is_dir(const char *path, int *exists, ims_error *err)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		RETURN_IF(errno != ENOENT, err, IMS_EIO, "cannot stat '%s': %s",
			  path, strerror(errno));
		*exists = 0;
		return 0;
	}
	*exists = 1;
	return S_ISDIR(st.st_mode) ? 1 : 0;
}

/*
 * Checks (remove == 0) or empties and removes (remove == 1) a class folder
 * of an earlier sample. Anything in it that the sample does not write is
 * refused, never deleted.
 */
static int sweep_class_dir(const char *dir, const char *cls, int remove,
			   ims_error *err)
{
	ims_dir_listing ls = {0};
	int rc = 0;
	char path[4096];
	GOTO_IF_ERR(out, rc, ims_dir_list(dir, IMS_DIR_HIDDEN, &ls, err));
	for (size_t i = 0; i < ls.n; i++) {
		const char *name = ls.e[i].name;
		if (!is_sample_file(cls, name))
			GOTO_FAIL(out, rc, err, IMS_EEXIST,
				  "cannot replace the sample folder '%s': it holds '%s', "
				  "which the sample did not write (move it away)",
				  dir, name);
		if (!remove)
			continue;
		GOTO_IF_ERR(out, rc, ims_path_join(path, sizeof(path), dir,
						   name, err));
		if (unlink(path) != 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot remove '%s': %s",
				  path, strerror(errno));
	}
	if (remove && rmdir(dir) != 0)
		GOTO_FAIL(out, rc, err, IMS_EIO, "cannot remove folder '%s': %s",
			  dir, strerror(errno));
out:
	ims_dir_listing_release(&ls);
	return rc;
}

/* Removes the hidden work folder of this or an earlier, interrupted run. */
static int remove_tmp(const char *tmp, ims_error *err)
{
	int exists;
	int dir = is_dir(tmp, &exists, err);
	FORWARD_IF_ERR(dir);
	if (!exists)
		return 0;
	RETURN_IF(!dir, err, IMS_EEXIST,
		  "cannot use '%s' as the sample's work folder: not a folder", tmp);
	ims_dir_listing ls = {0};
	int rc = 0;
	char path[4096];
	GOTO_IF_ERR(out, rc, ims_dir_list(tmp, IMS_DIR_HIDDEN, &ls, err));
	for (size_t i = 0; i < ls.n; i++) {
		const char *name = ls.e[i].name;
		if (class_of_name(name) < 0)
			GOTO_FAIL(out, rc, err, IMS_EEXIST,
				  "cannot remove the sample's work folder '%s': it holds "
				  "'%s', which the sample did not write", tmp, name);
		GOTO_IF_ERR(out, rc, ims_path_join(path, sizeof(path), tmp,
						   name, err));
		GOTO_IF_ERR(out, rc, sweep_class_dir(path, name, 1, err));
	}
	if (rmdir(tmp) != 0)
		GOTO_FAIL(out, rc, err, IMS_EIO, "cannot remove folder '%s': %s",
			  tmp, strerror(errno));
out:
	ims_dir_listing_release(&ls);
	return rc;
}

/*
 * Looks at outdir before anything is written: old[k] is set for each class
 * folder of an earlier sample. Without force any entry (other than the work
 * folder) is refused; with force, foreign folders, foreign files inside
 * class folders and anything but a folder at the name of one of the first
 * `classes` classes are.
 */
static int inspect_outdir(const char *outdir, int force, int classes,
			  int old[K_COUNT], ims_error *err)
{
	memset(old, 0, sizeof(int) * K_COUNT);
	ims_dir_listing ls = {0};
	int rc = 0;
	char path[4096];
	GOTO_IF_ERR(out, rc, ims_dir_list(outdir, IMS_DIR_HIDDEN, &ls, err));
	for (size_t i = 0; i < ls.n; i++) {
		const char *name = ls.e[i].name;
		if (strcmp(name, TMP_NAME) == 0)
			continue;
		if (!force)
			GOTO_FAIL(out, rc, err, IMS_EEXIST,
				  "cannot write the sample to '%s': the folder is not empty "
				  "(it holds '%s'; --force replaces an earlier sample)",
				  outdir, name);
		GOTO_IF_ERR(out, rc, ims_path_join(path, sizeof(path), outdir, name, err));
		int exists, dir = is_dir(path, &exists, err);
		GOTO_IF_ERR(out, rc, dir);
		int k = class_of_name(name);
		/* A class folder is moved to this name at the end, after the
		 * earlier sample's folders are gone: a file or link here would
		 * fail that move and leave part of a dataset. */
		if (!dir && k >= 0 && k < classes)
			GOTO_FAIL(out, rc, err, IMS_EEXIST,
				  "cannot write the sample to '%s': '%s' is not a folder, "
				  "and class '%s' is written at that name (move it away)",
				  outdir, name, name);
		if (!dir)
			continue; /* loose files are not classes: left alone */
		if (k < 0)
			GOTO_FAIL(out, rc, err, IMS_EEXIST,
				  "cannot replace the sample in '%s': '%s' is not a sample "
				  "class folder and would become a class (move it away)",
				  outdir, name);
		GOTO_IF_ERR(out, rc, sweep_class_dir(path, name, 0, err));
		old[k] = 1;
	}
out:
	ims_dir_listing_release(&ls);
	return rc;
}

typedef struct writer {
	const ds_sample_opts *o;
	const char *outdir, *tmp;
	uint64_t total;
	atomic_uint_fast64_t next, done, bytes, png;
	atomic_int stop;
	pthread_mutex_t lock;
	int rc;         /* first failure, under lock */
	ims_error err;
} writer;

/* Writes b to path; a failure names shown, the file the user asked for
 * (path lies in the work folder, which a failed run removes). */
static int write_bytes(const char *path, const char *shown, const ims_buf *b,
		       ims_error *err)
{
	FILE *f = fopen(path, "wb");
	RETURN_IF(!f, err, IMS_EIO, "cannot write '%s': %s", shown, strerror(errno));
	size_t n = fwrite(b->data, 1, b->len, f);
	int e = errno;
	if (fclose(f) != 0 || n != b->len)
		return ims_fail(err, IMS_EIO, "cannot write '%s': %s", shown,
				strerror(n != b->len ? e : errno));
	return 0;
}

static void fail_writer(writer *w, int rc, const ims_error *e)
{
	pthread_mutex_lock(&w->lock);
	if (!w->rc) {
		w->rc = rc;
		w->err = *e;
	}
	pthread_mutex_unlock(&w->lock);
	atomic_store(&w->stop, 1);
}

static int cancelled(const writer *w)
{
	return w->o->cancel && *w->o->cancel;
}

/* One worker: takes image numbers from the shared counter until none are
 * left. The calling thread (report = 1) also reports progress. */
static void work(writer *w, int report)
{
	const ds_sample_opts *o = w->o;
	aug_codec *codec = NULL;
	aug_image img = {0};
	ims_buf buf = {0};
	ims_error e;
	ims_error_clear(&e);
	char name[256], path[4096], shown[4096];
	int rc = aug_codec_create(&codec, &e);
	while (rc == 0 && !atomic_load(&w->stop) && !cancelled(w)) {
		uint64_t j = atomic_fetch_add(&w->next, 1);
		if (j >= w->total)
			break;
		/* Class-interleaved order: progress shows every class early. */
		int k = (int)(j % (uint64_t)o->classes);
		int i = (int)(j / (uint64_t)o->classes);
		rc = ds_sample_encode(codec, o->seed, k, i, &img, &buf, &e);
		if (rc == 0)
			rc = ds_sample_file_name(k, i, name, sizeof(name), &e);
		if (rc == 0) {
			char cls[4096];
			rc = ims_path_join(cls, sizeof(cls), w->tmp, ds_sample_kinds[k].name, &e);
			if (rc == 0)
				rc = ims_path_join(path, sizeof(path), cls, name, &e);
			if (rc == 0)
				rc = ims_path_join(cls, sizeof(cls), w->outdir,
						   ds_sample_kinds[k].name, &e);
			if (rc == 0)
				rc = ims_path_join(shown, sizeof(shown), cls, name, &e);
		}
		if (rc == 0)
			rc = write_bytes(path, shown, &buf, &e);
		if (rc)
			break;
		atomic_fetch_add(&w->bytes, buf.len);
		if (ds_sample_is_png(ds_sample_file_kind_of(i)))
			atomic_fetch_add(&w->png, 1);
		uint64_t done = atomic_fetch_add(&w->done, 1) + 1;
		if (report && o->progress)
			o->progress(o->progress_ctx, done, w->total);
	}
	if (rc)
		fail_writer(w, rc, &e);
	ims_buf_release(&buf);
	aug_image_release(&img);
	aug_codec_destroy(codec);
}

static void *work_thread(void *arg)
{
	work(arg, 0);
	return NULL;
}

static int thread_count(const ds_sample_opts *o, uint64_t total)
{
	long n = o->threads;
	if (n <= 0) {
		n = sysconf(_SC_NPROCESSORS_ONLN);
		if (n < 1)
			n = 1;
	}
	if (n > MAX_THREADS)
		n = MAX_THREADS;
	/* At least 16 images per thread: starting one is not free. */
	uint64_t useful = total / 16 + 1;
	if ((uint64_t)n > useful)
		n = (long)useful;
	return (int)n;
}

/* Draws every image into tmp/<class>/ with n threads (the caller is one). */
static int generate(writer *w, int n, ims_error *err)
{
	pthread_t tids[MAX_THREADS];
	int started = 0;
	for (int t = 1; t < n; t++) {
		if (pthread_create(&tids[started], NULL, work_thread, w) != 0)
			break; /* fewer threads still finish the work */
		started++;
	}
	work(w, 1);
	for (int t = 0; t < started; t++)
		pthread_join(tids[t], NULL);
	if (w->rc) {
		if (err)
			*err = w->err;
		return w->rc;
	}
	if (atomic_load(&w->done) < w->total)
		return ims_fail(err, IMS_EINTR,
				"stopped writing the sample to '%s': interrupted after "
				"%llu of %llu images", w->outdir,
				(unsigned long long)atomic_load(&w->done),
				(unsigned long long)w->total);
	if (w->o->progress)
		w->o->progress(w->o->progress_ctx, w->total, w->total);
	return 0;
}

int ds_sample_write(const char *outdir, const ds_sample_opts *o,
		    ds_sample_report *report, ims_error *err)
{
	double t0 = ims_now();
	RETURN_IF(!outdir || !*outdir, err, IMS_EINVAL,
		  "cannot write the sample: no output folder given");
	RETURN_IF(o->classes < DS_SAMPLE_MIN_CLASSES || o->classes > K_COUNT,
		  err, IMS_EINVAL,
		  "cannot write the sample: %d classes asked, %d to %d available",
		  o->classes, DS_SAMPLE_MIN_CLASSES, K_COUNT);
	RETURN_IF(o->per_class < 1 || o->per_class > DS_SAMPLE_MAX_PER_CLASS,
		  err, IMS_EINVAL,
		  "cannot write the sample: %d images per class asked, 1 to %d allowed",
		  o->per_class, DS_SAMPLE_MAX_PER_CLASS);

	int exists, dir = is_dir(outdir, &exists, err);
	FORWARD_IF_ERR(dir);
	RETURN_IF(exists && !dir, err, IMS_EEXIST,
		  "cannot write the sample to '%s': it exists and is not a folder",
		  outdir);
	/* created: the topmost folder this run made (OUTDIR or a parent of
	 * it), NULL when OUTDIR was there. From here on a failure removes
	 * what this run made again, parents included, so a failed run into
	 * a new folder leaves nothing that looks begun. */
	char *created = NULL;
	if (!exists)
		FORWARD_IF_ERR(ims_mkdir_p_created(outdir, &created, err));
	int rc = 0;
	int old[K_COUNT];
	char tmp[4096], path[4096], dst[4096];
	int have_tmp = 0;
	GOTO_IF_ERR(fail, rc, inspect_outdir(outdir, o->force, o->classes, old, err));
	GOTO_IF_ERR(fail, rc, ims_path_join(tmp, sizeof(tmp), outdir, TMP_NAME, err));
	have_tmp = 1;
	GOTO_IF_ERR(fail, rc, remove_tmp(tmp, err));
	/* the work folders are named as the folders the user asked for:
	 * a failed run removes them */
	if (mkdir(tmp, 0777) != 0)
		GOTO_FAIL(fail, rc, err, IMS_EIO, "cannot write the sample to '%s': %s",
			  outdir, strerror(errno));
	for (int k = 0; k < o->classes; k++) {
		GOTO_IF_ERR(fail, rc, ims_path_join(path, sizeof(path), tmp,
						    ds_sample_kinds[k].name, err));
		if (mkdir(path, 0777) != 0) {
			int e = errno;
			GOTO_IF_ERR(fail, rc, ims_path_join(dst, sizeof(dst), outdir,
							    ds_sample_kinds[k].name, err));
			GOTO_FAIL(fail, rc, err, IMS_EIO, "cannot create folder '%s': %s",
				  dst, strerror(e));
		}
	}

	writer w;
	memset(&w, 0, sizeof(w));
	w.o = o;
	w.outdir = outdir;
	w.tmp = tmp;
	w.total = (uint64_t)o->classes * (uint64_t)o->per_class;
	atomic_init(&w.next, 0);
	atomic_init(&w.done, 0);
	atomic_init(&w.bytes, 0);
	atomic_init(&w.png, 0);
	atomic_init(&w.stop, 0);
	pthread_mutex_init(&w.lock, NULL);
	rc = generate(&w, thread_count(o, w.total), err);
	pthread_mutex_destroy(&w.lock);
	if (rc)
		goto fail;

	/* Every image is written: replace the earlier sample's class folders
	 * (all of them, so a smaller run leaves no stale class), then move the
	 * new ones into place. */
	for (int k = 0; k < K_COUNT; k++) {
		if (!old[k])
			continue;
		GOTO_IF_ERR(fail, rc, ims_path_join(path, sizeof(path), outdir,
						    ds_sample_kinds[k].name, err));
		GOTO_IF_ERR(fail, rc, sweep_class_dir(path, ds_sample_kinds[k].name, 1, err));
	}
	for (int k = 0; k < o->classes; k++) {
		GOTO_IF_ERR(fail, rc, ims_path_join(path, sizeof(path), tmp,
						    ds_sample_kinds[k].name, err));
		GOTO_IF_ERR(fail, rc, ims_path_join(dst, sizeof(dst), outdir,
						    ds_sample_kinds[k].name, err));
		if (rename(path, dst) != 0)
			GOTO_FAIL(fail, rc, err, IMS_EIO, "cannot move '%s' to '%s': %s",
				  path, dst, strerror(errno));
	}
	if (rmdir(tmp) != 0)
		GOTO_FAIL(fail, rc, err, IMS_EIO, "cannot remove folder '%s': %s",
			  tmp, strerror(errno));
	free(created);
	FORWARD_IF_ERR(ims_fsync_parent(dst, err));

	if (report) {
		report->classes = o->classes;
		report->images = w.total;
		report->png = atomic_load(&w.png);
		report->jpeg = w.total - report->png;
		report->bytes = atomic_load(&w.bytes);
		report->seconds = ims_now() - t0;
	}
	return 0;

fail:
	/* Best effort: the first error is what the caller needs to see. rmdir
	 * removes only an empty folder, so nothing of the user's can go. */
	if (have_tmp)
		remove_tmp(tmp, NULL);
	if (created)
		ims_rmdir_created(outdir, created);
	free(created);
	return rc;
}
