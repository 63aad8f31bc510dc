/*
 * test_gpumon.c - the NVML monitor's parts that run anywhere: the metrics
 * line's exact text (the schema of docs/TRAINING.md that `imshard report`
 * reads), a line that does not fit, and opening without the library (no
 * monitor, a reason, no error). Where NVML and a GPU are present, one
 * sample of device 0 must be sane; elsewhere that part says why it
 * did not run.
 */
#include <stdio.h>
#include <string.h>

#include "test.h"
#include "train/gpumon.h"

static void test_line(void)
{
	nn_gpu_sample s = {.util = 87, .mem_used_mib = 1234.5,
			   .mem_total_mib = 81559};
	char buf[256];
	int n = nn_gpu_line(buf, sizeof(buf), 3, 1, 12.25, &s);
	CHECK_EQ_STR(buf, "{\"type\":\"gpu\",\"rank\":3,\"device\":1,"
			  "\"wall_s\":12.250000,\"util\":87,"
			  "\"mem_used_mib\":1234.5,\"mem_total_mib\":81559.0}");
	CHECK_EQ_INT(n, (int)strlen(buf));
	CHECK_EQ_INT(nn_gpu_line(buf, 20, 0, 0, 0, &s), -1);
}

static void test_absent(void)
{
	const char *why = NULL;
	nn_gpumon *g = nn_gpumon_open("libimshard-no-such-nvml.so.1", NULL, 0,
				      &why);
	CHECK(g == NULL);
	CHECK(why != NULL && strstr(why, "not installed") != NULL);
	nn_gpumon_close(NULL);
	nn_gpu_sample s;
	CHECK_EQ_INT(nn_gpumon_sample(NULL, &s), -1);
}

static void test_real(void)
{
	const char *why = NULL;
	nn_gpumon *g = nn_gpumon_open(NULL, NULL, 0, &why);
	if (!g) {
		printf("no NVML sample taken: %s\n", why ? why : "?");
		return;
	}
	nn_gpu_sample s;
	CHECK_EQ_INT(nn_gpumon_sample(g, &s), 0);
	CHECK(s.util >= 0 && s.util <= 100);
	CHECK(s.mem_total_mib > 0 && s.mem_used_mib <= s.mem_total_mib);
	nn_gpumon_close(g);
}

int main(void)
{
	test_line();
	test_absent();
	test_real();
	return TEST_EXIT();
}
