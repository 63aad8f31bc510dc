/* test_exif.c - the EXIF orientation parser on good, odd and hostile
 * blocks: every malformed one means orientation 1, and nothing is read
 * outside the block (each case runs from an exactly-sized heap copy, so
 * ASan sees any overrun). */
#include "augment/augment_internal.h"
#include "aug_test_util.h"
#include "test.h"

typedef struct blk {
	uint8_t p[512];
	size_t n;
	int le;
} blk;

static void w16(blk *b, unsigned v)
{
	b->p[b->n++] = (uint8_t)(b->le ? v : v >> 8);
	b->p[b->n++] = (uint8_t)(b->le ? v >> 8 : v);
}

static void w32(blk *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b->p[b->n++] = (uint8_t)(b->le ? v >> (8 * i) : v >> (24 - 8 * i));
}

typedef struct entry {
	unsigned tag, type;
	uint32_t count, value;
} entry;

/* TIFF header + IFD0 at ifd_off (8 normally) with the given entries;
 * n_claim is the entry count written (normally n). */
static void tiff(blk *b, int le, uint32_t ifd_off, const entry *e, int n,
		 unsigned n_claim)
{
	memset(b, 0, sizeof(*b));
	b->le = le;
	b->p[0] = b->p[1] = le ? 'I' : 'M';
	b->n = 2;
	w16(b, 42);
	w32(b, ifd_off);
	b->n = ifd_off < 8 || ifd_off > 256 ? 8 : ifd_off;
	w16(b, n_claim);
	for (int i = 0; i < n; i++) {
		w16(b, e[i].tag);
		w16(b, e[i].type);
		w32(b, e[i].count);
		if (e[i].type == 3 && e[i].count <= 2) {
			w16(b, e[i].value);
			w16(b, 0);
		} else {
			w32(b, e[i].value);
		}
	}
	w32(b, 0);
}

/* Parses from an exact heap copy, so reading past n is an ASan error. */
static int parse(const uint8_t *p, size_t n)
{
	uint8_t *copy = malloc(n ? n : 1);
	memcpy(copy, p, n);
	int o = aug_exif_orientation_tiff(copy, n);
	free(copy);
	return o;
}

static int parse_app1(const uint8_t *p, size_t n)
{
	uint8_t *copy = malloc(n ? n : 1);
	memcpy(copy, p, n);
	int o = aug_exif_orientation_app1(copy, n);
	free(copy);
	return o;
}

static void test_good(void)
{
	blk b;
	for (int le = 0; le <= 1; le++)
		for (unsigned o = 1; o <= 8; o++) {
			entry e[3] = {{0x010F, 2, 4, 0x41424300}, {0x0112, 3, 1, o},
				      {0x0131, 2, 4, 0}};
			tiff(&b, le, 8, e, 3, 3);
			CHECK_EQ_INT(parse(b.p, b.n), (int)o);
		}
	/* LONG instead of SHORT: tolerated. */
	entry l = {0x0112, 4, 1, 6};
	tiff(&b, 1, 8, &l, 1, 1);
	CHECK_EQ_INT(parse(b.p, b.n), 6);
	/* IFD0 further into the block. */
	entry s = {0x0112, 3, 1, 3};
	tiff(&b, 0, 40, &s, 1, 1);
	CHECK_EQ_INT(parse(b.p, b.n), 3);
	/* First orientation tag wins. */
	entry two[2] = {{0x0112, 3, 1, 5}, {0x0112, 3, 1, 7}};
	tiff(&b, 1, 8, two, 2, 2);
	CHECK_EQ_INT(parse(b.p, b.n), 5);
}

