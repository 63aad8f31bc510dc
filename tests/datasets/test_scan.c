/*
 * test_scan.c - ds_scan_folder on trees that mirror the real layouts:
 * Caltech-256 (its non-image RENAME2, its empty nested folder), the
 * iNaturalist two-level tree with spaces and non-ASCII species names, the
 * fruits PNG screenshots with mixed-case extensions, hidden files, symbolic
 * links and link loops. Scanning never reads file contents, so the images
 * are empty files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/datasets.h"
#include "test.h"
#include "ds_test_util.h"

static char tmpdir[1024];

static void make_tmpdir(void)
{
	test_tmpdir(tmpdir, sizeof(tmpdir), "test_scan");
}

/* Creates tmpdir/rel (a file, or a folder when rel ends with '/'),
 * with its parents. */
static void touch(const char *rel)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
	for (char *s = p + strlen(tmpdir) + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST) {
			perror(p);
			exit(1);
		}
		*s = '/';
	}
	if (p[strlen(p) - 1] == '/')
		return;
	FILE *f = fopen(p, "wb");
	if (!f) {
		perror(p);
		exit(1);
	}
	fclose(f);
}

static void link_to(const char *target, const char *rel)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
	if (symlink(target, p) != 0) {
		perror(p);
		exit(1);
	}
}

static const char *at(const char *rel)
{
	static char p[4][4096];
	static int slot;
	char *b = p[slot++ % 4];
	snprintf(b, sizeof(p[0]), "%s/%s", tmpdir, rel);
	return b;
}

static void check_row(const ds_list *l, size_t i, int32_t label,
		      const char *path)
{
	CHECK(i < l->count);
	if (i >= l->count)
		return;
	CHECK_EQ_U64(l->items[i].index, i);
	CHECK_EQ_INT(l->items[i].label, label);
	CHECK_EQ_STR(l->items[i].path, path);
	CHECK_EQ_INT(l->items[i].n_extra, 0);
}

static void test_caltech(void)
{
	/* Created out of order: the scan must sort. */
	touch("caltech/256_ObjectCategories/257.clutter/257_0002.jpg");
	touch("caltech/256_ObjectCategories/257.clutter/257_0001.jpg");
	touch("caltech/256_ObjectCategories/001.ak47/001_0010.jpg");
	touch("caltech/256_ObjectCategories/001.ak47/001_0001.jpg");
	touch("caltech/256_ObjectCategories/001.ak47/001_0002.jpg");
	touch("caltech/256_ObjectCategories/015.bonsai-101/015_0001.jpg");
	touch("caltech/256_ObjectCategories/056.dog/056_0001.jpg");
	touch("caltech/256_ObjectCategories/056.dog/greg/vision309/");
	touch("caltech/256_ObjectCategories/198.spider/198_0001.jpg");
	touch("caltech/256_ObjectCategories/198.spider/RENAME2");
	/* Hidden entries a copied dataset picks up: skipped, not counted. */
	touch("caltech/256_ObjectCategories/.DS_Store");
	touch("caltech/256_ObjectCategories/001.ak47/._001_0001.jpg");
	touch("caltech/256_ObjectCategories/.thumbnails/x.jpg");

	ims_error err;
	ds_list l;
	ds_list_init(&l);
	ds_scan_report rep;
	CHECK_OK(ds_scan_folder(at("caltech/256_ObjectCategories"), NULL, &l, &rep, &err),
		 &err);
	CHECK_EQ_INT(l.n_classes, 5);
	if (l.n_classes == 5) {
		CHECK_EQ_STR(l.classes[0], "001.ak47");
		CHECK_EQ_STR(l.classes[1], "015.bonsai-101");
		CHECK_EQ_STR(l.classes[2], "056.dog");
		CHECK_EQ_STR(l.classes[3], "198.spider");
		CHECK_EQ_STR(l.classes[4], "257.clutter");
	}
	CHECK_EQ_INT(l.count, 8);
	check_row(&l, 0, 0, "001.ak47/001_0001.jpg");
	check_row(&l, 1, 0, "001.ak47/001_0002.jpg");
	check_row(&l, 2, 0, "001.ak47/001_0010.jpg");
	check_row(&l, 3, 1, "015.bonsai-101/015_0001.jpg");
	check_row(&l, 4, 2, "056.dog/056_0001.jpg");
	check_row(&l, 5, 3, "198.spider/198_0001.jpg");
	check_row(&l, 6, 4, "257.clutter/257_0001.jpg");
	check_row(&l, 7, 4, "257.clutter/257_0002.jpg");
	CHECK_EQ_INT(rep.ignored_files, 1);  /* RENAME2 */
	CHECK_EQ_INT(rep.ignored_nested, 0); /* greg/vision309 is empty */
	CHECK_EQ_INT(rep.empty_classes, 0);
	CHECK_EQ_INT(rep.loose_files, 0);
	size_t counts[5];
	ds_list_class_counts(&l, counts);
	CHECK_EQ_INT(counts[0], 3);
	CHECK_EQ_INT(counts[4], 2);

	/* The output list must be empty. */
	CHECK_EQ_INT(ds_scan_folder(at("caltech/256_ObjectCategories"), NULL, &l, NULL, &err),
		     IMS_EINVAL);
	ds_list_release(&l);

	/* Recursive: every folder with an image is a class; greg/vision309
	 * holds none, so the classes are the same. */
	ds_scan_opts ro = {NULL, 1};
	CHECK_OK(ds_scan_folder(at("caltech/256_ObjectCategories"), &ro, &l, &rep, &err), &err);
	CHECK_EQ_INT(l.n_classes, 5);
	CHECK_EQ_INT(l.count, 8);
	check_row(&l, 7, 4, "257.clutter/257_0002.jpg");
	CHECK_EQ_INT(rep.ignored_files, 1);
	ds_list_release(&l);
}

