/*
 * datasets.h - image lists: reading and writing im2rec .lst files, listing
 * class folders, stratified splits and class-balanced subsets.
 *
 * A list is what every dataset adapter produces and what the packer
 * consumes: (index, label, extra float labels, relative path) rows in the
 * im2rec format `index<TAB>label[<TAB>label...]<TAB>relative/path`, plus
 * the class names (label i = classes[i]). This library knows nothing of
 * LMDB or image bytes.
 *
 * Caveats:
 *  - All functions are reentrant; a ds_list is not shared between threads
 *    while being modified.
 *  - Randomness comes from an explicit seed: the same seed gives the same
 *    lists on every machine.
 */
#ifndef IMSHARD_DATASETS_H
#define IMSHARD_DATASETS_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* At most this many float labels after the first (integer) one. */
#define DS_MAX_EXTRA_LABELS 64

typedef struct ds_entry {
	uint64_t index; /* im2rec index column: stable id of the image */
	int32_t label;  /* first label, an integer class id (>= 0) */
	int n_extra;    /* extra float labels (im2rec pack-label), 0 usually */
	float *extra;   /* n_extra values, owned by the list */
	char *path;     /* relative to the dataset root, owned by the list */
} ds_entry;

/* A caller-owned list: zero it (or ds_list_init) before use, release with
 * ds_list_release. Every path, extra array and class name is its own
 * malloc'd block, freed by ds_list_release. Read items and classes freely;
 * grow them only through the functions below (classes has no capacity
 * field: its allocation is managed by ds_list_add_class). */
typedef struct ds_list {
	ds_entry *items;
	size_t count, cap;
	char **classes;   /* class names, label i = classes[i]; may be empty */
	size_t n_classes;
} ds_list;

void ds_list_init(ds_list *l);
/* Frees everything l owns and leaves it empty (as ds_list_init). l may be
 * NULL. */
void ds_list_release(ds_list *l);

/* Makes room for n rows in total (an optimisation before many appends). */
int ds_list_reserve(ds_list *l, size_t n, ims_error *err);

/* Appends a row (copies path and extra). label must be >= 0 and n_extra in
 * [0, DS_MAX_EXTRA_LABELS]; IMS_EINVAL otherwise. */
int ds_list_append(ds_list *l, uint64_t index, int32_t label,
		   const float *extra, int n_extra, const char *path,
		   ims_error *err);

/* Appends a class name (copied); returns its label in *label (may be
 * NULL). Does not check for duplicates. */
int ds_list_add_class(ds_list *l, const char *name, int32_t *label,
		      ims_error *err);

/* Replaces dst's class names with copies of src's (rows untouched). */
int ds_list_copy_classes(ds_list *dst, const ds_list *src, ims_error *err);

/*
 * Reads an im2rec list, appending its rows to l. The first label is a
 * class id: decimal digits, optionally with a fraction of zeros (`3`,
 * `3.0`, `3.000000`, as im2rec's %f writes it), at most INT32_MAX;
 * negative values, exponents (`1e2`), fractions (`3.5`), hex and words are
 * refused. The other label columns become extra labels (finite decimal
 * numbers, exponents allowed). Labels are not bounded here beyond
 * INT32_MAX: ds_list_read_with applies the label bound. The index is a non-negative integer. Every row must have the
 * same number of label columns. Blank lines, a trailing CR and a UTF-8
 * byte order mark are ignored. Paths may contain spaces and any non-ASCII
 * bytes (only TAB separates columns) and must be free of `..` components,
 * so that packing stays inside ROOT; they are relative to ROOT, or
 * absolute (im2rec's lists often are): whether those lie under ROOT is
 * checked by ds_list_read_with (opts->root) and by pack_run. Errors (IMS_EFORMAT;
 * IMS_ENOTFOUND/IMS_EIO when the file cannot be read) name the file and
 * line; on error l keeps only the rows it had before. Does not touch
 * l->classes.
 */
int ds_list_read(const char *path, ds_list *l, ims_error *err);

