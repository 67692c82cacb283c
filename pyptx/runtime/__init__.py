"""Running compiled kernels: argument checking and device choice (`launch`), the GPU path over
cuda-python's driver API (`driver`, `gpu`, `device_array`, `profile`) and the CPU PTX executor
(`cpu`).  Importing this package touches no driver: everything loads on first use.
"""
