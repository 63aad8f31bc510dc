/*
 * gpumon.c - NVML through dlopen: the few calls that give a device's
 * utilisation and memory (gpumon.h). The types are NVML's ABI, declared
 * here so that a build needs neither nvml.h nor the driver.
 */
#include "train/gpumon.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

/* nvml.h: nvmlReturn_t (NVML_SUCCESS 0), nvmlDevice_t, nvmlUtilization_t,
 * nvmlMemory_t (v1: total, free, used in bytes) */
typedef int nvml_ret;
typedef struct nvml_device *nvml_device;
typedef struct {
	unsigned int gpu, memory;
} nvml_util;
typedef struct {
	unsigned long long total, free, used;
} nvml_memory;

struct nn_gpumon {
	void *lib;
	nvml_device dev;
	nvml_ret (*shutdown)(void);
	nvml_ret (*util)(nvml_device, nvml_util *);
	nvml_ret (*memory)(nvml_device, nvml_memory *);
};

/* dlsym into a function pointer without the object/function cast warning */
static int sym(void *lib, const char *name, void *fp, size_t size)
{
	void *p = dlsym(lib, name);
	if (!p || size != sizeof(p))
		return -1;
	*(void **)fp = p;
	return 0;
}

nn_gpumon *nn_gpumon_open(const char *lib, const char *pci_bus_id, int index,
			  const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	nn_gpumon *g = calloc(1, sizeof(*g));
	if (!g) {
		*why = "out of memory";
		return NULL;
	}
	g->lib = dlopen(lib ? lib : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!g->lib) {
		*why = "NVML (libnvidia-ml.so.1) is not installed";
		free(g);
		return NULL;
	}
	nvml_ret (*init)(void) = NULL;
	nvml_ret (*by_pci)(const char *, nvml_device *) = NULL;
	nvml_ret (*by_index)(unsigned int, nvml_device *) = NULL;
	if (sym(g->lib, "nvmlInit_v2", &init, sizeof(init)) ||
	    sym(g->lib, "nvmlShutdown", &g->shutdown, sizeof(g->shutdown)) ||
	    sym(g->lib, "nvmlDeviceGetHandleByPciBusId_v2", &by_pci,
		sizeof(by_pci)) ||
	    sym(g->lib, "nvmlDeviceGetHandleByIndex_v2", &by_index,
		sizeof(by_index)) ||
	    sym(g->lib, "nvmlDeviceGetUtilizationRates", &g->util,
		sizeof(g->util)) ||
	    sym(g->lib, "nvmlDeviceGetMemoryInfo", &g->memory,
		sizeof(g->memory))) {
		*why = "NVML lacks a function it needs";
		dlclose(g->lib);
		free(g);
		return NULL;
	}
	if (init() != 0) {
		*why = "NVML cannot start (no driver or no GPU)";
		dlclose(g->lib);
		free(g);
		return NULL;
	}
	nvml_ret r = pci_bus_id && *pci_bus_id
			     ? by_pci(pci_bus_id, &g->dev)
			     : (index >= 0 ? by_index((unsigned)index, &g->dev) : -1);
	if (r != 0) {
		*why = "NVML does not know the device";
		g->shutdown();
		dlclose(g->lib);
		free(g);
		return NULL;
	}
	*why = NULL;
	return g;
}

int nn_gpumon_sample(nn_gpumon *g, nn_gpu_sample *s)
{
	nvml_util u;
	nvml_memory m;
	if (!g || g->util(g->dev, &u) != 0 || g->memory(g->dev, &m) != 0)
		return -1;
	s->util = u.gpu;
	s->mem_used_mib = (double)m.used / 1048576.0;
	s->mem_total_mib = (double)m.total / 1048576.0;
	return 0;
}

void nn_gpumon_close(nn_gpumon *g)
{
	if (!g)
		return;
	g->shutdown();
	dlclose(g->lib);
	free(g);
}

int nn_gpu_line(char *buf, size_t cap, int rank, int device, double wall_s,
		const nn_gpu_sample *s)
{
	int n = snprintf(buf, cap,
			 "{\"type\":\"gpu\",\"rank\":%d,\"device\":%d,"
			 "\"wall_s\":%.6f,\"util\":%.0f,\"mem_used_mib\":%.1f,"
			 "\"mem_total_mib\":%.1f}",
			 rank, device, wall_s, s->util, s->mem_used_mib,
			 s->mem_total_mib);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}
