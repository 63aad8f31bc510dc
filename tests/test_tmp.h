/*
 * test_tmp.h - scratch folders of imshard's C tests (tests/test_tmp.c,
 * linked into every test by ims_test; test.h includes this header).
 *
 * A test makes its folder under $IMS_TMP (CTest sets it to the build's
 * test-tmp/; /tmp when unset) and removes it when it passed, so a failing
 * test leaves its files to look at.
 */
#ifndef IMSHARD_TEST_TMP_H
#define IMSHARD_TEST_TMP_H

#include <stddef.h>

/* Makes a fresh folder $IMS_TMP/<tag>-XXXXXX (IMS_TMP created when
 * missing) into out (len bytes) and returns out. Exits 1 when it cannot:
 * a test without its scratch folder has no result to give. */
char *test_tmpdir(char *out, size_t len, const char *tag);

/* Removes path and everything below it; links are removed, never
 * followed. A missing path is fine. */
void test_rm_tree(const char *path);

/* test_rm_tree(path) when the test passed (failures == 0), else a line
 * saying where the scratch was kept. Returns failures, for main's exit. */
int test_tmp_done(const char *path, int failures);

#endif
