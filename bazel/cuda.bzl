"""cuda_library: .cu files compiled by nvcc into a cc_library, only under
--config=cuda (//third_party:with_cuda); the default build has no CUDA.

    cuda_library(
        name = "optim_updates_cuda",
        srcs = ["optim_updates.cu"],         # nvcc, one object each
        hdrs = ["optim_updates_cuda.h"],     # the launches' declarations (g++)
        cu_hdrs = ["optim_updates.h"],       # headers the .cu files include
        deps = [...],                        # cc deps of the library
    )

Each .cu becomes one genrule running /usr/local/cuda/bin/nvcc (C++20, -O2,
sm_90 code plus compute_90 PTX, -fPIC) into an object linked into the
cc_library. nvcc sees only the files listed in srcs and cu_hdrs (a genrule
has no view of cc deps' headers) plus the system include paths, where Abseil
and the CUDA toolkit live. The genrules are tagged manual so `bazel build
//...` without --config=cuda never runs nvcc; they build when the library
needs them. `nvcc_opts` adds flags (e.g. --fmad=false where results must
match a CPU reference bit for bit).
"""

_NVCC = "/usr/local/cuda/bin/nvcc"

_NVCC_OPTS = [
    "-std=c++20",
    "-O2",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
    "-Xcompiler -fPIC",
    "--expt-relaxed-constexpr",
    "-DCORESCAPE_WITH_CUDA=1",
]

def cuda_library(name, srcs, hdrs = [], cu_hdrs = [], deps = [], nvcc_opts = [], **kwargs):
    objects = []
    for src in srcs:
        if not src.endswith(".cu"):
            fail("cuda_library %s: %s is not a .cu file" % (name, src))
        obj = "%s_%s.o" % (name, src[:-len(".cu")].replace("/", "_"))
        native.genrule(
            name = "%s_%s_nvcc" % (name, src[:-len(".cu")].replace("/", "_")),
            srcs = [src] + hdrs + cu_hdrs,
            outs = [obj],
            # nvcc names its temporaries after its pid; the sandbox gives
            # every action its own pid namespace over one shared /tmp, so
            # two concurrent nvcc runs would overwrite each other's files
            # ("Failed to open for read host compiler properties"). Each
            # run gets a private TMPDIR.
            cmd = " ".join([
                "NVCC_TMP=$$(mktemp -d) &&",
                "TMPDIR=$$NVCC_TMP",
                _NVCC,
            ] + _NVCC_OPTS + nvcc_opts + [
                "-I.",
                "-I$(GENDIR)",
                "-c $(location %s)" % src,
                "-o $@;",
                "status=$$?; rm -rf $$NVCC_TMP; exit $$status",
            ]),
            tags = ["manual"],
            visibility = ["//visibility:private"],
        )
        objects.append(":" + obj)
    native.cc_library(
        name = name,
        srcs = select({
            "//third_party:with_cuda": objects,
            "//conditions:default": [],
        }),
        hdrs = select({
            "//third_party:with_cuda": hdrs,
            "//conditions:default": [],
        }),
        deps = deps + select({
            "//third_party:with_cuda": ["@cuda//:cudart"],
            "//conditions:default": [],
        }),
        **kwargs
    )
