/*
 * pack.h - turns a list of image files into a packed split: reads each
 * file, checks or re-encodes it, and appends it to the shard writer.
 *
 * This is the one packing path: `imshard pack` and every dataset converter
 * call pack_run with a ds_list. It joins the three libraries it sits
 * between (datasets for lists, augment for image bytes, recordio for
 * shards) and owns none of their logic.
 *
 * Caveats:
 *  - pack_run uses OpenMP threads internally (opts->threads); call it from
 *    one thread. Callbacks are called from one thread at a time, in list
 *    order, but not necessarily from the caller's thread.
 *  - Records appear in list order whatever the thread count: the output is
 *    byte-identical for 1 or N threads (apart from the manifest's
 *    creation time).
 *  - Memory is bounded by a window of in-flight images (a few per thread),
 *    not by the dataset size.
 */
#ifndef IMSHARD_PACK_H
#define IMSHARD_PACK_H

#include <stdint.h>

#include "common/common.h"
#include "datasets/datasets.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pack_encoding {
	PACK_KEEP = 0, /* store the source file's bytes unchanged (checked) */
	PACK_JPEG = 1, /* decode, optionally resize, re-encode as JPEG */
	PACK_PNG = 2,  /* decode, optionally resize, re-encode as PNG */
	PACK_RAW = 3   /* decode, optionally resize, store pixels */
} pack_encoding;

/* "keep", "jpeg", "png", "raw"; parse returns -1 for anything else. */
const char *pack_encoding_name(pack_encoding e);
int pack_encoding_parse(const char *s);

/* Whether the records are shuffled, as the manifest records it
 * ("shuffled"): readers that take whole shards (the loader's shard-owning
 * mode) see one class at a time in a split sorted by class. */
typedef enum pack_order {
	PACK_ORDER_AUTO = 0,     /* inferred from the list: pack_list_order */
	PACK_ORDER_LIST = 1,     /* the caller says: in list order, not shuffled */
	PACK_ORDER_SHUFFLED = 2  /* the caller says: the rows are shuffled */
} pack_order;

/*
 * What a list's own rows say about its order, when nobody said: shuffled
 * when its index column is out of order and its labels are not grouped by
 * class (the lists `imshard list` and im2rec shuffle are numbered in sorted
 * order first, then shuffled); in list order otherwise. *why (may be NULL)
 * gets a static phrase for messages ("rows in index order", "rows grouped
 * by class", "rows out of index order"). IMS_ENOMEM.
 */
int pack_list_order(const ds_list *l, pack_order *order, const char **why,
		    ims_error *err);

typedef struct pack_opts {
	const char *root;      /* list paths are relative to this folder */
	const char *out_dir;   /* output folder */
	const char *name;      /* split name (NAME.json, NAME-*.mdb) */
	const char *source;    /* list file name, recorded in the manifest (may be NULL) */
	pack_encoding encoding;
	int shards;            /* this many shards by list position, at most the
				  list's length (0 = by size); a shard whose
				  whole range of rows was skipped is left out
				  (counted in pack_report.shards_left_out) */
	uint64_t shard_bytes;  /* roll shards at this size (0 = 1 GiB) when shards is 0 */
	int resize;            /* shorter side in pixels (0 = keep) */
	int max_size;          /* cap on the longer side (0 = none) */
	int center_crop;       /* crop the centred square after resizing */
	int quality;           /* JPEG quality 1..100 (0 = 95); encoding jpeg
				  only (IMS_EINVAL otherwise) */
	int threads;           /* worker threads (0 = all cores) */
	int64_t max_errors;    /* fail once more files than this are skipped (-1 = never) */
	int force;             /* replace an existing split */
	int check_decode;      /* keep mode: decode every image fully instead of
				  the structural check */
	volatile int *cancel;  /* when it becomes non-zero, stop (IMS_EINTR) */
	/* Called after every chunk of a few dozen images. */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	/* Called for every skipped file, in list order. */
	void (*skipped)(void *ctx, uint64_t row, const char *path, const char *why);
	void *ctx;
	uint64_t initial_map_size; /* tests only: forces map growth (0 = default) */
	/* The largest label accepted (ds_list_check_labels): DS_LABEL_AUTO
	 * (the default) bounds labels by the list's class names, or by its
	 * distinct labels when it has none; 0..DS_LABEL_CEILING accepts
	 * labels up to that (a sparse label space). A row past it fails the
	 * run before anything is written. */
	int64_t max_label;
	/* Rows that are records inside a dataset's own files (CIFAR-10
	 * batches) are read with this instead of opening root/path: it gives
	 * raw pixels (see ds_adapter.read_row). With it, keep and raw store
	 * the pixels as they are (keep marks them original); jpeg and png
	 * encode them, after any resize. NULL for ordinary image files. */
	int (*read_row)(const char *root, const ds_entry *e, uint8_t **data,
			size_t *cap, ds_pixels *px, ims_error *err);
	pack_order order;      /* recorded in the manifest; AUTO infers it */
	/* A failed run removes its errors file instead of publishing it, and
	 * its message names the first skipped file: for an out_dir that is
	 * itself removed on failure (convert's staging folder), where a path
	 * into it would name nothing. */
	int discard_errors;
} pack_opts;

