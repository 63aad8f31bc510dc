/*
 * gpumon.h - GPU utilisation and memory sampled through NVML, for the
 * `gpu` lines of metrics.jsonl (docs/TRAINING.md, "Metrics").
 *
 * NVML is loaded at run time with dlopen ("libnvidia-ml.so.1", the
 * driver's), so every build has this and none links against the driver:
 * where the library or the device is missing, opening gives no monitor
 * and no error, and the run simply writes no gpu lines.
 *
 * Caveats: a monitor is used by one thread at a time. NVML is initialised
 * once per monitor (nvmlInit is reference counted) and shut down when it
 * closes. Sampling takes tens of microseconds: call it once per log
 * interval, not per step.
 */
#ifndef IMSHARD_GPUMON_H
#define IMSHARD_GPUMON_H

#include <stddef.h>

typedef struct nn_gpumon nn_gpumon;

typedef struct nn_gpu_sample {
	double util;          /* percent busy over NVML's last sample period */
	double mem_used_mib;  /* device memory in use, MiB (all processes) */
	double mem_total_mib; /* device memory, MiB */
} nn_gpu_sample;

/*
 * Opens a monitor for one device, found by its PCI bus id ("0000:3b:00.0",
 * as cudaDeviceGetPCIBusId gives it; NVML numbers devices without regard
 * to CUDA_VISIBLE_DEVICES) or, when pci_bus_id is NULL or empty, by NVML
 * index `index`. lib names the library to dlopen (NULL: the driver's
 * "libnvidia-ml.so.1"). Returns a monitor, or NULL when the library, a
 * symbol, NVML's start or the device is missing; *why (may be NULL) then
 * points at a static line saying which.
 */
nn_gpumon *nn_gpumon_open(const char *lib, const char *pci_bus_id, int index,
			  const char **why);
/* One sample: 0, or -1 when NVML fails (s untouched). */
int nn_gpumon_sample(nn_gpumon *g, nn_gpu_sample *s);
/* Shuts NVML down (once per open) and unloads it. g may be NULL. */
void nn_gpumon_close(nn_gpumon *g);

/*
 * Writes the metrics line of one sample, without the newline:
 * {"type":"gpu","rank":R,"device":D,"wall_s":W,"util":U,
 *  "mem_used_mib":M,"mem_total_mib":T}
 * Returns its length, or -1 when it does not fit in cap bytes.
 */
int nn_gpu_line(char *buf, size_t cap, int rank, int device, double wall_s,
		const nn_gpu_sample *s);

#endif