static void test_bad(void)
{
	blk b;
	entry e = {0x0112, 3, 1, 6};

	/* Values outside 1..8. */
	unsigned vals[] = {0, 9, 255, 0xFFFF};
	for (size_t i = 0; i < 4; i++) {
		entry v = {0x0112, 3, 1, vals[i]};
		tiff(&b, 1, 8, &v, 1, 1);
		CHECK_EQ_INT(parse(b.p, b.n), 1);
	}
	/* Wrong type, zero or huge counts (the value would be elsewhere). */
	entry odd[] = {{0x0112, 2, 1, 6}, {0x0112, 3, 0, 6},
		       {0x0112, 3, 0x7FFFFFFF, 6}, {0x0112, 3, 0xFFFFFFFF, 6},
		       {0x0112, 4, 2, 6}, {0x0112, 7, 1, 6}};
	for (size_t i = 0; i < sizeof(odd) / sizeof(*odd); i++) {
		tiff(&b, 0, 8, &odd[i], 1, 1);
		CHECK_EQ_INT(parse(b.p, b.n), 1);
	}
	/* IFD offsets pointing outside the block, or into the header. */
	uint32_t offs[] = {0, 4, 7, 300, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFFFFFF8};
	for (size_t i = 0; i < sizeof(offs) / sizeof(*offs); i++) {
		tiff(&b, 1, offs[i], &e, 1, 1);
		/* the IFD is written at 8; the header says elsewhere */
		CHECK_EQ_INT(parse(b.p, b.n), 1);
	}
	/* An IFD claiming 65535 entries in a short block: the entries that
	 * are present are read, nothing beyond. */
	tiff(&b, 1, 8, &e, 1, 0xFFFF);
	CHECK_EQ_INT(parse(b.p, b.n - 4), 6);
	entry later[2] = {{0x010F, 2, 4, 0}, {0x0112, 3, 1, 6}};
	tiff(&b, 1, 8, later, 2, 0xFFFF);
	CHECK_EQ_INT(parse(b.p, 8 + 2 + 12 + 11), 1); /* 2nd entry cut */
	CHECK_EQ_INT(parse(b.p, 8 + 2 + 24), 6);

	/* Headers. */
	tiff(&b, 1, 8, &e, 1, 1);
	b.p[1] = 'M';
	CHECK_EQ_INT(parse(b.p, b.n), 1);
	tiff(&b, 1, 8, &e, 1, 1);
	b.p[2] = 43;
	CHECK_EQ_INT(parse(b.p, b.n), 1);
	CHECK_EQ_INT(aug_exif_orientation_tiff(NULL, 100), 1);
	CHECK_EQ_INT(parse(b.p, 0), 1);

	/* Every truncation of a good block: 1 or the right answer, and no
	 * read past the end. */
	entry three[3] = {{0x010F, 2, 4, 0}, {0x011A, 5, 1, 100}, {0x0112, 3, 1, 8}};
	for (int le = 0; le <= 1; le++) {
		tiff(&b, le, 8, three, 3, 3);
		for (size_t n = 0; n <= b.n; n++) {
			int o = parse(b.p, n);
			CHECK(o == 1 || o == 8);
			if (n >= 8 + 2 + 36)
				CHECK_EQ_INT(o, 8);
		}
	}

	/* Random blocks behind a valid header. */
	uint64_t x = 0x12345678;
	int out_of_range = 0;
	for (int it = 0; it < 20000; it++) {
		uint8_t r[96];
		size_t n = 8 + (size_t)(it % 88);
		for (size_t i = 0; i < sizeof(r); i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			r[i] = (uint8_t)x;
		}
		memcpy(r, it & 1 ? "II\x2a\x00" : "MM\x00\x2a", 4);
		if (it % 3 == 0) {
			/* small offsets so the IFD is often inside */
			r[4] = r[5] = r[6] = r[7] = 0;
			r[it & 1 ? 4 : 7] = (uint8_t)(8 + it % 16);
		}
		int o = parse(r, n);
		out_of_range += o < 1 || o > 8;
	}
	CHECK_EQ_INT(out_of_range, 0);
}

static void test_app1(void)
{
	blk b;
	entry e = {0x0112, 3, 1, 7};
	tiff(&b, 0, 8, &e, 1, 1);
	uint8_t app1[600];
	memcpy(app1, "Exif\0\0", 6);
	memcpy(app1 + 6, b.p, b.n);
	CHECK_EQ_INT(parse_app1(app1, 6 + b.n), 7);
	app1[5] = 0xFF; /* some writers pad with 0xFF */
	CHECK_EQ_INT(parse_app1(app1, 6 + b.n), 7);
	CHECK_EQ_INT(parse_app1(app1, 6), 1);  /* EXIF, but empty */
	CHECK_EQ_INT(parse_app1(app1, 4), 0);  /* too short to say */
	CHECK_EQ_INT(parse_app1((const uint8_t *)"http://ns.adobe.com/xap/1.0/", 29),
		     0);
	CHECK_EQ_INT(aug_exif_orientation_app1(NULL, 10), 0);
}

