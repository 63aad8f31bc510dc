/*
 * test_svg.c - the charts (report/svg.c): a line chart draws one path per
 * unbroken run of points and a dot for a lone point, skips non-finite
 * points, draws nothing (and says so by returning 0) without data, thins
 * long series to bucket means, labels a log2 axis in powers of two;
 * stacked bars draw a rect per positive part with a callout; text is
 * escaped.
 */
#include <math.h>

#include "report/report_internal.h"
#include "test.h"

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Every <path class="mark"> has an M and at least one L. */
static int paths_have_lines(const char *s)
{
	for (const char *p = s; (p = strstr(p, "<path class=\"mark\"")); p++) {
		const char *d = strstr(p, " d=\"M");
		const char *end = strstr(p, "/>");
		if (!d || !end || d > end)
			return 0;
		const char *l = strchr(d, 'L');
		if (!l || l > end)
			return 0;
	}
	return 1;
}

static void test_lines(void)
{
	double x[6] = {1, 2, 3, 4, 5, 6};
	double y[6] = {1, 4, NAN, 2, 3, 5};
	double x2[3] = {1, NAN, 3};
	double y2[3] = {2, 2, 7};
	svg_series s[2] = {{"first <a>", x, y, 6, SVG_LINE, 0},
			   {"second", x2, y2, 3, SVG_LINE, 1}};
	svg_chart c = {"c1", "loss-epoch", "Loss & more", "epoch", "loss", 0, 1, 0, NAN};
	ims_buf b = {0};
	size_t n = svg_line_chart(&b, &c, s, 2);
	CHECK_EQ_U64(n, 5 + 2);
	CHECK(strstr(b.text, "<svg class=\"chart\"") == b.text);
	CHECK(strstr(b.text, "data-chart=\"loss-epoch\"") != NULL);
	CHECK(strstr(b.text, "id=\"c1\"") != NULL);
	CHECK(strstr(b.text, "Loss &amp; more") != NULL);
	CHECK(strstr(b.text, "first &lt;a&gt;") != NULL);
	/* series 1: two runs of points (1-2 and 4-6) = 2 paths; series 2:
	 * two lone points = 2 dots, no path */
	CHECK_EQ_U64(count(b.text, "<path class=\"mark\""), 2);
	CHECK_EQ_U64(count(b.text, "<circle class=\"mark\""), 2);
	CHECK(paths_have_lines(b.text));
	CHECK(strstr(b.text, "nan") == NULL && strstr(b.text, "inf") == NULL);
	CHECK_EQ_U64(count(b.text, "</svg>"), 1);
	/* y from 0 (y_zero) to 7: ticks 0, 2, 4, 6, 8 */
	CHECK(strstr(b.text, ">8</text>") != NULL);
	CHECK(strstr(b.text, ">0</text>") != NULL);
	ims_buf_release(&b);

	/* markers: one dot per point */
	svg_series m = {"m", x, y, 6, SVG_LINE | SVG_MARKERS, 2};
	CHECK_EQ_U64(svg_line_chart(&b, &c, &m, 1), 5);
	CHECK_EQ_U64(count(b.text, "<circle class=\"mark\""), 5);
	ims_buf_release(&b);

	/* nothing finite: nothing appended */
	double nx[2] = {NAN, 1}, ny[2] = {1, INFINITY};
	svg_series none[2] = {{"n", nx, ny, 2, SVG_LINE, 0}, {"e", x, y, 0, SVG_LINE, 1}};
	CHECK_EQ_U64(svg_line_chart(&b, &c, none, 2), 0);
	CHECK_EQ_U64(b.len, 0);
	ims_buf_release(&b);
}

static void test_log_axis_and_thinning(void)
{
	double x[3] = {16, 32, 64}, y[3] = {0.9, 0.91, 0.88};
	svg_series s = {"acc", x, y, 3, SVG_MARKERS, 0};
	svg_chart c = {"c2", "acc-batch", "t", "batch", "acc", 1, 0, 0, NAN};
	ims_buf b = {0};
	CHECK_EQ_U64(svg_line_chart(&b, &c, &s, 1), 3);
	CHECK(strstr(b.text, ">16</text>") && strstr(b.text, ">32</text>") &&
	      strstr(b.text, ">64</text>"));
	CHECK(!strstr(b.text, ">48</text>"));
	CHECK_EQ_U64(count(b.text, "<path class=\"mark\""), 0); /* markers only */
	ims_buf_release(&b);

	size_t n = 10000;
	double *lx = malloc(n * sizeof(double)), *ly = malloc(n * sizeof(double));
	for (size_t i = 0; i < n; i++) {
		lx[i] = (double)i;
		ly[i] = sin((double)i / 500);
	}
	svg_series l = {"long", lx, ly, n, SVG_LINE, 0};
	svg_chart c2 = {"c3", "throughput", "t", "x", "y", 0, 0, 0, NAN};
	CHECK_EQ_U64(svg_line_chart(&b, &c2, &l, 1), SVG_MAX_POINTS);
	CHECK(b.len < 30000);
	CHECK_EQ_U64(count(b.text, "L"), SVG_MAX_POINTS - 1);
	ims_buf_release(&b);
	free(lx);
	free(ly);

	/* one value everywhere: a range is made around it, no division by 0 */
	double cx[2] = {5, 5}, cy[2] = {3, 3};
	svg_series cs = {"flat", cx, cy, 2, SVG_LINE, 0};
	CHECK_EQ_U64(svg_line_chart(&b, &c2, &cs, 1), 2);
	CHECK(strstr(b.text, "nan") == NULL);
	ims_buf_release(&b);
}

static void test_bars(void)
{
	const char *cats[3] = {"rank 0", "rank 1", "rank <2>"};
	const char *segs[3] = {"wait", "compute", "comm"};
	int colors[3] = {1, 0, 3};
	double v[9] = {0.1, 2.0, 0.5, 0, 2.4, 0.2, NAN, 1.0, -1};
	svg_bars bars = {"b1", "breakdown", "Step time", "seconds", cats, 3, segs, colors,
			 3, v, "busy max/min 2.4"};
	ims_buf b = {0};
	CHECK_EQ_U64(svg_stacked_bars(&b, &bars), 6);
	CHECK_EQ_U64(count(b.text, "<rect class=\"mark\""), 6);
	CHECK(strstr(b.text, "data-chart=\"breakdown\"") != NULL);
	CHECK(strstr(b.text, "class=\"callout\"") && strstr(b.text, "busy max/min 2.4"));
	CHECK(strstr(b.text, "rank &lt;2&gt;") != NULL);
	CHECK(strstr(b.text, "height=\"-") == NULL && strstr(b.text, "width=\"-") == NULL);
	CHECK(strstr(b.text, "nan") == NULL);
	ims_buf_release(&b);

	double zero[9] = {0};
	bars.values = zero;
	CHECK_EQ_U64(svg_stacked_bars(&b, &bars), 0);
	CHECK_EQ_U64(b.len, 0);
	ims_buf_release(&b);
	CHECK(strcmp(svg_color(0), svg_color(10)) == 0);
	CHECK(strcmp(svg_color(-1), svg_color(9)) == 0);
}

int main(void)
{
	test_lines();
	test_log_axis_and_thinning();
	test_bars();
	return TEST_EXIT();
}
