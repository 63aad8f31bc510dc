/*
 * test_loader_bad.c - the loader (aug_loader_*) against its contract in
 * augment.h for damaged records: each is replaced by the next record of
 * the share (batches stay full, ranks equal), named and counted once per
 * time met; a share with no record to stand in fails saying so. The
 * epoch's order and shares are test_loader.c's, the rest of the batch
 * test_loader_batches.c's.
 *
 * The splits (lists pointing at make_images fixtures, one of them
 * truncated at LT_BAD_AT) are built by loader_test.c.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "augment/augment.h"
#include "loader_test.h"
#include "recordio/recordio.h"
#include "test.h"

static void test_bad_records(void)
{
	aug_loader_opts o;
	lt_base_opts(&o, lt_bad, 0, 4, 64);
	o.transform.crop_frac = 1.0; /* reads whole rows: the damage is met */
	o.drop_last = 0;
	uint64_t ep[2] = {0, 1};
	lt_epoch_out e;
	lt_run_epochs(&o, ep, 2, &e);
	CHECK_EQ_INT(e.rc, 0);
	CHECK_EQ_U64(e.n, 21);
	CHECK_EQ_U64(e.stats.bad_records, 2); /* met once per epoch */
	CHECK(strstr(e.stats.last_bad, "7") != NULL);
	if (e.stats.last_bad[0])
		fprintf(stderr, "(last_bad: %s)\n", e.stats.last_bad);
	int bad_seen = 0;
	for (size_t i = 0; i < e.n; i++)
		bad_seen += e.idx[i] == LT_BAD_AT;
	CHECK_EQ_INT(bad_seen, 0);
	/* position LT_BAD_AT holds the next record of the share, its label and
	 * (validation being deterministic) its pixels */
	if (e.n > LT_BAD_AT + 1) {
		CHECK_EQ_U64(e.idx[LT_BAD_AT], LT_BAD_AT + 1);
		CHECK_EQ_INT(e.labels[LT_BAD_AT], (LT_BAD_AT + 1) % 4);
		CHECK_MEM(e.data + LT_BAD_AT * e.sb, e.data + (LT_BAD_AT + 1) * e.sb,
			  e.sb);
		CHECK(!e.pad[LT_BAD_AT]);
	}
	lt_epoch_free(&e);

	/* training too: each epoch meets it at most once, and is complete */
	lt_base_opts(&o, lt_bad, 1, 4, 32);
	o.transform.rrc = 0;
	o.transform.crop_frac = 1.0;
	lt_run_epochs(&o, ep, 2, &e);
	CHECK_EQ_INT(e.rc, 0);
	CHECK_EQ_U64(e.n, 20);
	/* met in an epoch when its share keeps it (drop_last drops one) */
	uint64_t met = 0;
	for (int k = 0; k < 2; k++) {
		uint64_t share[21];
		ims_error err = {0};
		rio_partition_opts po;
		rio_partition_opts_init(&po);
		po.n = 21;
		po.epoch = ep[k];
		po.seed = o.seed;
		CHECK_OK(rio_partition(&po, share, NULL, &err), &err);
		for (int i = 0; i < 20; i++)
			met += share[i] == LT_BAD_AT;
	}
	CHECK_EQ_U64(e.stats.bad_records, met);
	fprintf(stderr, "(train: truncated_eoi.jpg met %" PRIu64 " times in 2 epochs)\n", met);
	for (size_t i = 0; i < e.n; i++)
		CHECK(e.idx[i] != LT_BAD_AT);
	lt_epoch_free(&e);
}

/* Two bad records in a row: the first's stand-in is the second, which
 * fails too, so that sample tries three records; the second fails again
 * at its own place. The loader's count is of records (2), not attempts
 * (3); the batch tells its attempts and lists each replaced record. */
static void test_bad_records_in_a_row(void)
{
	aug_loader_opts o;
	lt_base_opts(&o, lt_bad2, 0, 4, 64);
	o.transform.crop_frac = 1.0;
	o.drop_last = 0;
	ims_error err = {0};
	aug_loader *l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (!l)
		return;
	CHECK_OK(aug_loader_start_epoch(l, 0, &err), &err);
	aug_batch b;
	int attempts = 0, listed = 0;
	while (aug_loader_next(l, &b, &err) == 0) {
		attempts += b.bad_records;
		for (int i = 0; i < b.bad_listed; i++, listed++)
			CHECK_EQ_U64(b.bad_indices[i], (uint64_t)(LT_BAD_AT + listed));
	}
	aug_loader_stats st;
	aug_loader_get_stats(l, &st);
	CHECK_EQ_INT(attempts, 3);
	CHECK_EQ_INT(listed, 2);
	CHECK_EQ_U64(st.bad_records, 2);
	aug_loader_close(l);
}