/* What ds_list_read_with checks beyond ds_list_read. */
typedef struct ds_list_read_opts {
	/* Labels: DS_LABEL_AUTO (the default; bound as described under
	 * "How large a label may be", using l's class names when it has
	 * them, so read the classes file first), DS_LABEL_ANY, or the largest
	 * label accepted (0..DS_LABEL_CEILING). */
	int64_t max_label;
	/* When set, an absolute path must lie under this folder (as given,
	 * or as resolved by realpath), else the line is refused. NULL:
	 * absolute paths are taken as they are. */
	const char *root;
} ds_list_read_opts;

/* Defaults: max_label DS_LABEL_AUTO, root NULL. */
void ds_list_read_opts_init(ds_list_read_opts *o);

/* ds_list_read, then the rows' paths against o->root and the label bound
 * over the whole list (rows read before included): a row that fails is
 * IMS_EFORMAT naming the file and line ("cannot read list 'h.lst': line
 * 1: label 99999999 is far beyond ..."), and the rows read are dropped.
 * o may be NULL (defaults). */
int ds_list_read_with(const char *path, const ds_list_read_opts *o,
		      ds_list *l, ims_error *err);

/* Checks that rows first .. count-1 have no '..' component nor an empty
 * path (as ds_list_read does) and that those with an absolute path lie
 * under root (as given or as resolved; see ds_list_read_opts.root). root
 * NULL checks nothing. 0, or IMS_EINVAL with the row in *bad_row (may be
 * NULL). */
int ds_list_check_paths(const ds_list *l, size_t first, const char *root,
			size_t *bad_row, ims_error *err);

/* Why a row's file may be missing: when path starts or ends with a space
 * (a list written by hand or exported from a spreadsheet:
 * "0<TAB>3<TAB> cat/1.jpg"), writes to buf a hint to append to the
 * message, " (the path starts with a space)", naming the path without the
 * spaces when that file exists under root (root NULL: the working folder);
 * else writes "". Spaces are never stripped from a path: a file name may
 * really start with one. Returns the length written (truncated to len). */
size_t ds_path_space_hint(const char *root, const char *path, char *buf,
			  size_t len);

/* An extra label as a list column reads it back: im2rec's "%f" when that
 * gives the same float back, else "%g" with the fewest digits (6 to 9)
 * that do ("1e-07", "0.1234567"), since "%f" keeps 6 decimals and would
 * write 1e-7 as 0. buf of 64 bytes holds
 * any finite float. Returns the length, or -1 (not finite, or too long). */
int ds_format_extra_label(float v, char *buf, size_t len);

/* Writes l as an im2rec list (integer first label, extra labels as
 * ds_format_extra_label writes them),
 * atomically (temporary file + rename). Refuses (IMS_EINVAL, nothing
 * written) rows that ds_list_read would reject: `..` components, paths
 * holding TAB or line breaks, non-finite labels. */
int ds_list_write(const char *path, const ds_list *l, ims_error *err);

/* Reads/writes class names, one per line, line i = label i. Reading
 * replaces l's class names (rows untouched), skips trailing blank lines
 * and a CR before each LF, and refuses blank lines elsewhere, duplicates,
 * lines holding a TAB (an im2rec list given as class names) and any other
 * CR. Writing is atomic and refuses what could not be read back: names
 * that are empty, only spaces, or hold a line break or a TAB, and
 * duplicates (ims_name_line_problem and ims_find_duplicate, the rules a
 * manifest's class names are verified against too). */
int ds_classes_read(const char *path, ds_list *l, ims_error *err);
int ds_classes_write(const char *path, const ds_list *l, ims_error *err);

/* What ds_list_write and ds_classes_write would write to path, and what
 * they would refuse (messages naming path), into *out (caller-released
 * with ims_buf_release; empty, text possibly NULL, for no rows): for
 * writers that stage several files before any replaces its own
 * (ims_temp_write). */
int ds_list_format(const ds_list *l, const char *path, ims_buf *out,
		   ims_error *err);
int ds_classes_format(const ds_list *l, const char *path, ims_buf *out,
		      ims_error *err);

