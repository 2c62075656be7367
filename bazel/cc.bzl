"""cc_unit: the library most targets are, one NAME.cc and its NAME.h.

    cc_unit(name = "atomic_file", deps = [...])

is cc_library(name = "atomic_file", srcs = ["atomic_file.cc"],
hdrs = ["atomic_file.h"], deps = [...]). Any other attribute (testonly,
alwayslink, ...) passes through; a library of several files, or of files in
a subfolder, is a plain cc_library.
"""

def cc_unit(name, **kwargs):
    if "srcs" in kwargs or "hdrs" in kwargs:
        fail("cc_unit %s: its files are %s.cc and %s.h; use cc_library for others" % (name, name, name))
    native.cc_library(
        name = name,
        srcs = [name + ".cc"],
        hdrs = [name + ".h"],
        **kwargs
    )

# Lets GCC vectorise loops its default cost model leaves scalar (it changes
# no arithmetic: no reassociation, no contraction). GCC-only: the fuzz build
# is clang, which rejects the flag.
VECTORIZE_COPTS = select({
    "//bazel:fuzzing": [],
    "//conditions:default": ["-fvect-cost-model=dynamic"],
})