static void test_nested_counted(void)
{
	/* Non-recursive: images below a class folder are counted, not listed. */
	touch("nested/n01440764/n01440764_10026.JPEG");
	touch("nested/n01440764/extra/n01440764_1.JPEG");
	touch("nested/n01440764/extra/deeper/n01440764_2.jpeg");
	touch("nested/n01440764/extra/deeper/notes.txt");
	touch("nested/n01443537/n01443537_2.JPEG");
	touch("nested/empty_class/");
	touch("nested/loose.jpg");
	touch("nested/README");

	ims_error err;
	ds_list l;
	ds_list_init(&l);
	ds_scan_report rep;
	CHECK_OK(ds_scan_folder(at("nested"), NULL, &l, &rep, &err), &err);
	CHECK_EQ_INT(l.n_classes, 3);
	if (l.n_classes == 3) {
		CHECK_EQ_STR(l.classes[0], "empty_class"); /* 'e' < 'n' */
		CHECK_EQ_STR(l.classes[1], "n01440764");
		CHECK_EQ_STR(l.classes[2], "n01443537");
	}
	CHECK_EQ_INT(l.count, 2);
	check_row(&l, 0, 1, "n01440764/n01440764_10026.JPEG");
	check_row(&l, 1, 2, "n01443537/n01443537_2.JPEG");
	CHECK_EQ_INT(rep.ignored_nested, 2);
	CHECK_EQ_INT(rep.ignored_files, 2); /* notes.txt, README */
	CHECK_EQ_INT(rep.empty_classes, 1);
	CHECK_EQ_INT(rep.loose_files, 1);
	CHECK_EQ_INT(ds_list_num_classes(&l), 3); /* the empty class keeps label 0 */
	ds_list_release(&l);

	/* Recursive (im2rec): folders get labels in walk order, a folder's
	 * files before its subfolders; loose files in root are no class. */
	ds_scan_opts ro = {NULL, 1};
	CHECK_OK(ds_scan_folder(at("nested"), &ro, &l, &rep, &err), &err);
	CHECK_EQ_INT(l.n_classes, 4);
	if (l.n_classes == 4) {
		CHECK_EQ_STR(l.classes[0], "n01440764");
		CHECK_EQ_STR(l.classes[1], "n01440764/extra");
		CHECK_EQ_STR(l.classes[2], "n01440764/extra/deeper");
		CHECK_EQ_STR(l.classes[3], "n01443537");
	}
	CHECK_EQ_INT(l.count, 4);
	check_row(&l, 0, 0, "n01440764/n01440764_10026.JPEG");
	check_row(&l, 1, 1, "n01440764/extra/n01440764_1.JPEG");
	check_row(&l, 2, 2, "n01440764/extra/deeper/n01440764_2.jpeg");
	check_row(&l, 3, 3, "n01443537/n01443537_2.JPEG");
	CHECK_EQ_INT(rep.loose_files, 1);
	CHECK_EQ_INT(rep.ignored_files, 2);
	CHECK_EQ_INT(rep.ignored_nested, 0);
	ds_list_release(&l);
}

