/*
 * cuda_launch.cuh - launch shapes and the block reduction shared by the
 * backend's .cu files.
 *
 * Element-wise kernels are grid-stride loops over size_t indices with
 * NN_CUDA_THREADS threads per block and at most NN_CUDA_MAX_BLOCKS
 * blocks. Reductions give one block of NN_CUDA_THREADS threads to each
 * output (a channel, a sample): each thread sums a fixed strided subset
 * in double, then a fixed tree combines the threads, so the result
 * depends on the data alone.
 */
#ifndef IMSHARD_CUDA_LAUNCH_CUH
#define IMSHARD_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>
#include <stddef.h>

/*
 * NN_LAUNCH(kernel, grid, block, stream)(arguments...): a launch with no
 * dynamic shared memory. A build may define it first to run the kernels
 * elsewhere: the kernel tests run them on the host
 * (tests/train/cuda_host_run.h).
 */
#ifndef NN_LAUNCH
#define NN_LAUNCH(kernel, grid, block, stream)                                 \
	kernel<<<(grid), (block), 0, (stream)>>>
#endif

/* NN_LAUNCH_OVER(kernel, count, stream)(...): an element-wise kernel over
 * count items, NN_CUDA_THREADS to a block */
#define NN_LAUNCH_OVER(kernel, count, stream)                                  \
	NN_LAUNCH(kernel, nn_cuda_blocks(count), NN_CUDA_THREADS, stream)

#define NN_CUDA_THREADS 256
#define NN_CUDA_MAX_BLOCKS 65535u

static inline unsigned nn_cuda_blocks(size_t count)
{
	size_t b = (count + NN_CUDA_THREADS - 1) / NN_CUDA_THREADS;
	return b > NN_CUDA_MAX_BLOCKS ? NN_CUDA_MAX_BLOCKS : (unsigned)b;
}

#define NN_CUDA_FOR_EACH(i, count)                                             \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;         \
	     i < (count); i += (size_t)gridDim.x * blockDim.x)

/*
 * Sums v over the block (blockDim.x == NN_CUDA_THREADS, every thread
 * calling) in a fixed tree and returns the total to every thread. sh is NN_CUDA_THREADS doubles of shared
 * memory, free again on return.
 */
__device__ static inline double nn_cuda_block_sum(double v, double *sh)
{
	const unsigned t = threadIdx.x;
	sh[t] = v;
	__syncthreads();
	for (unsigned s = NN_CUDA_THREADS / 2; s > 0; s >>= 1) {
		if (t < s)
			sh[t] += sh[t + s];
		__syncthreads();
	}
	double total = sh[0];
	__syncthreads();
	return total;
}

#endif