/*
 * The class-names file that goes with a list: lst_path without a trailing
 * ".lst", then without a trailing "_train", "_val" or "_test", plus
 * ".classes" (`out/caltech_val.lst` -> `out/caltech.classes`, the files
 * `imshard list -o out/caltech` writes). IMS_EINVAL when out is too small.
 */
int ds_classes_path_for_list(const char *lst_path, char *out, size_t outlen,
			     ims_error *err);

/*
 * The classes file beside a list (ds_classes_path_for_list), when there:
 * 1 with its path in out, 0 when nothing is at that name (or the name is
 * too long for out). A file there that cannot be read is 1: reading it
 * (ds_classes_read) then says why, instead of the list going without its
 * class names. IMS_EIO when what is there cannot be told (a folder on
 * the way that cannot be searched), the cause in err.
 */
int ds_classes_beside_list(const char *lst_path, char *out, size_t outlen,
			   ims_error *err);

/* Options for ds_scan_folder. */
typedef struct ds_scan_opts {
	/* Comma-separated extensions, matched case-insensitively against the
	 * end of file names, each with a leading dot (one is assumed when
	 * missing); NULL means ".jpg,.jpeg,.png". */
	const char *exts;
	/* When 0: one class per immediate subfolder of root, files directly in
	 * each subfolder only (files in nested folders are ignored and
	 * counted). Every subfolder is a class, even one without a matching
	 * file (counted in empty_classes), so labels are the sorted folder
	 * index. When 1, im2rec's rule: walk the tree in sorted order, a
	 * folder's files before its subfolders; a folder gets the next label
	 * the first time it holds a matching file, and its path relative to
	 * root is the class name (`Aves/Anas platyrhynchos`). Folders without
	 * a matching file get no label. */
	int recursive;
} ds_scan_opts;

/* What a scan skipped, for the log. */
typedef struct ds_scan_report {
	size_t ignored_files;   /* files whose extension did not match, and
				 * other entries that are no regular file */
	size_t special_files;   /* entries whose name matches that are no
				 * regular file (FIFOs, sockets, devices,
				 * links to one) */
	char special_first[4096]; /* the first of them, relative to root
				   * ("" when none; raw bytes) */
	size_t broken_links;    /* links whose target is missing or loops */
	size_t link_loops;      /* links to a folder being walked (an
				 * ancestor, or the folder itself): not
				 * walked again */
	char loop_first[4096];  /* the first of them, relative to root
				 * ("" when none; raw bytes) */
	size_t ignored_nested;  /* matching files in nested folders (non-recursive) */
	size_t empty_classes;   /* subfolders holding no matching file */
	size_t loose_files;     /* matching files directly in root (no class) */
	size_t unlistable;      /* matching files whose names hold a TAB or
				 * a line break, which a list row cannot
				 * store */
	char unlistable_first[4096]; /* the first of them, relative to root
				      * ("" when none; raw bytes: escape it
				      * before printing) */
} ds_scan_report;

/*
 * Lists root as one class per subfolder. Labels follow byte-wise sorted
 * folder names, 0-based (walk order with opts->recursive, see
 * ds_scan_opts); rows are in sorted order (class, then file name)
 * with index = row number and path = "class/file". Names starting with '.'
 * are skipped; symbolic links are followed, except a link back to a folder
 * being walked. Matching files directly in root belong to no class
 * (counted in loose_files), in either mode. l must be empty; fills l
 * (items and classes) and *report (may be NULL). A root with no class
 * folder or no image is an error (IMS_ENOTFOUND; IMS_EIO when a folder
 * cannot be read; IMS_EINVAL for a bad extension list, and for two class
 * folders that are one folder through links, whose images would be listed
 * under two labels); on error l is left empty.
 */
int ds_scan_folder(const char *root, const ds_scan_opts *opts, ds_list *l,
		   ds_scan_report *report, ims_error *err);

/* Checks an extension list as ds_scan_opts.exts takes it (for option
 * parsing before a scan): 0, or IMS_EINVAL saying what is wrong. */
