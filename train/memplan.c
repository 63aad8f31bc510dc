/*
 * memplan.c - greedy-by-size placement of buffers with lifetimes (the
 * "greedy by size" offset calculation of Pisarchyk and Lee, "Efficient
 * Memory Management for Deep Neural Net Inference", 2020, which TFLite
 * uses for its arena).
 *
 * Placed buffers are kept sorted by offset. A new buffer walks them in
 * that order, looking only at those whose lifetimes meet its own, and
 * takes the first gap large enough (or the end of the last one). Big
 * buffers go first because they are the hardest to fit; small ones fill
 * the gaps between them. O(n^2) for n buffers: a model has a few hundred.
 */
#include <stdlib.h>

#include "train/memplan.h"

typedef struct order_key {
	size_t bytes;
	int first, idx;
} order_key;

static int by_size(const void *pa, const void *pb)
{
	const order_key *a = pa, *b = pb;
	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int lives_meet(const nn_mp_buf *a, const nn_mp_buf *b)
{
	return a->first <= b->last && b->first <= a->last;
}

int nn_mp_assign(nn_mp_buf *b, int n, size_t align, size_t *arena,
		 ims_error *err)
{
	RETURN_IF(n < 0 || (n > 0 && !b) || !arena, err, IMS_EINVAL,
		  "cannot plan memory: missing argument");
	RETURN_IF(!align || (align & (align - 1)), err, IMS_EINVAL,
		  "cannot plan memory: alignment %zu is not a power of two",
		  align);
	*arena = 0;
	for (int i = 0; i < n; i++) {
		RETURN_IF(b[i].first > b[i].last, err, IMS_EINVAL,
			  "cannot plan memory: buffer %d ends (step %d) before it "
			  "starts (step %d)",
			  i, b[i].last, b[i].first);
		RETURN_IF(b[i].bytes > SIZE_MAX / 2, err, IMS_ELIMIT,
			  "cannot plan memory: buffer %d of %zu bytes is too large",
			  i, b[i].bytes);
	}
	order_key *keys = malloc((size_t)(n ? n : 1) * sizeof(*keys));
	int *placed = malloc((size_t)(n ? n : 1) * sizeof(*placed));
	if (!keys || !placed) {
		free(keys);
		free(placed);
		return ims_fail(err, IMS_ENOMEM, "cannot plan memory: out of memory");
	}
	int nk = 0;
	for (int i = 0; i < n; i++) {
		b[i].offset = 0;
		if (b[i].bytes)
			keys[nk++] = (order_key){b[i].bytes, b[i].first, i};
	}
	qsort(keys, (size_t)nk, sizeof(*keys), by_size);
	size_t end = 0;
	int np = 0; /* placed[0..np) in increasing offset */
	int rc = 0;
	for (int k = 0; k < nk && !rc; k++) {
		nn_mp_buf *x = &b[keys[k].idx];
		size_t size = (x->bytes + align - 1) & ~(align - 1);
		size_t at = 0;
		int pos = np; /* where x goes in placed[] */
		for (int p = 0; p < np; p++) {
			const nn_mp_buf *y = &b[placed[p]];
			if (!lives_meet(x, y))
				continue;
			if (y->offset >= at + size)
				break; /* the gap before y fits */
			size_t y_end = y->offset + ((y->bytes + align - 1) & ~(align - 1));
			if (y_end > at)
				at = y_end;
		}
		if (at > SIZE_MAX - size) {
			rc = ims_fail(err, IMS_ELIMIT,
				      "cannot plan memory: the arena passes %zu bytes",
				      (size_t)SIZE_MAX);
			break;
		}
		x->offset = at;
		for (pos = np; pos > 0 && b[placed[pos - 1]].offset > at; pos--)
			placed[pos] = placed[pos - 1];
		placed[pos] = keys[k].idx;
		np++;
		if (at + size > end)
			end = at + size;
	}
	free(keys);
	free(placed);
	if (!rc)
		*arena = end;
	return rc;
}

int nn_mp_find_overlap(const nn_mp_buf *b, int n, int *i, int *j)
{
	for (int a = 0; a < n; a++)
		for (int c = a + 1; c < n; c++) {
			if (!b[a].bytes || !b[c].bytes || !lives_meet(&b[a], &b[c]))
				continue;
			if (b[a].offset < b[c].offset + b[c].bytes &&
			    b[c].offset < b[a].offset + b[a].bytes) {
				*i = a;
				*j = c;
				return 1;
			}
		}
	return 0;
}
