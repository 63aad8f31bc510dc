/*
 * optim.cu - the optimiser updates on the device: train/optim.c's sgd_run
 * and adam_run, one launch per batch of runs (nn_optim_runs: up to 240
 * tensors of the parameter block), one CUDA block per NN_OPTIM_BLOCK
 * elements of a run, as the CPU's loop walks them.
 *
 * Operation for operation the CPU loops' float arithmetic, every product,
 * sum, quotient and square root rounded on its own (__fmul_rn, __fadd_rn,
 * __fdiv_rn, __fsqrt_rn) so that nvcc fuses nothing the CPU rounds twice:
 * the same inputs give the CPU's bits. The per-step scalars come from
 * optim.c, computed once on the host.
 */
#include "train/cuda/cuda_kernels.h"
#include "train/cuda/cuda_launch.cuh"

__global__ static void sgd(float *p, const float *g, float *buf,
			   const nn_optim_runs r, float wd_decay, float mom,
			   int first, int nesterov, float neg_lr)
{
	for (uint32_t blk = blockIdx.x; blk < r.blocks; blk += gridDim.x) {
		size_t lo, hi;
		const float wd = nn_optim_block(&r, blk, &lo, &hi) ? wd_decay : 0.0f;
		for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
			float d = g[i];
			if (wd != 0.0f)
				d = __fadd_rn(d, __fmul_rn(wd, p[i]));
			if (mom != 0.0f) {
				const float b = first ? d
						      : __fadd_rn(__fmul_rn(buf[i], mom), d);
				buf[i] = b;
				d = nesterov ? __fadd_rn(d, __fmul_rn(mom, b)) : b;
			}
			p[i] = __fadd_rn(p[i], __fmul_rn(neg_lr, d));
		}
	}
}

/* optim.c's lerp: ATen's, exact at weight 0 and 1 */
__device__ static inline float lerp(float self, float end, float w)
{
	return fabsf(w) < 0.5f
		       ? __fadd_rn(self, __fmul_rn(w, __fsub_rn(end, self)))
		       : __fsub_rn(end, __fmul_rn(__fsub_rn(end, self),
						  __fsub_rn(1.0f, w)));
}

__global__ static void adam(float *p, const float *g, float *m, float *v,
			    const nn_optim_runs r, nn_adam_scalars c,
			    float l2_decay, int decoupled_decay)
{
	for (uint32_t blk = blockIdx.x; blk < r.blocks; blk += gridDim.x) {
		size_t lo, hi;
		const int decay = nn_optim_block(&r, blk, &lo, &hi);
		const float l2 = decay ? l2_decay : 0.0f;
		const int decoupled = decay && decoupled_decay;
		for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
			float gi = g[i];
			float pi = p[i];
			if (decoupled)
				pi = __fmul_rn(pi, c.decay_mul);
			if (l2 != 0.0f)
				gi = __fadd_rn(gi, __fmul_rn(l2, pi));
			const float mi = lerp(m[i], gi, c.w1);
			const float vi = __fadd_rn(__fmul_rn(v[i], c.beta2),
						   __fmul_rn(__fmul_rn(c.w2, gi), gi));
			m[i] = mi;
			v[i] = vi;
			const float denom = __fadd_rn(
				__fdiv_rn(__fsqrt_rn(vi), c.bc2_sqrt), c.eps);
			p[i] = __fadd_rn(pi,
					 __fdiv_rn(__fmul_rn(c.neg_step, mi), denom));
		}
	}
}

static unsigned run_blocks(const nn_optim_runs *r)
{
	return r->blocks > NN_CUDA_MAX_BLOCKS ? NN_CUDA_MAX_BLOCKS : r->blocks;
}

extern "C" cudaError_t nn_cuda_k_sgd(cudaStream_t s, float *p, const float *g,
				     float *buf, const nn_optim_runs *r,
				     float wd, float mom, int first,
				     int nesterov, float neg_lr)
{
	if (!r->blocks)
		return cudaSuccess;
	NN_LAUNCH(sgd, run_blocks(r), NN_CUDA_THREADS, s)(
		p, g, buf, *r, wd, mom, first, nesterov, neg_lr);
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_adam(cudaStream_t s, float *p, const float *g,
				      float *m, float *v,
				      const nn_optim_runs *r,
				      const nn_adam_scalars *c, float l2,
				      int decoupled)
{
	if (!r->blocks)
		return cudaSuccess;
	NN_LAUNCH(adam, run_blocks(r), NN_CUDA_THREADS, s)(
		p, g, m, v, *r, *c, l2, decoupled);
	return cudaGetLastError();
}