int ds_scan_check_exts(const char *exts, ims_error *err);

/*
 * Stratified split: within each class, shuffles the rows with seed and
 * gives round(n * test_ratio) to test, round(n * val_ratio) to val and the
 * rest to train (a class keeps at least one train row when it has one:
 * val gives up rows first, then test). Outputs keep the input's relative
 * order and its classes. test and val may be NULL when their ratio is 0.
 * Ratios must be in [0, 1) and sum < 1 (IMS_EINVAL). train, val and test
 * must be empty lists distinct from in; on error they are left empty.
 * A class's rows depend only on (seed, label, that class's rows).
 */
int ds_split(const ds_list *in, double val_ratio, double test_ratio,
	     uint64_t seed, ds_list *train, ds_list *val, ds_list *test,
	     ims_error *err);

/* The rule for the val and test shares that `imshard convert`, the
 * adapters and the Python module apply alike: each in [0, 1), and their
 * sum below 1. 0, or IMS_EINVAL with one of "--val-ratio must be in
 * [0, 1), got 1", "--test-ratio must be in [0, 1), got -0.5", "--val-ratio
 * plus --test-ratio must be below 1, got 0.5 + 0.5" (callers prefix what
 * they split). */
int ds_check_split_ratios(double val_ratio, double test_ratio, ims_error *err);

/* The fewest rows a class needs for ds_split to give a share of ratio
 * (0 < ratio < 1) one of them, the other share 0: shares are rounded
 * per class, so a small ratio of small classes gives none, and a class
 * keeps one train row. 0 for a ratio outside (0, 1). */
size_t ds_split_class_needs(double ratio);

/* Shuffles rows in place (Fisher-Yates with seed); the index column
 * moves with its row. */
void ds_list_shuffle(ds_list *l, uint64_t seed);

/* Per-class outcome of a subset. */
typedef struct ds_subset_report {
	size_t n_classes;
	size_t *wanted;    /* per class, malloc'd; free with ds_subset_report_release */
	size_t *available;
	size_t *taken;
	size_t short_classes; /* classes where available < wanted */
} ds_subset_report;

/* Frees the arrays and zeroes *r; r may be NULL. */
void ds_subset_report_release(ds_subset_report *r);

/*
 * Class-balanced subset: per_class rows from each class (or, when
 * per_class is 0, total rows divided evenly, the remainder going one each
 * to the lowest labels; both 0 is IMS_EINVAL). Rows are chosen by a seeded
 * shuffle within each class; output keeps the input order and gets in's
 * class names. A class with fewer rows than wanted is an error
 * (IMS_ENOTFOUND listing the classes) unless allow_short, in which case
 * all its rows are taken. *report (may be NULL) gets the counts either
 * way. The number of classes is max(n_classes, max label+1). out must be
 * an empty list distinct from in; on error it is left empty. For one
 * seed, a smaller per_class picks a subset of what a larger one picks.
 */
int ds_subset(const ds_list *in, size_t per_class, size_t total,
	      uint64_t seed, int allow_short, ds_list *out,
	      ds_subset_report *report, ims_error *err);

/* Number of classes: max(n_classes, max label + 1). */
size_t ds_list_num_classes(const ds_list *l);

/* Rows that name an image an earlier row of the list already names. */
typedef struct ds_repeats {
	size_t rows;       /* rows whose path an earlier row's names */
	size_t relabelled; /* of them, rows whose label differs from the
			      first row naming that path */
	size_t first;      /* the first such row (SIZE_MAX when none) */
	size_t first_of;   /* the earlier row it repeats (SIZE_MAX when none) */
} ds_repeats;

/*
 * Finds the rows of l that repeat an earlier row's path. Paths are
 * compared as written, up to "." components and repeated slashes
 * ("./a//b.jpg" is "a/b.jpg"); an absolute and a relative path to one file
 * differ here. A list read from a file keeps such rows (each is packed as
 * often as it is listed: oversampling may be meant), so callers say how
 * many there are. Memory: a pointer and an index per row. IMS_ENOMEM.
 */
