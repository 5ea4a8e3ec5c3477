"""ctypes access to the GPU simulator's libcudart for the Python test programs: a launch of one of
the demo kernels (libdemo_kernels.so) with a 1x32 grid, as torch's own launches would be."""
import ctypes
import os


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class SimCuda:
    def __init__(self, gpusim_dir, kernels_path, kernel=2):
        self.cudart = ctypes.CDLL(os.path.join(gpusim_dir, "libcudart.so.13"))
        self.cudart.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t,
                                                 ctypes.c_void_p]
        self.cudart.cudaDeviceSynchronize.argtypes = []
        demo = ctypes.CDLL(kernels_path)
        demo.demo_kernel_address.restype = ctypes.c_void_p
        self.kernel = demo.demo_kernel_address(kernel)
        self.launch_address = ctypes.cast(self.cudart.cudaLaunchKernel, ctypes.c_void_p).value

    def launch(self):
        """cudaLaunchKernel from the calling thread: 0 on success."""
        return self.cudart.cudaLaunchKernel(self.kernel, Dim3(1, 1, 1), Dim3(32, 1, 1), None, 0, None)