/* A share with no record to stand in (21 ranks, rank LT_BAD_AT's one
 * record bad): the batch fails saying so, and tries the record once
 * (before: "16 records in a row could not be loaded", the one record
 * tried 16 times). */
static void test_bad_share(void)
{
	aug_loader_opts o;
	lt_base_opts(&o, lt_bad, 0, 1, 16);
	o.world = 21;
	o.rank = LT_BAD_AT;
	ims_error err = {0};
	aug_loader *l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (!l)
		return;
	CHECK_OK(aug_loader_start_epoch(l, 0, &err), &err);
	aug_batch b;
	CHECK(aug_loader_next(l, &b, &err) < 0);
	char want[128];
	snprintf(want, sizeof(want),
		 "the only record of rank %d's share could not be loaded: record %d: ",
		 LT_BAD_AT, LT_BAD_AT);
	CHECK(strncmp(err.msg, want, strlen(want)) == 0);
	if (strncmp(err.msg, want, strlen(want)) != 0)
		fprintf(stderr, "  message: %s\n", err.msg);
	aug_loader_close(l);
}

/* An epoch resumed past its start, whose rest of the share is one bad
 * record (14 ranks: rank 0's share is records 0 and 14; from position 7
 * it takes record LT_BAD_AT alone): the message says the record is the
 * only one left in the epoch, not the share's only record (before: "the
 * only record of rank 0's share", of a share of 2). */
static void test_bad_rest_of_share(void)
{
	aug_loader_opts o;
	lt_base_opts(&o, lt_bad, 0, 1, 16);
	o.world = 14;
	o.rank = 0;
	ims_error err = {0};
	aug_loader *l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (!l)
		return;
	uint64_t per = 0;
	aug_loader_share(l, &per, NULL, NULL);
	CHECK_EQ_U64(per, 2);
	CHECK_OK(aug_loader_start_epoch_at(l, 0, LT_BAD_AT, &err), &err);
	aug_batch b;
	CHECK(aug_loader_next(l, &b, &err) < 0);
	char want[160];
	snprintf(want, sizeof(want),
		 "the only record left of rank 0's share in this epoch (resumed at "
		 "position %d) could not be loaded: record %d: ",
		 LT_BAD_AT, LT_BAD_AT);
	CHECK(strncmp(err.msg, want, strlen(want)) == 0);
	if (strncmp(err.msg, want, strlen(want)) != 0)
		fprintf(stderr, "  message: %s\n", err.msg);
	aug_loader_close(l);
}

/* The batch that met the bad record says so: the sample that stands in
 * for it is flagged, the record named, the count given; the other
 * batches say nothing. */
static void test_bad_in_batch(void)
{
	ims_error err = {0};
	aug_loader_opts o;
	lt_base_opts(&o, lt_bad, 0, 4, 64);
	o.transform.crop_frac = 1.0;
	o.drop_last = 0;
	aug_loader *l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (!l)
		return;
	CHECK_OK(aug_loader_start_epoch(l, 0, &err), &err);
	int flagged = 0, batches_with = 0;
	aug_batch b;
	while (aug_loader_next(l, &b, &err) == 0) {
		for (int j = 0; j < b.count; j++) {
			uint64_t pos = b.step * 4 + (uint64_t)j;
			CHECK_EQ_INT(b.replaced[j], pos == LT_BAD_AT);
			flagged += b.replaced[j];
		}
		if (b.bad_records) {
			batches_with++;
			CHECK_EQ_INT(b.bad_records, 1);
			CHECK_EQ_INT(b.bad_listed, 1);
			CHECK_EQ_U64(b.bad_indices[0], LT_BAD_AT);
			CHECK(strstr(b.bad_reason, "record 7") != NULL);
		} else {
			CHECK_EQ_INT(b.bad_listed, 0);
			CHECK_EQ_INT(b.bad_reason[0], 0);
		}
	}
	CHECK_EQ_INT(flagged, 1);
	CHECK_EQ_INT(batches_with, 1);
	aug_loader_close(l);
}

int main(void)
{
	lt_setup("loader-bad", LT_SPLIT_BAD | LT_SPLIT_BAD2);
	test_bad_records();
	test_bad_records_in_a_row();
	test_bad_share();
	test_bad_rest_of_share();
	test_bad_in_batch();
	return test_tmp_done(lt_tmp, TEST_EXIT());
}