static void test_walk_order(void)
{
	/* '-' (0x2D) < '/' < '0' (0x30): walk order is not sorted class-name
	 * order, exactly as in im2rec's os.walk. */
	touch("walk/a/x.jpg");
	touch("walk/a/b/y.jpg");
	touch("walk/a-b/z.jpg");
	touch("walk/a0/w.jpg");
	touch("walk/only_sub/inner/v.jpg");
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	ds_scan_opts ro = {NULL, 1};
	CHECK_OK(ds_scan_folder(at("walk"), &ro, &l, NULL, &err), &err);
	const char *want[] = {"a", "a/b", "a-b", "a0", "only_sub/inner"};
	CHECK_EQ_INT(l.n_classes, 5);
	for (size_t i = 0; i < 5 && i < l.n_classes; i++)
		CHECK_EQ_STR(l.classes[i], want[i]);
	check_row(&l, 0, 0, "a/x.jpg");
	check_row(&l, 1, 1, "a/b/y.jpg");
	check_row(&l, 2, 2, "a-b/z.jpg");
	check_row(&l, 3, 3, "a0/w.jpg");
	check_row(&l, 4, 4, "only_sub/inner/v.jpg");
	ds_list_release(&l);
}

static void test_inat_names(void)
{
	/* Species folders with spaces and UTF-8; byte order puts "Anas z"
	 * before "Anas é" (0x7A < 0xC3), whatever the locale says. */
	touch("inat/train_val_images/Aves/Anas superciliosa × platyrhynchos/"
	      "2e1ed50aaf2b4f0c9a7cfa2b0c5e7d4d.jpg");
	touch("inat/train_val_images/Aves/Anas platyrhynchos/0a.jpg");
	touch("inat/train_val_images/Aves/Anas platyrhynchos/0b.jpg");
	touch("inat/train_val_images/Aves/Anas z/1.jpg");
	touch("inat/train_val_images/Aves/Anas é/1.jpg");
	touch("inat/train_val_images/Plantae/Acer rubrum/ff.jpg");
	touch("inat/train_val_images/Insecta/Danaus plexippus/aa.jpg");

	ims_error err;
	ds_list l;
	ds_list_init(&l);
	ds_scan_report rep;
	/* Non-recursive on the two-level tree: supercategories are classes
	 * but every image is nested: nothing to list. */
	CHECK_EQ_INT(ds_scan_folder(at("inat/train_val_images"), NULL, &l, &rep, &err),
		     IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "none of its 3 class folders holds a file matching "
			      ".jpg,.jpeg,.png") != NULL);
	CHECK_EQ_INT(rep.ignored_nested, 7);
	CHECK_EQ_INT(rep.empty_classes, 3);
	CHECK_EQ_INT(l.count, 0);
	CHECK_EQ_INT(l.n_classes, 0); /* left empty on error */

	/* Non-recursive one level down: species are classes. */
	CHECK_OK(ds_scan_folder(at("inat/train_val_images/Aves"), NULL, &l, &rep, &err), &err);
	const char *aves[] = {"Anas platyrhynchos", "Anas superciliosa × platyrhynchos",
			      "Anas z", "Anas é"};
	CHECK_EQ_INT(l.n_classes, 4);
	for (size_t i = 0; i < 4 && i < l.n_classes; i++)
		CHECK_EQ_STR(l.classes[i], aves[i]);
	check_row(&l, 2, 1,
		  "Anas superciliosa × platyrhynchos/2e1ed50aaf2b4f0c9a7cfa2b0c5e7d4d.jpg");
	check_row(&l, 4, 3, "Anas é/1.jpg");
	ds_list_release(&l);

	/* Recursive: class names are paths under root. */
	ds_scan_opts ro = {NULL, 1};
	CHECK_OK(ds_scan_folder(at("inat/train_val_images"), &ro, &l, &rep, &err), &err);
	const char *all[] = {"Aves/Anas platyrhynchos", "Aves/Anas superciliosa × platyrhynchos",
			     "Aves/Anas z", "Aves/Anas é", "Insecta/Danaus plexippus",
			     "Plantae/Acer rubrum"};
	CHECK_EQ_INT(l.n_classes, 6);
	for (size_t i = 0; i < 6 && i < l.n_classes; i++)
		CHECK_EQ_STR(l.classes[i], all[i]);
	CHECK_EQ_INT(l.count, 7);
	check_row(&l, 0, 0, "Aves/Anas platyrhynchos/0a.jpg");
	check_row(&l, 6, 5, "Plantae/Acer rubrum/ff.jpg");
	ds_list_release(&l);
}

