# Spack package for loom, for sites that install with Spack.
# NOT TESTED: no Spack installation is available where loom is built and
# tested (CI tests the Debian packages and `make install` instead). Copy this
# file into a Spack repository as packages/loom/package.py and report what
# breaks.
import os

from spack.package import *


class Loom(AutotoolsPackage, CudaPackage):
    """GPU collectives for Open MPI: a coll component (coll/loom) that runs
    MPI_Allreduce, MPI_Bcast, MPI_Reduce, MPI_Allgather(v) and
    MPI_Reduce_scatter(_block) on CUDA device buffers with loom's own ring,
    tree and one-shot kernels."""

    homepage = "https://example.invalid/loom"
    git = "https://example.invalid/loom.git"

    version("main", branch="main")

    variant("ucx", default=True, description="Build the UCX network plugin")

    depends_on("autoconf", type="build")
    depends_on("automake", type="build")
    depends_on("libtool", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("check", type="build")
    # Both Open MPI lines loom builds against. Open MPI 5.0's install lacks
    # some internal headers a coll component needs (the threads component's):
    # configure takes them from a source tree of the same version, given in
    # LOOM_OMPI_SRC (e.g. the openmpi tarball unpacked; `spack stage openmpi`).
    depends_on("openmpi@4.1:4.1,5.0:5.0")
    depends_on("hwloc")
    depends_on("rdma-core")  # verbs headers; libibverbs is opened at run time
    depends_on("ucx", when="+ucx")
    conflicts("~cuda", msg="loom needs CUDA")

    def autoreconf(self, spec, prefix):
        bash = which("bash")
        bash("./autogen.sh")

    def configure_args(self):
        spec = self.spec
        args = [
            "--with-cuda={0}".format(spec["cuda"].prefix),
            "--with-ompi={0}".format(spec["openmpi"].prefix),
            # the component goes under loom's prefix; the run environment
            # below adds it to Open MPI's search path
            "--with-ompi-component-dir={0}".format(join_path(self.prefix.lib, "openmpi")),
        ]
        # Every arch asked for (SASS each, PTX of the highest); none asked:
        # configure's release set (sm_80 ... sm_120 + PTX).
        cuda_arch = [a for a in spec.variants["cuda_arch"].value if a != "none"]
        args.append("--with-cuda-arch={0}".format(",".join(cuda_arch) if cuda_arch else "release"))
        if spec.satisfies("^openmpi@5:") and os.environ.get("LOOM_OMPI_SRC"):
            args.append("--with-ompi-src={0}".format(os.environ["LOOM_OMPI_SRC"]))
        if "~ucx" in spec:
            args.append("--without-ucx")
        return args

    def setup_run_environment(self, env):
        ompi_pkglibdir = join_path(self.spec["openmpi"].prefix.lib, "openmpi")
        env.append_path("OMPI_MCA_mca_base_component_path", ompi_pkglibdir)
        env.append_path("OMPI_MCA_mca_base_component_path", join_path(self.prefix.lib, "openmpi"))
