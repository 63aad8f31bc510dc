/*
 * cuda_host_run.h - runs the CUDA backend's own kernels (the .cu files of
 * train/cuda/) on the host, so that a machine without a GPU checks what
 * they compute.
 *
 * A .cu file compiled as C++ after this header (tests/train/CMakeLists.txt
 * makes one translation unit per file) gets:
 *   - NN_LAUNCH(kernel, grid, block, stream)(args): every block of the
 *     grid in turn, each thread of a block as a fiber (ucontext), so
 *     __syncthreads() is a real barrier: a round runs every live thread
 *     up to its next barrier or its end, and the next round starts when
 *     all have arrived;
 *   - threadIdx, blockIdx, blockDim, gridDim as globals the scheduler
 *     sets before each switch;
 *   - __shared__ as static storage: blocks run one after another, so one
 *     copy per kernel serves them all;
 *   - the rounding intrinsics the kernels use (__fmul_rn, ...) as single
 *     IEEE operations (the host compiler must not contract: the kernel
 *     test is built with -ffp-contract=off), and the bf16/fp16
 *     conversions from cuda_bf16.h and cuda_fp16.h, which have host
 *     definitions;
 *   - device memory as host memory: cudaMemsetAsync, cudaMemcpyAsync and
 *     cudaStreamSynchronize act at once on host pointers.
 *
 * What it cannot show: races between threads (the order is fixed),
 * warp-level behaviour (the kernels use none), speed, and nvcc's own
 * contraction of a * b + c into one FMA where a kernel does not round
 * on its own: the kernel test holds such results to tolerances.
 */
#ifndef IMSHARD_CUDA_HOST_RUN_H
#define IMSHARD_CUDA_HOST_RUN_H

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

#undef __global__
#undef __device__
#undef __shared__
#undef __forceinline__
#define __global__
#define __device__
#define __shared__ static
#define __forceinline__ inline

inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

namespace nn_host_run {

struct fiber_set {
	std::vector<ucontext_t> ctx;
	std::vector<char> stacks;
	std::vector<int> done;
	ucontext_t sched;
	ucontext_t *cur = nullptr;
	int *cur_done = nullptr;
	std::function<void()> *body = nullptr;
};

inline fiber_set fibers;

/* a kernel's locals and shared arrays are small; 64 KiB is ample */
constexpr size_t STACK = 64 * 1024;

inline void fiber_main()
{
	(*fibers.body)();
	*fibers.cur_done = 1;
	swapcontext(fibers.cur, &fibers.sched);
}

inline void barrier()
{
	swapcontext(fibers.cur, &fibers.sched);
}

inline void run_block(dim3 b, std::function<void()> &body)
{
	fiber_set &f = fibers;
	const unsigned n = b.x * b.y * b.z;
	if (f.ctx.size() < n) {
		f.ctx.resize(n);
		f.stacks.resize((size_t)n * STACK);
	}
	f.done.assign(n, 0);
	f.body = &body;
	for (unsigned t = 0; t < n; t++) {
		getcontext(&f.ctx[t]);
		f.ctx[t].uc_stack.ss_sp = &f.stacks[(size_t)t * STACK];
		f.ctx[t].uc_stack.ss_size = STACK;
		f.ctx[t].uc_link = nullptr;
		makecontext(&f.ctx[t], fiber_main, 0);
	}
	for (int live = 1; live;) {
		live = 0;
		for (unsigned t = 0; t < n; t++) {
			if (f.done[t])
				continue;
			threadIdx.x = t % b.x;
			threadIdx.y = t / b.x % b.y;
			threadIdx.z = t / (b.x * b.y);
			f.cur = &f.ctx[t];
			f.cur_done = &f.done[t];
			swapcontext(&f.sched, &f.ctx[t]);
			live |= !f.done[t];
		}
	}
}

/* NN_LAUNCH(kernel, grid, block, stream) is launcher{grid, block, kernel} */
template <typename K> struct launcher {
	dim3 grid, block;
	K kernel;
	template <typename... A> void operator()(A... args) const
	{
		std::function<void()> body = [&] { kernel(args...); };
		blockDim = block;
		gridDim = grid;
		for (unsigned z = 0; z < grid.z; z++)
			for (unsigned y = 0; y < grid.y; y++)
				for (unsigned x = 0; x < grid.x; x++) {
					blockIdx.x = x;
					blockIdx.y = y;
					blockIdx.z = z;
					run_block(block, body);
				}
	}
};

template <typename K> launcher<K> launch(dim3 grid, dim3 block, K kernel)
{
	return launcher<K>{grid, block, kernel};
}

} // namespace nn_host_run

#define NN_LAUNCH(kernel, grid, block, stream)                                 \
	(void)(stream), nn_host_run::launch(dim3(grid), dim3(block), kernel)
#define __syncthreads() nn_host_run::barrier()

/* launches cannot fail here; a bad argument shows in the results */
#define cudaGetLastError() cudaSuccess
#define cudaMemsetAsync(p, v, n, s) (memset((p), (v), (n)), cudaSuccess)
#define cudaMemcpyAsync(d, s_, n, kind, s) (memcpy((d), (s_), (n)), cudaSuccess)
#define cudaStreamSynchronize(s) cudaSuccess

/* kernels pass NULL for pointer arguments through the launcher's
 * template, where a plain 0 would not convert */
#undef NULL
#define NULL nullptr

static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }

#endif