static void test_extensions(void)
{
	touch("fruits/dataset/train/freshapples/Screen Shot 2018-06-08 at 4.59.36 PM.png");
	touch("fruits/dataset/train/freshapples/rotated_by_15_Screen Shot 2018-06-08 at 4.59.36 PM.png");
	touch("fruits/dataset/train/freshbanana/a.PNG");
	touch("fruits/dataset/train/rottenoranges/b.Png");
	touch("fruits/dataset/train/rottenoranges/c.JPEG");
	touch("fruits/dataset/train/rottenoranges/d.jpeg.txt");
	touch("fruits/dataset/train/rottenoranges/png"); /* no dot: not ".png" */

	ims_error err;
	ds_list l;
	ds_list_init(&l);
	ds_scan_report rep;
	/* Default extensions: .jpg, .jpeg, .png in any case. */
	CHECK_OK(ds_scan_folder(at("fruits/dataset/train"), NULL, &l, &rep, &err), &err);
	CHECK_EQ_INT(l.count, 5);
	check_row(&l, 0, 0,
		  "freshapples/Screen Shot 2018-06-08 at 4.59.36 PM.png");
	check_row(&l, 1, 0,
		  "freshapples/rotated_by_15_Screen Shot 2018-06-08 at 4.59.36 PM.png");
	check_row(&l, 2, 1, "freshbanana/a.PNG");
	check_row(&l, 3, 2, "rottenoranges/b.Png");
	check_row(&l, 4, 2, "rottenoranges/c.JPEG");
	CHECK_EQ_INT(rep.ignored_files, 2);
	ds_list_release(&l);

	/* Only PNG, given in upper case and without the dot. */
	ds_scan_opts po = {"PNG", 0};
	CHECK_OK(ds_scan_folder(at("fruits/dataset/train"), &po, &l, &rep, &err), &err);
	CHECK_EQ_INT(l.count, 4);
	CHECK_EQ_INT(rep.ignored_files, 3);
	ds_list_release(&l);

	ds_scan_opts jo = {".jpeg, .txt", 0};
	CHECK_OK(ds_scan_folder(at("fruits/dataset/train"), &jo, &l, &rep, &err), &err);
	CHECK_EQ_INT(l.count, 2);
	check_row(&l, 1, 2, "rottenoranges/d.jpeg.txt");
	ds_list_release(&l);

	const char *bad[] = {"", ".jpg,,.png", ".jpg,", ".", "a/b"};
	for (int i = 0; i < 5; i++) {
		ds_scan_opts bo = {bad[i], 0};
		CHECK_EQ_INT(ds_scan_folder(at("fruits/dataset/train"), &bo, &l, NULL, &err),
			     IMS_EINVAL);
		CHECK(strstr(err.msg, "invalid extension list") != NULL);
		CHECK_EQ_INT(ds_scan_check_exts(bad[i], &err), IMS_EINVAL);
	}
	CHECK_OK(ds_scan_check_exts(".jpg,.jpeg,.png", &err), &err);
	CHECK_EQ_INT(l.count, 0);
}