int ds_list_find_repeats(const ds_list *l, ds_repeats *r, ims_error *err);

/* ------------------------------------------------------------------------
 * How large a label may be (labels.c).
 *
 * A label is a class id, and what follows a list sizes itself by the
 * largest one: the manifest names a class for every label up to it, the
 * trainer's last layer has that many outputs. So a list's labels are
 * bounded before anything is allocated for them:
 *  - with max_label N (0..DS_LABEL_CEILING; `--max-label N`): labels up
 *    to N;
 *  - else, when the list has class names: labels 0 .. n_classes-1 (a
 *    label without a name means the names belong to another list);
 *  - else: labels below max(DS_LABEL_FREE, DS_LABEL_SPREAD x the number
 *    of distinct labels in the list), so a list that uses a few hundred
 *    of ImageNet's 1,000 labels passes, and one stray 99999999 does not.
 * Never above DS_LABEL_CEILING. Counting distinct labels takes memory per
 * row (a hash set), never per possible label.
 * ------------------------------------------------------------------------ */

#define DS_LABEL_FREE 1024       /* labels below this need no declaration */
#define DS_LABEL_SPREAD 16       /* ... nor labels below 16 x distinct labels */
/* The largest label accepted at all: about a million classes, far more
 * than any image classification dataset (ImageNet-21k: 21,841), while a
 * manifest naming them all stays under ~30 MB. */
#define DS_LABEL_CEILING 1048575
#define DS_LABEL_AUTO (-1)       /* max_label: the rule above */
#define DS_LABEL_ANY (-2)        /* max_label: any label in 0..INT32_MAX */

/* Why a bound is what it is (for the message). */
typedef enum ds_bound_why {
	DS_BOUND_ANY,       /* DS_LABEL_ANY */
	DS_BOUND_MAX_LABEL, /* the caller's max_label */
	DS_BOUND_CLASSES,   /* the list's class names */
	DS_BOUND_SPREAD,    /* distinct labels of the list */
	DS_BOUND_CEILING    /* DS_LABEL_CEILING */
} ds_bound_why;

typedef struct ds_label_bound {
	int64_t limit;      /* the largest label accepted */
	ds_bound_why why;
	size_t n_classes;   /* the list's class names */
	size_t distinct;    /* distinct labels (DS_BOUND_SPREAD only) */
} ds_label_bound;

/* Distinct non-negative labels of l's rows. IMS_ENOMEM. */
int ds_list_distinct_labels(const ds_list *l, size_t *distinct,
			    ims_error *err);

/* The bound for l's labels under max_label (DS_LABEL_AUTO, DS_LABEL_ANY or
 * 0..DS_LABEL_CEILING; IMS_EINVAL otherwise). IMS_ENOMEM. */
int ds_label_limit(const ds_list *l, int64_t max_label, ds_label_bound *b,
		   ims_error *err);

/* Fills err with why label is past b ("label 99999999 is far beyond the
 * 1 distinct label of the list ..."), without naming a row: callers
 * prefix the file and line or the row. Returns IMS_EINVAL. */
int ds_label_refuse(const ds_label_bound *b, int32_t label, ims_error *err);

/* Checks the labels of rows first .. count-1 against the bound for the
 * whole list under max_label. 0, or IMS_EINVAL with the first bad row in
 * *bad_row (may be NULL) and ds_label_refuse's message; IMS_ENOMEM. */
int ds_list_check_labels(const ds_list *l, size_t first, int64_t max_label,
			 size_t *bad_row, ims_error *err);

/* Rows per label; counts must hold ds_list_num_classes(l) entries. */
void ds_list_class_counts(const ds_list *l, size_t *counts);

