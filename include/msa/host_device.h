// MSA_HOST_DEVICE: a function compiled for the host and, under nvcc, for the device too (the shared definitions
// that every backend, CPU and GPU, must compute identically).
#ifndef MSA_HOST_DEVICE_H_
#define MSA_HOST_DEVICE_H_

#ifdef __CUDACC__
#define MSA_HOST_DEVICE __host__ __device__
#else
#define MSA_HOST_DEVICE
#endif

#endif  // MSA_HOST_DEVICE_H_