static void test_links(void)
{
	touch("links/real/cat/1.jpg");
	touch("links/real/cat/2.jpg");
	touch("links/root/bird/1.jpg");
	touch("links/shared/dog_images/d1.jpg");
	link_to("../real/cat", "links/root/cat");          /* linked class folder */
	link_to("../../real/cat/1.jpg", "links/root/bird/2.jpg"); /* linked file */
	link_to("../shared/dog_images", "links/root/dog");
	link_to("..", "links/root/bird/up");                /* loop to root */
	link_to(".", "links/root/dog/self");                /* loop to itself */
	link_to("nowhere.jpg", "links/root/bird/3.jpg");    /* dangling */

	ims_error err;
	ds_list l;
	ds_list_init(&l);
	ds_scan_report rep;
	CHECK_OK(ds_scan_folder(at("links/root"), NULL, &l, &rep, &err), &err);
	CHECK_EQ_INT(l.n_classes, 3);
	CHECK_EQ_INT(l.count, 5);
	check_row(&l, 0, 0, "bird/1.jpg");
	check_row(&l, 1, 0, "bird/2.jpg");
	check_row(&l, 2, 1, "cat/1.jpg");
	check_row(&l, 3, 1, "cat/2.jpg");
	check_row(&l, 4, 2, "dog/d1.jpg");
	CHECK_EQ_INT(rep.ignored_files, 0);
	CHECK_EQ_INT(rep.broken_links, 1); /* the dangling link, counted as one */
	/* the loops are not walked, and counted and named (before: skipped
	 * without a word) */
	CHECK_EQ_INT(rep.link_loops, 2);
	CHECK_EQ_STR(rep.loop_first, "bird/up");
	ds_list_release(&l);

	ds_scan_opts ro = {NULL, 1};
	CHECK_OK(ds_scan_folder(at("links/root"), &ro, &l, &rep, &err), &err);
	CHECK_EQ_INT(l.n_classes, 3);
	CHECK_EQ_INT(l.count, 5);
	check_row(&l, 4, 2, "dog/d1.jpg");
	CHECK_EQ_INT(rep.link_loops, 2);
	CHECK_EQ_STR(rep.loop_first, "bird/up");
	ds_list_release(&l);

	/* a class folder that is root itself: no class, counted too */
	link_to(".", "links/root/again");
	CHECK_OK(ds_scan_folder(at("links/root"), NULL, &l, &rep, &err), &err);
	CHECK_EQ_INT(l.n_classes, 3);
	CHECK_EQ_INT(rep.link_loops, 3);
	CHECK_EQ_STR(rep.loop_first, "again");
	ds_list_release(&l);
	unlink(at("links/root/again"));

	/* A linked root works too. */
	link_to("root", "links/root-link");
	CHECK_OK(ds_scan_folder(at("links/root-link"), NULL, &l, &rep, &err), &err);
	CHECK_EQ_INT(l.count, 5);
	ds_list_release(&l);

	/* Two class folders that are one folder: its images would be listed
	 * under two labels (before: listed twice, silently). Refused in both
	 * modes, naming both, whether one links to the other or both to a
	 * third folder. */
	link_to("cat", "links/root/cat2");
	for (int recursive = 0; recursive < 2; recursive++) {
		ds_scan_opts o = {NULL, recursive};
		CHECK_EQ_INT(ds_scan_folder(at("links/root"), &o, &l, &rep, &err), IMS_EINVAL);
		CHECK(strstr(err.msg, "the class folders 'cat' and 'cat2' are one folder") != NULL);
		CHECK_EQ_INT(l.count, 0);
	}
	unlink(at("links/root/cat2"));
	link_to("../shared/dog_images", "links/root/puppy");
	CHECK_EQ_INT(ds_scan_folder(at("links/root"), NULL, &l, &rep, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "'dog' and 'puppy'") != NULL);
	unlink(at("links/root/puppy"));
	CHECK_OK(ds_scan_folder(at("links/root"), NULL, &l, &rep, &err), &err);
	ds_list_release(&l);
}

/*
 * An entry named like an image that is no regular file (a FIFO, a socket,
 * a link to one) is no image: skipped, counted apart and named, in either
 * mode (before: counted with the files whose extension did not match, so
 * the summary said 'fifo.jpg' did not match .jpg).
 */
static void test_special_files(void)
{
	touch("special/cat/1.jpg");
	touch("special/cat/notes.txt");
	touch("special/dog/1.jpg");
	char p[4096];
	snprintf(p, sizeof(p), "%s/special/cat/fifo.jpg", tmpdir);
	if (mkfifo(p, 0644) != 0) {
		perror(p);
		exit(1);
	}
	snprintf(p, sizeof(p), "%s/special/notes.fifo", tmpdir);
	if (mkfifo(p, 0644) != 0) {
		perror(p);
		exit(1);
	}
	link_to("../cat/fifo.jpg", "special/dog/2.jpg"); /* a link to one */
	for (int recursive = 0; recursive < 2; recursive++) {
		ims_error err;
		ds_list l;
		ds_list_init(&l);
		ds_scan_report rep;
		ds_scan_opts o = {NULL, recursive};
		CHECK_OK(ds_scan_folder(at("special"), &o, &l, &rep, &err), &err);
		CHECK_EQ_INT(l.count, 2);
		CHECK_EQ_INT(rep.special_files, 2);
		CHECK_EQ_STR(rep.special_first, "cat/fifo.jpg");
		CHECK_EQ_INT(rep.ignored_files, 2); /* notes.txt, notes.fifo */
		ds_list_release(&l);
	}
}