/* Fills o with the defaults above (all zero except max_errors = -1 and
 * max_label = DS_LABEL_AUTO). */
void pack_opts_init(pack_opts *o);

typedef struct pack_report {
	uint64_t listed;      /* rows in the list */
	uint64_t packed;      /* records written */
	uint64_t skipped;     /* files skipped (each in NAME.errors.tsv) */
	uint64_t bytes_in;    /* source bytes read */
	uint64_t bytes_out;   /* payload bytes written */
	int shards;           /* shards written */
	/* With opts->shards: shards asked for that were left out because
	 * every row of their range was skipped (shards + shards_left_out ==
	 * opts->shards); the caller should say so. 0 otherwise. */
	int shards_left_out;
	double seconds;       /* wall time */
	char manifest[4096];  /* path of NAME.json, when written */
	char errors[4096];    /* path of NAME.errors.tsv as published, or ""
				 when none (or the run failed) */
	pack_order order;     /* what the manifest records (LIST or SHUFFLED) */
	const char *order_why;/* when inferred (opts order AUTO): why, as
				 pack_list_order says; NULL otherwise */
	/* Rows naming an image an earlier row names (ds_list_find_repeats):
	 * each is packed as often as it is listed, so the split holds that
	 * image more than once; the caller should say so. */
	ds_repeats repeats;
} pack_report;

/*
 * Packs every row of list (files under opts->root) into
 * opts->out_dir/opts->name, a row as often as it is listed (rows naming
 * an image an earlier row names are counted in report->repeats). Bad files (missing, empty, truncated, not an
 * image, absurd size, undecodable) are skipped, each named with its reason
 * in NAME.errors.tsv and passed to opts->skipped. The manifest is written
 * last: on any failure, interruption, or when every file was skipped, no
 * manifest exists and rerunning the same call starts afresh. Classes come
 * from list->classes (or "0".."K-1" when the list has none); names that
 * are not UTF-8, that a classes file could not hold (empty, only spaces,
 * a line break or a TAB) or that repeat are refused (IMS_EINVAL) before
 * anything is written.
 * Nothing is left behind by a failed run: no lock, shard or temporary file
 * (only NAME.errors.tsv, which names the files that were skipped, when no
 * split of that name exists). A split being replaced (force) stays whole
 * when the run fails, its NAME.errors.tsv included: the new errors file
 * is published with the new manifest.
 * Errors: IMS_EEXIST (split exists, no force), IMS_ELIMIT (more than
 * max_errors files skipped), IMS_EINTR (cancelled), IMS_EFORMAT (no
 * file could be packed), IMS_EINVAL (bad options, or a label past
 * max_label: the row is named), IMS_EIO/IMS_ELMDB.
 */
int pack_run(const ds_list *list, const pack_opts *opts, pack_report *report,
	     ims_error *err);

/* ------------------------------------------------------------------------
 * Convert: a dataset as downloaded, in its own layout, into packed splits
 * (convert.c). The workflow of `imshard convert`: the adapter reads the
 * layout into lists (datasets.h), each split is subsetted when asked, its
 * list and the class names are written, and every split is packed through
 * pack_run. The tool only parses arguments and prints what the callbacks
 * and the report say.
 *
 * Caveats: as pack_run (OpenMP inside; call from one thread). Callbacks are
 * called from the calling thread, except opts->pack's progress and skipped
 * callbacks, which pack_run calls as it documents.
 * ------------------------------------------------------------------------ */

/* The splits a subset can be asked for ("train", "val", "test"), in this
 * order in pack_convert_opts.subset. */
enum { PACK_SPLIT_TRAIN, PACK_SPLIT_VAL, PACK_SPLIT_TEST, PACK_N_SUBSET_SPLITS };

/* A class-balanced subset of one split: per_class rows of every class, or
 * total rows divided evenly across the classes (ds_subset). Both 0 takes
 * the whole split; both set is IMS_EINVAL. */
typedef struct pack_subset {
	size_t per_class;
	size_t total;
} pack_subset;

/* A class that had fewer rows than its subset wanted. */
typedef struct pack_short_class {
	const char *name; /* class name, or "?" when the list has none */
	size_t label;
	size_t available, wanted;
} pack_short_class;

/* One split, as written. */
typedef struct pack_convert_split {
	char name[16];        /* "train" */
	uint64_t listed;      /* rows of its list (after any subset) */
	uint64_t records;     /* records packed */
	uint64_t skipped;     /* files skipped (see errors) */
	uint64_t bytes_in;    /* source bytes read */
	uint64_t bytes_out;   /* payload bytes written */
	int shards;           /* shards written */
	int shards_left_out;  /* as pack_report's: asked for, not written */
	size_t classes;       /* classes in the manifest */
	uint64_t fewest, most;/* records of the smallest and largest class */
	double seconds;       /* packing wall time */
	char manifest[4096];  /* OUTDIR/<split>.json */
	char errors[4096];    /* OUTDIR/<split>.errors.tsv, or "" when none */
} pack_convert_split;

