/*
 * softmax_xent.cu - softmax cross-entropy with label smoothing
 * (train/layers/softmax_xent.c on the device).
 *
 * Three kernels on the stream: the labels are checked first (the first
 * sample with a label outside [0, K), found by a fixed-order min, so the
 * report is the CPU's); then one block per sample computes, in double,
 *   lse = max + log sum exp(z - max),
 *   loss = (1 - s) (lse - z_label) + s (lse - mean z),
 *   dlogits_j = scale (exp(z_j - lse) - target_j),
 * doing nothing when a label was bad; then one thread adds the per-sample
 * losses in index order, as the CPU does. The block sums within a sample
 * run in a fixed tree, so the loss is deterministic and within double
 * rounding of the CPU's. The result comes back with one copy.
 *
 * The training step's variant (nn_xent_tally) scores top-1 in the same
 * per-sample block and adds the step's sums to a tally in device memory,
 * with no copy and no wait: the loop reads the tally when it reports.
 */
#include <math.h>

#include "train/cuda/cuda_kernels.h"
#include "train/cuda/cuda_launch.cuh"

/* The workspace: n per-sample losses, then the result. */
static size_t losses_bytes(int n)
{
	return ((size_t)n * sizeof(double) + 255) & ~(size_t)255;
}

extern "C" size_t nn_cuda_k_xent_workspace(int n)
{
	return losses_bytes(n) + 256;
}

__global__ static void check_labels(int n, int k, const int32_t *labels,
				    nn_cuda_xent_result *res)
{
	__shared__ int first[NN_CUDA_THREADS];
	const unsigned t = threadIdx.x;
	int bad = n;
	for (int i = (int)t; i < n; i += blockDim.x)
		if (labels[i] < 0 || labels[i] >= k) {
			bad = i;
			break; /* later ones of this thread are larger */
		}
	first[t] = bad;
	__syncthreads();
	for (unsigned s = NN_CUDA_THREADS / 2; s > 0; s >>= 1) {
		if (t < s && first[t + s] < first[t])
			first[t] = first[t + s];
		__syncthreads();
	}
	if (t == 0) {
		res->loss_sum = 0.0;
		res->bad_sample = first[0] < n ? first[0] : -1;
		res->bad_label = first[0] < n ? labels[first[0]] : 0;
	}
}

__global__ static void per_sample(int k, const float *logits,
				  const int32_t *labels, double smoothing,
				  double scale, float *dlogits, double *loss,
				  double *hit, const nn_cuda_xent_result *res)
{
	__shared__ double sh[NN_CUDA_THREADS];
	__shared__ float shf[NN_CUDA_THREADS];
	if (res->bad_sample >= 0)
		return; /* the whole block returns together */
	const int i = blockIdx.x;
	const unsigned t = threadIdx.x;
	const float *z = logits + (size_t)i * k;
	/* the max: order does not matter for it */
	float mx = z[0];
	for (int j = (int)t; j < k; j += blockDim.x)
		mx = z[j] > mx ? z[j] : mx;
	shf[t] = mx;
	__syncthreads();
	for (unsigned s = NN_CUDA_THREADS / 2; s > 0; s >>= 1) {
		if (t < s && shf[t + s] > shf[t])
			shf[t] = shf[t + s];
		__syncthreads();
	}
	mx = shf[0];
	double se = 0, sz = 0;
	for (int j = (int)t; j < k; j += blockDim.x) {
		se += exp((double)z[j] - mx);
		sz += z[j];
	}
	se = nn_cuda_block_sum(se, sh);
	sz = nn_cuda_block_sum(sz, sh);
	const double lse = mx + log(se);
	const int label = labels[i];
	const double on = 1.0 - smoothing, off = smoothing / k;
	if (t == 0)
		loss[i] = on * (lse - (double)z[label]) +
			  smoothing * (lse - sz / k);
	if (hit) {
		/* top-1 as nn_topk_correct: the label's place in a stable
		 * descending sort (a NaN logit is a miss) */
		const float v = z[label];
		double above = 0;
		for (int j = (int)t; j < k; j += blockDim.x)
			above += z[j] > v || (z[j] == v && j < label) ? 1.0 : 0.0;
		above = nn_cuda_block_sum(above, sh);
		if (t == 0)
			hit[i] = !isnan(v) && above < 1.0 ? 1.0 : 0.0;
	}
	if (!dlogits)
		return;
	float *g = dlogits + (size_t)i * k;
	for (int j = (int)t; j < k; j += blockDim.x) {
		const double target = j == label ? on + off : off;
		g[j] = (float)(scale * (exp((double)z[j] - lse) - target));
	}
}