/* A JPEG with an APP1 spliced in right after SOI. */
static uint8_t *splice(const uint8_t *jpg, size_t len, const uint8_t *app1,
		       size_t n, size_t *out_len)
{
	uint8_t *p = malloc(len + n + 4);
	memcpy(p, jpg, 2);
	p[2] = 0xFF;
	p[3] = 0xE1;
	p[4] = (uint8_t)((n + 2) >> 8);
	p[5] = (uint8_t)(n + 2);
	memcpy(p + 6, app1, n);
	memcpy(p + 6 + n, jpg + 2, len - 2);
	*out_len = len + n + 4;
	return p;
}

static void test_in_jpeg(void)
{
	const char *dir = fixtures_dir("aug-exif");
	ims_error err;
	aug_codec *c;
	CHECK_OK(aug_codec_create(&c, &err), &err);
	if (!c)
		return;
	size_t len;
	uint8_t *jpg = load(dir, "rgb.jpg", &len);
	aug_image img = {0}, plain = {0};
	aug_image_info info;
	aug_decode_opts o = {AUG_CHANNELS_RGB, 0, 0, 1};
	CHECK_OK(aug_decode(c, jpg, len, &o, &plain, NULL, &err), &err);

	/* Hostile EXIF blocks: the image still decodes, upright as stored. */
	blk b;
	entry e = {0x0112, 3, 1, 6};
	struct {
		uint32_t off;
		unsigned claim;
		size_t cut;
	} cases[] = {{0xFFFFFF00u, 1, 0}, {8, 0xFFFF, 0}, {8, 1, 15}, {3, 1, 0}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		tiff(&b, i & 1, cases[i].off, &e, 1, cases[i].claim);
		size_t n = cases[i].cut ? cases[i].cut : b.n;
		if (cases[i].claim == 0xFFFF)
			n = 8 + 2; /* the count and nothing after it */
		uint8_t app1[600];
		memcpy(app1, "Exif\0\0", 6);
		memcpy(app1 + 6, b.p, n);
		size_t jl;
		uint8_t *j = splice(jpg, len, app1, 6 + n, &jl);
		CHECK_OK(aug_probe(c, j, jl, &info, &err), &err);
		CHECK_EQ_INT(info.orientation, 1);
		CHECK_OK(aug_decode(c, j, jl, &o, &img, &info, &err), &err);
		CHECK(image_equal(&img, &plain));
		free(j);
	}

	/* A good block spliced in turns the same pixels: orientation 3 is a
	 * half turn. */
	entry half = {0x0112, 3, 1, 3};
	tiff(&b, 1, 8, &half, 1, 1);
	uint8_t app1[600];
	memcpy(app1, "Exif\0\0", 6);
	memcpy(app1 + 6, b.p, b.n);
	size_t jl;
	uint8_t *j = splice(jpg, len, app1, 6 + b.n, &jl);
	CHECK_OK(aug_decode(c, j, jl, &o, &img, &info, &err), &err);
	CHECK_EQ_INT(info.orientation, 3);
	int same = img.width == plain.width && img.height == plain.height;
	for (int y = 0; same && y < img.height; y++)
		for (int x = 0; x < img.width; x++)
			same &= !memcmp(px(&img, x, y),
					px(&plain, plain.width - 1 - x,
					   plain.height - 1 - y), 3);
	CHECK(same);
	free(j);

	/* An APP1 whose length runs past the end of the file is structural
	 * damage, not an EXIF problem. */
	j = splice(jpg, len, app1, 6 + b.n, &jl);
	CHECK_EQ_INT(aug_probe(c, j, 6 + 10, NULL, &err), IMS_ECORRUPT);
	CHECK(err.msg[0] != '\0');
	free(j);

	free(jpg);
	aug_image_release(&img);
	aug_image_release(&plain);
	aug_codec_destroy(c);
	if (!test_failures_)
		test_rm_tree(dir);
}

int main(void)
{
	test_good();
	test_bad();
	test_app1();
	test_in_jpeg();
	return TEST_EXIT();
}