/* Where a failed convert stopped. */
typedef enum pack_convert_stage {
	PACK_CONVERT_OPTIONS = 0, /* options that do not fit the dataset (a
				     usage error: a subset of a split the
				     dataset does not have) */
	PACK_CONVERT_LOAD,        /* the adapter could not read the layout */
	PACK_CONVERT_SUBSET,      /* a subset could not be taken */
	PACK_CONVERT_WRITE,       /* writing lists, class names or shards */
	PACK_CONVERT_DONE         /* success */
} pack_convert_stage;

typedef struct pack_convert_report {
	int n_splits;
	pack_convert_split splits[DS_MAX_SPLITS]; /* the splits written */
	pack_convert_stage stage;  /* PACK_CONVERT_DONE on success */
	char failed_split[16];     /* the split at fault, or "" */
	/* On failure: what became of OUTDIR ("nothing was replaced: 'out'
	 * keeps its earlier splits train, val", or "no split was written to
	 * 'out'"); the former also ends the error message, except after
	 * IMS_EINTR. */
	char outcome[4400];
	/* When a subset failed for short classes: each of them (names owned
	 * by the report; free with pack_convert_report_release). */
	pack_short_class *refused;
	size_t n_refused;
} pack_convert_report;

/* Frees what the report owns (the refused classes). NULL is fine. */
void pack_convert_report_release(pack_convert_report *r);

typedef struct pack_convert_opts {
	const ds_adapter *adapter;
	const char *root;          /* the dataset, as downloaded */
	const char *out_dir;       /* OUTDIR: splits, lists and classes.txt */
	ds_convert_opts dataset;   /* the adapter's options; dataset.seed
				      also draws the subsets */
	pack_subset subset[PACK_N_SUBSET_SPLITS];
	int allow_short;           /* a short class gives all it has */
	/* 0 (default): each split's rows are shuffled with dataset.seed after
	 * any subset, so that records (and every shard) mix the classes; the
	 * manifests record "shuffled": true. 1: rows stay in the adapter's
	 * order (sorted by class for most layouts), recorded as not
	 * shuffled. The .lst written is the packed order either way. */
	int no_shuffle;
	/* Every split's packing options. root, out_dir, name, source and
	 * read_row are set per split; force also allows replacing the lists
	 * and classes.txt of an earlier convert. */
	pack_opts pack;
	/* Things the adapter ignored or worked around, one line each. */
	void (*note)(void *ctx, const char *msg);
	/* allow_short: the classes of split that gave all they had. */
	void (*short_classes)(void *ctx, const char *split,
			      const pack_short_class *c, size_t n);
	/* Packing of a split starts (rows to pack) and ends (as written). */
	void (*split_begin)(void *ctx, const char *split, uint64_t rows);
	void (*split_end)(void *ctx, const pack_convert_split *s);
	void *ctx;
	/* Tests only: called with ctx before each step of the switch (see
	 * pack_convert), numbered from 0. */
	void (*switch_step)(void *ctx, int step);
} pack_convert_opts;

/* Fills o with the defaults: no subsets, ds_convert_opts_init and
 * pack_opts_init's values, no callbacks. */
void pack_convert_opts_init(pack_convert_opts *o);

/*
 * Converts the dataset under opts->root with opts->adapter into
 * opts->out_dir: <split>.json with its shards, <split>.lst (the rows
 * packed) and classes.txt (line i = label i).
 *
 * All or nothing: OUTDIR's splits train, val and test (their manifests,
 * shards, lists and errors files) and classes.txt are replaced together
 * or not at all. Everything is written into OUTDIR/.imshard-convert
 * first; only when every split is complete are the old files removed
 * (manifests first) and the new ones moved in (manifests last). The
 * splits' locks (OUTDIR/<split>.lock) are held throughout, so a split
 * being packed by another process fails the convert before anything is
 * written. A failure or kill before the switch leaves OUTDIR as it was
 * (the staging folder is removed then, or by the next convert); during
 * the switch, OUTDIR holds some of the new splits and none of the old,
 * and the next convert into OUTDIR finishes the switch. Nothing is
 * written outside OUTDIR. Refuses (IMS_EEXIST) before writing anything
 * when a split exists, unless opts->pack.force (which also removes a
 * split of an earlier convert that this one does not write).
 *
 * report (required) says what was written, or where it stopped and what
 * was kept.
 * Errors: the adapter's (the file at fault named), ds_subset's
 * (IMS_ENOTFOUND for short classes, listed in report->refused),
 * pack_run's, IMS_EINVAL (a subset of a split the dataset lacks, or bad
 * options), IMS_EINTR (opts->pack.cancel).
 */
int pack_convert(const pack_convert_opts *opts, pack_convert_report *report,
		 ims_error *err);

#ifdef __cplusplus
}
#endif

#endif
