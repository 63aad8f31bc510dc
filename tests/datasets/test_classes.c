/*
 * test_classes.c - class-name files (datasets/classes.c): writing and
 * reading them back, CIFAR-10's CRLF and trailing blank lines, the names
 * and files refused, a list's classes file named from the list's.
 *
 * Files are written as text into a fresh folder under $IMS_TMP.
 */
#include <stdio.h>
#include <string.h>

#include "datasets/datasets.h"
#include "test.h"
#include "list_test_util.h"

static void test_classes(void)
{
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	const char *names[] = {"Amphibia", "Anas superciliosa × platyrhynchos", "015.bonsai-101",
			       "n01440764"};
	for (int i = 0; i < 4; i++)
		CHECK_OK(ds_list_add_class(&l, names[i], NULL, &err), &err);
	const char *p = tmp_path("x.classes");
	CHECK_OK(ds_classes_write(p, &l, &err), &err);
	char *text = slurp(p);
	CHECK_EQ_STR(text, "Amphibia\nAnas superciliosa × platyrhynchos\n015.bonsai-101\n"
			   "n01440764\n");
	/* a folder that does not exist: the file named once (before:
	 * "cannot write classes 'F': cannot create 'F.tmp.PID'") */
	CHECK_EQ_INT(ds_classes_write(tmp_path("no/such/x.classes"), &l, &err), IMS_EIO);
	CHECK(strstr(err.msg, "cannot write '") == err.msg);
	CHECK(strstr(err.msg, "x.classes") != NULL);
	CHECK(strstr(strstr(err.msg, "x.classes") + 1, "x.classes") == NULL);
	ds_list r;
	ds_list_init(&r);
	CHECK_OK(ds_list_add_class(&r, "replaced", NULL, &err), &err);
	CHECK_OK(ds_classes_read(p, &r, &err), &err);
	CHECK_EQ_INT(r.n_classes, 4);
	for (int i = 0; i < 4 && (size_t)i < r.n_classes; i++)
		CHECK_EQ_STR(r.classes[i], names[i]);
	ds_list_release(&r);

	/* CRLF, trailing blank lines (CIFAR-10's batches.meta.txt has them). */
	const char meta[] = "airplane\r\nautomobile\r\nbird\r\n\r\n\n  \n";
	p = tmp_path("meta.txt");
	write_text(p, meta, sizeof(meta) - 1);
	CHECK_OK(ds_classes_read(p, &r, &err), &err);
	CHECK_EQ_INT(r.n_classes, 3);
	if (r.n_classes == 3)
		CHECK_EQ_STR(r.classes[2], "bird");
	ds_list_release(&r);

	/* Duplicates and inner blank lines are refused, with line numbers. */
	const char dup[] = "crane\ncat\ndog\ncrane\n";
	p = tmp_path("dup.classes");
	write_text(p, dup, sizeof(dup) - 1);
	CHECK_EQ_INT(ds_classes_read(p, &r, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "line 4: class 'crane' repeats line 1") != NULL);
	const char hole[] = "a\n\nb\n";
	p = tmp_path("hole.classes");
	write_text(p, hole, sizeof(hole) - 1);
	CHECK_EQ_INT(ds_classes_read(p, &r, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "line 2: empty class name") != NULL);
	CHECK_EQ_INT(r.n_classes, 0);
	CHECK_EQ_INT(ds_classes_read(tmp_path("none.classes"), &r, &err), IMS_ENOTFOUND);
	/* an im2rec list given where class names belong: refused, not read
	 * as names like "0\t3\tcat/1.jpg" */
	const char lst[] = "0\t3\tcat/1.jpg\n1\t0\tdog/2.jpg\n";
	p = tmp_path("train.lst");
	write_text(p, lst, sizeof(lst) - 1);
	CHECK_EQ_INT(ds_classes_read(p, &r, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "line 1 holds a TAB") != NULL);
	CHECK(strstr(err.msg, "im2rec .lst list") != NULL);
	CHECK_EQ_INT(r.n_classes, 0);
	ds_list_release(&r);

	/* Names the format cannot hold. */
	CHECK_OK(ds_list_add_class(&r, "two\nlines", NULL, &err), &err);
	CHECK_EQ_INT(ds_classes_write(tmp_path("bad.classes"), &r, &err), IMS_EINVAL);
	CHECK(!file_exists(tmp_path("bad.classes")));
	ds_list_release(&r);
	CHECK_OK(ds_list_add_class(&r, "tab\there", NULL, &err), &err);
	CHECK_EQ_INT(ds_classes_write(tmp_path("tab.classes"), &r, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "class 0 ('tab\there') holds a TAB") != NULL);
	CHECK(!file_exists(tmp_path("tab.classes")));
	ds_list_release(&r);
	/* A name of spaces reads back as a blank line, and a repeated name
	 * is refused by the reader: neither is written. */
	CHECK_OK(ds_list_add_class(&r, "a", NULL, &err), &err);
	CHECK_OK(ds_list_add_class(&r, "  ", NULL, &err), &err);
	CHECK_EQ_INT(ds_classes_write(tmp_path("sp.classes"), &r, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "class 1 ('  ') is only spaces") != NULL);
	CHECK(!file_exists(tmp_path("sp.classes")));
	ds_list_release(&r);
	CHECK_OK(ds_list_add_class(&r, "a", NULL, &err), &err);
	CHECK_OK(ds_list_add_class(&r, "b", NULL, &err), &err);
	CHECK_OK(ds_list_add_class(&r, "a", NULL, &err), &err);
	CHECK_EQ_INT(ds_classes_write(tmp_path("dup2.classes"), &r, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "class 2 ('a') repeats class 0") != NULL);
	CHECK(!file_exists(tmp_path("dup2.classes")));
	ds_list_release(&r);
	/* A CR inside a line (not before its LF) is no part of a name. */
	const char cr[] = "a\rb\nc\r\n";
	p = tmp_path("cr.classes");
	write_text(p, cr, sizeof(cr) - 1);
	CHECK_EQ_INT(ds_classes_read(p, &r, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "line 1: class name 'a\rb' holds a line break") != NULL);
	ds_list_release(&r);
	ds_list_release(&l);
}

static void test_classes_path(void)
{
	ims_error err;
	char out[64];
	struct {
		const char *in, *want;
	} cases[] = {
		{"out/caltech_train.lst", "out/caltech.classes"},
		{"out/caltech_val.lst", "out/caltech.classes"},
		{"out/caltech_test.lst", "out/caltech.classes"},
		{"caltech.lst", "caltech.classes"},
		{"out/inat_train_small.lst", "out/inat_train_small.classes"},
		{"out/x_train", "out/x.classes"},
		{"a_val_train.lst", "a_val.classes"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK_OK(ds_classes_path_for_list(cases[i].in, out, sizeof(out), &err), &err);
		CHECK_EQ_STR(out, cases[i].want);
	}
	CHECK_EQ_INT(ds_classes_path_for_list("out/caltech_train.lst", out, 10, &err),
		     IMS_EINVAL);
}

int main(void)
{
	make_tmpdir("test_classes");
	test_classes();
	test_classes_path();
	return test_tmp_done(tmpdir, TEST_EXIT());
}
