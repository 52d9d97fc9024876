from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="kernels_app",
    packages=["kernels_app"],
    install_requires=["torch>=2.1", "triton"],
    ext_modules=[CUDAExtension("kernels_app._C", ["csrc/ops.cpp", "csrc/scale_kernel.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