/* ------------------------------------------------------------------------
 * The built-in sample dataset (sample.c)
 *
 * A small, learnable image dataset drawn procedurally, one visual concept
 * per class: a filled circle, horizontal stripes, a star, a checkerboard...
 * It is written as class folders, OUTDIR/<class>/<class>_<index>.jpg|.png,
 * which ds_scan_folder and `imshard list` read like any folder dataset. It
 * is the default data of the demo and of many tests.
 *
 * What varies within a class: image size (DS_SAMPLE_MIN_SIDE to
 * DS_SAMPLE_MAX_SIDE, width and height drawn independently, aspect ratio
 * at most 2), background colour and gradient, foreground colour, position,
 * scale, rotation (within the class's range), line widths, periods, phase
 * and noise. The foreground differs from the background everywhere by at
 * least 80 grey levels of luma (black or white in the rare cases where no
 * colour does), so shapes survive greyscale. What defines
 * a class survives flips, crops, zoom, shift, rotations of a few degrees
 * and JPEG compression: shapes lie whole inside the central square of the
 * image (so a centre crop keeps them) and span 40-90% of its side;
 * textures fill the image. Classes that are mirror images of each other
 * are one class (diagonal stripes lean either way).
 *
 * Determinism: image (seed, class k, index i) depends on nothing else: not
 * on the number of classes or images, the thread count or the order of
 * generation. With the same build and libraries its bytes are identical
 * (pixels use libm's sin/cos, so another libm may differ in a grey level).
 *
 * Classes: class k is always the same kind; a dataset of N classes holds
 * kinds 0..N-1. Class names are lowercase ASCII words in byte-wise sorted
 * order, so label k of ds_scan_folder on the output is class k here.
 *
 * Files: index i (0-based, printed with at least 4 digits) is a colour
 * JPEG at quality 90, except: i % 5 == 4 is a colour PNG, of which
 * i % 20 == 9 is an RGBA PNG (partly transparent background, opaque
 * shape); i % 20 == 7 is a greyscale JPEG. With 40 per class: 30 colour
 * JPEG, 2 grey JPEG, 6 colour PNG, 2 RGBA PNG.
 *
 * Caveats: every function is reentrant and may be called from any thread;
 * ds_sample_write starts its own worker threads (POSIX threads) and joins
 * them before returning. It calls the progress callback on the calling
 * thread only.
 * ------------------------------------------------------------------------ */

struct aug_image;
struct aug_codec;

#define DS_SAMPLE_MIN_SIDE 64     /* smallest image width or height */
#define DS_SAMPLE_MAX_SIDE 400    /* largest; most images are at most 256 */
#define DS_SAMPLE_MIN_CLASSES 2
#define DS_SAMPLE_DEFAULT_CLASSES 10
#define DS_SAMPLE_DEFAULT_PER_CLASS 40
#define DS_SAMPLE_MAX_PER_CLASS 100000
#define DS_SAMPLE_JPEG_QUALITY 90

/* Number of class kinds (at least 16). */
int ds_sample_class_count_max(void);

/* Name of class k ("circle"), or NULL when k is out of range. Static. */
const char *ds_sample_class_name(int k);

/* One-line description of class k ("filled disc"), or NULL. Static. */
const char *ds_sample_class_description(int k);

/* How image index i of any class is stored (see "Files" above). */
typedef enum ds_sample_file_kind {
	DS_SAMPLE_JPEG = 0,       /* colour JPEG, 3 channels */
	DS_SAMPLE_JPEG_GREY = 1,  /* greyscale JPEG, 1 channel */
	DS_SAMPLE_PNG = 2,        /* colour PNG, 3 channels */
	DS_SAMPLE_PNG_ALPHA = 3   /* RGBA PNG, 4 channels */
} ds_sample_file_kind;

ds_sample_file_kind ds_sample_file_kind_of(int index);

/* Channels ds_sample_render gives for a file kind: 3, 1, 3 or 4. */
int ds_sample_file_channels(ds_sample_file_kind kind);

/*
 * File name of image index of class k, "<class>_<index:04d>.jpg" or
 * ".png" (e.g. "circle_0004.png"), into buf of size len.
 * Returns 0, IMS_EINVAL (k or index out of range) or IMS_ELIMIT (buf too
 * small).
 */
int ds_sample_file_name(int k, int index, char *buf, size_t len,
			ims_error *err);