/* A file name a list row cannot hold (TAB, CR or LF in it) is skipped,
 * counted and named, in either mode; before, the list was written until
 * that row and the whole run failed, naming the temporary file. */
static void test_unlistable(void)
{
	touch("odd/cat/1.jpg");
	touch("odd/cat/a\tb.jpg");
	touch("odd/cat/line\nbreak.jpg");
	touch("odd/dog/2.jpg");
	for (int recursive = 0; recursive < 2; recursive++) {
		ims_error err;
		ds_list l;
		ds_list_init(&l);
		ds_scan_report rep;
		ds_scan_opts o = {NULL, recursive};
		CHECK_OK(ds_scan_folder(at("odd"), &o, &l, &rep, &err), &err);
		CHECK_EQ_INT(l.n_classes, 2);
		CHECK_EQ_INT(l.count, 2);
		check_row(&l, 0, 0, "cat/1.jpg");
		check_row(&l, 1, 1, "dog/2.jpg");
		CHECK_EQ_INT(rep.unlistable, 2);
		CHECK_EQ_STR(rep.unlistable_first, "cat/a\tb.jpg");
		ds_list_release(&l);
	}
	/* a class folder so named is refused, naming it: skipping it would
	 * shift every label after it (before: listed, then the write failed
	 * naming the temporary file) */
	touch("odd2/ca\nt/1.jpg");
	touch("odd2/dog/2.jpg");
	for (int recursive = 0; recursive < 2; recursive++) {
		ims_error err;
		ds_list l;
		ds_list_init(&l);
		ds_scan_opts o = {NULL, recursive};
		CHECK(ds_scan_folder(at("odd2"), &o, &l, NULL, &err) == IMS_EINVAL);
		CHECK(strstr(err.msg, "the class folder 'ca\nt' has a TAB or a line break") != NULL);
		CHECK_EQ_INT(l.count, 0);
		ds_list_release(&l);
	}
}

static void test_errors(void)
{
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	CHECK_EQ_INT(ds_scan_folder(at("does-not-exist"), NULL, &l, NULL, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "does-not-exist") != NULL);
	CHECK(strstr(err.msg, "No such file or directory") != NULL);

	touch("errors/a-file.jpg");
	CHECK_EQ_INT(ds_scan_folder(at("errors/a-file.jpg"), NULL, &l, NULL, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "not a folder") != NULL);

	touch("errors/empty/");
	CHECK_EQ_INT(ds_scan_folder(at("errors/empty"), NULL, &l, NULL, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "no class subfolders") != NULL);

	/* Images directly in root: said so. */
	touch("errors/flat/ILSVRC2012_val_00000001.JPEG");
	touch("errors/flat/ILSVRC2012_val_00000002.JPEG");
	ds_scan_report rep;
	CHECK_EQ_INT(ds_scan_folder(at("errors/flat"), NULL, &l, &rep, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "2 matching files lie directly in it") != NULL);
	CHECK_EQ_INT(rep.loose_files, 2);
	ds_scan_opts ro = {NULL, 1};
	CHECK_EQ_INT(ds_scan_folder(at("errors/flat"), &ro, &l, &rep, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "no folder below it holds a file matching") != NULL);

	/* An unreadable class folder (skipped when running as root). */
	touch("errors/locked/ok/1.jpg");
	touch("errors/locked/secret/1.jpg");
	chmod(at("errors/locked/secret"), 0);
	if (access(at("errors/locked/secret"), R_OK) != 0) {
		CHECK_EQ_INT(ds_scan_folder(at("errors/locked"), NULL, &l, NULL, &err), IMS_EIO);
		CHECK(strstr(err.msg, "locked/secret") != NULL);
		CHECK_EQ_INT(l.count, 0);
	}
	chmod(at("errors/locked/secret"), 0755);
	ds_list_release(&l);
}

int main(void)
{
	make_tmpdir();
	test_caltech();
	test_nested_counted();
	test_walk_order();
	test_inat_names();
	test_extensions();
	test_links();
	test_special_files();
	test_unlistable();
	test_errors();
	if (!test_failures_)
		test_rm_tree(tmpdir);
	return TEST_EXIT();
}