__global__ static void sum_losses(int n, const double *loss,
				  nn_cuda_xent_result *res)
{
	if (res->bad_sample >= 0)
		return;
	double total = 0;
	for (int i = 0; i < n; i++)
		total += loss[i];
	res->loss_sum = total;
}

extern "C" cudaError_t nn_cuda_k_xent(cudaStream_t s, int n, int k,
				      const float *logits,
				      const int32_t *labels, float smoothing,
				      float scale, float *dlogits,
				      void *workspace,
				      nn_cuda_xent_result *out)
{
	double *loss = (double *)workspace;
	nn_cuda_xent_result *res =
		(nn_cuda_xent_result *)((char *)workspace + losses_bytes(n));
	NN_LAUNCH(check_labels, 1, NN_CUDA_THREADS, s)(n, k, labels, res);
	NN_LAUNCH(per_sample, (unsigned)n, NN_CUDA_THREADS, s)(
		k, logits, labels, (double)smoothing, (double)scale, dlogits,
		loss, NULL, res);
	NN_LAUNCH(sum_losses, 1, 1, s)(n, loss, res);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return e;
	e = cudaMemcpyAsync(out, res, sizeof(*out), cudaMemcpyDeviceToHost, s);
	if (e != cudaSuccess)
		return e;
	return cudaStreamSynchronize(s);
}

/* nn_cpu_xent_tally's sums, in its order: the step's losses in index
 * order, then added to the tally; the hits likewise. */
__global__ static void add_tally(int n, const double *loss, const double *hit,
				 const nn_cuda_xent_result *res, long long step,
				 nn_tally *t)
{
	if (res->bad_sample >= 0) {
		if (!t->bad_label_step)
			t->bad_label_step = step;
		return;
	}
	double total = 0, hits = 0;
	for (int i = 0; i < n; i++)
		total += loss[i];
	for (int i = 0; i < n; i++)
		hits += hit[i];
	t->loss_sum += total;
	t->correct += hits;
	if (!isfinite(total) && !t->nonfinite_step)
		t->nonfinite_step = step;
}

extern "C" size_t nn_cuda_k_xent_tally_workspace(int n)
{
	return 2 * losses_bytes(n) + 256;
}

extern "C" cudaError_t nn_cuda_k_xent_tally(cudaStream_t s, int n, int k,
					    const float *logits,
					    const int32_t *labels,
					    float smoothing, float scale,
					    float *dlogits, int64_t step,
					    void *workspace, nn_tally *tally)
{
	double *loss = (double *)workspace;
	double *hit = (double *)((char *)workspace + losses_bytes(n));
	nn_cuda_xent_result *res =
		(nn_cuda_xent_result *)((char *)workspace + 2 * losses_bytes(n));
	NN_LAUNCH(check_labels, 1, NN_CUDA_THREADS, s)(n, k, labels, res);
	NN_LAUNCH(per_sample, (unsigned)n, NN_CUDA_THREADS, s)(
		k, logits, labels, (double)smoothing, (double)scale, dlogits,
		loss, hit, res);
	NN_LAUNCH(add_tally, 1, 1, s)(n, loss, hit, res, (long long)step, tally);
	return cudaGetLastError();
}