/*
 * Draws image (seed, k, index) into out, an aug_image (augment.h) that is
 * (re)allocated by aug_image_alloc to the image's size with the channels
 * of its file kind. out is caller-owned: zero it before the first use,
 * reuse it for many images, release it with aug_image_release.
 * k in [0, ds_sample_class_count_max()), index in
 * [0, DS_SAMPLE_MAX_PER_CLASS). Returns 0, IMS_EINVAL or IMS_ENOMEM.
 */
int ds_sample_render(uint64_t seed, int k, int index, struct aug_image *out,
		     ims_error *err);

/*
 * Draws image (seed, k, index) into scratch (as ds_sample_render) and
 * encodes it in its file kind's format into out (an ims_buf; out->len is
 * set, earlier contents replaced). codec is the caller's aug_codec (one
 * per thread). These are exactly the bytes ds_sample_write writes.
 */
int ds_sample_encode(struct aug_codec *codec, uint64_t seed, int k,
		     int index, struct aug_image *scratch, ims_buf *out,
		     ims_error *err);

/* Called with the number of images written so far and the total. */
typedef void (*ds_sample_progress_fn)(void *ctx, uint64_t done,
				      uint64_t total);

typedef struct ds_sample_opts {
	int classes;    /* DS_SAMPLE_MIN_CLASSES..ds_sample_class_count_max() */
	int per_class;  /* 1..DS_SAMPLE_MAX_PER_CLASS */
	uint64_t seed;  /* any value; 0 is the default */
	/* When 0, outdir must be missing or empty. When 1, class folders of
	 * an earlier sample in outdir are replaced (all of them, also classes
	 * beyond this run's count); other files there are left alone; other
	 * folders, or files in a class folder that the sample did not write,
	 * are refused (they would become classes or images). */
	int force;
	int threads;    /* worker threads; 0 = one per online CPU, at most 32 */
	/* When non-NULL and it becomes non-zero (a signal handler's flag),
	 * workers stop and ds_sample_write returns IMS_EINTR. */
	volatile int *cancel;
	ds_sample_progress_fn progress; /* may be NULL */
	void *progress_ctx;
} ds_sample_opts;

/* Fills o with the defaults: 10 classes, 40 per class, seed 0, no force,
 * threads 0, no cancel flag, no progress. */
void ds_sample_opts_init(ds_sample_opts *o);

/* What ds_sample_write wrote. */
typedef struct ds_sample_report {
	int classes;
	uint64_t images;
	uint64_t jpeg, png;   /* images per format (png includes RGBA) */
	uint64_t bytes;       /* total size of the image files */
	double seconds;       /* wall time */
} ds_sample_report;

/*
 * Writes the sample dataset to outdir (created with its parents when
 * missing). Images are written into the hidden folder
 * outdir/.imshard-sample.tmp, and the class folders are moved into
 * outdir only once every image is written: a failed or interrupted run
 * leaves no class folder behind (its hidden folder is removed then, or
 * by the next run), nor the folders it made (outdir and its parents,
 * when empty). report (may be NULL) is filled on success.
 *
 * Returns 0; IMS_EINVAL (options out of range), IMS_EEXIST (outdir not
 * empty without force, or holding something force may not replace; the
 * message names it), IMS_EIO (cannot create or write; errno's text in the
 * message), IMS_ENOMEM, IMS_EINTR (cancelled), or a codec error.
 */
int ds_sample_write(const char *outdir, const ds_sample_opts *o,
		    ds_sample_report *report, ims_error *err);


/* ------------------------------------------------------------------------
 * Dataset adapters: one per on-disk layout (datasets/ds_<name>.c), behind
 * this one interface. An adapter reads a downloaded dataset's layout and
 * produces its splits as lists plus the class names; it never reads image
 * pixels and knows nothing of LMDB. `imshard convert` subsets the lists
 * and packs them through the one packing path (pack/pack.h).
 *
 * Caveats: adapters are reentrant; a ds_dataset is used by one thread.
 * ------------------------------------------------------------------------ */

/* Options every adapter receives; each uses the ones that apply to it and
 * ignores the rest (the command rejects options a dataset does not take). */
typedef struct ds_convert_opts {
	double val_ratio;    /* folder, caltech256, fruits: stratified
				validation share in [0, 1) (< 0 = the adapter's
				default: 0.2 for caltech256, 0 otherwise) */
	double test_ratio;   /* folder: stratified test share in [0, 1)
				(0 = none); val + test below 1, as
				ds_check_split_ratios says */
	int no_clutter;      /* caltech256: drop 257.clutter (256 classes) */
	const char *label;   /* inat2017: "species" (default when NULL) or
				"supercategory" */
	const char *keep_classes; /* inat2017: comma-separated names of the
				     classes to keep (NULL = all); labels are
				     renumbered densely, in sorted name order
				     for supercategories and in category id
				     order for species */
	int recursive;       /* folder: im2rec's recursive rule */
	const char *exts;    /* folder: extensions (NULL = .jpg,.jpeg,.png) */
	uint64_t seed;       /* for splits the adapter makes */
} ds_convert_opts;

/* Fills o with the defaults (val_ratio -1, everything else 0/NULL). */
void ds_convert_opts_init(ds_convert_opts *o);

#define DS_MAX_SPLITS 4

typedef struct ds_split_list {
	char name[16];   /* "train", "val", "test" */
	ds_list list;    /* rows (paths relative to the dataset root) and, in
			    list.classes, the dataset's class names (the same
			    in every split: label i = class i everywhere) */
} ds_split_list;

typedef struct ds_dataset {
	ds_split_list splits[DS_MAX_SPLITS];
	int n_splits;
	/* Things the adapter ignored or worked around, one line each, for
	 * the summary: "ignored non-image file '198.spider/RENAME2'". */
	char **notes;
	size_t n_notes;
	/* Rows are not image files but records inside the dataset's own
	 * files (CIFAR-10 batches): paths are "FILE#RECORD" and are read with
	 * the adapter's read_row. 0 for ordinary one-file-per-image datasets. */
	int rows_are_records;
	const struct ds_adapter *adapter; /* set by ds_adapter_load */
} ds_dataset;

/* Frees everything d owns and zeroes it. NULL and zeroed are fine. */
void ds_dataset_release(ds_dataset *d);

/* Adds a split named name (empty list) and returns it, or NULL when out of
 * memory or DS_MAX_SPLITS are taken. */
ds_split_list *ds_dataset_add_split(ds_dataset *d, const char *name);

/* Appends a note (printf-style). Returns 0 or IMS_ENOMEM. */
int ds_dataset_note(ds_dataset *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Raw pixels of one record-row (rows_are_records datasets). */
typedef struct ds_pixels {
	int width, height, channels; /* interleaved, rows top-first */
} ds_pixels;

typedef struct ds_adapter {
	const char *name;    /* "caltech256" */
	const char *summary; /* one line for --help */
	/* Reads the layout under root into *out (zeroed by the caller).
	 * Errors name the file (and line/offset) at fault. */
	int (*load)(const char *root, const ds_convert_opts *o, ds_dataset *out,
		    ims_error *err);
	/* rows_are_records datasets only: reads row e (path "FILE#RECORD",
	 * FILE relative to root) as raw pixels into *data (malloc'd/grown:
	 * *cap bytes at *data), filling *px. Thread-safe. */
	int (*read_row)(const char *root, const ds_entry *e, uint8_t **data,
			size_t *cap, ds_pixels *px, ims_error *err);
} ds_adapter;

/* The adapters, NULL-terminated, in the order --help lists them. */
const ds_adapter *const *ds_adapters(void);

/* The adapter called name, or NULL. */
const ds_adapter *ds_adapter_find(const char *name);

/* Built-in adapters (each in its own file). */
extern const ds_adapter ds_adapter_folder;
extern const ds_adapter ds_adapter_caltech256;
extern const ds_adapter ds_adapter_fruits;
extern const ds_adapter ds_adapter_inat2017;
extern const ds_adapter ds_adapter_cifar10;
extern const ds_adapter ds_adapter_imagenet;

#ifdef __cplusplus
}
#endif

#endif
