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
# no arithmetic: no reassociation, no contraction). GCC-only: clang (the
# sanitizer and fuzz builds) rejects the flag.
VECTORIZE_COPTS = select({
    "//bazel:clang": [],
    "//conditions:default": ["-fvect-cost-model=dynamic"],
})

# The twins cc_test_with_deferred_twins makes by default: the device-copies
# kernels queued, mask uploads lagging behind them.
DEFERRED_TWINS = {"deferred": "kDeferredCopiesBehind"}

def cc_test_with_deferred_twins(name, twins = DEFERRED_TWINS, local_defines = [], **kwargs):
    """cc_test NAME (ending in _test), and for each (twin, execution) of
    `twins` the same test as STEM_<twin>_test with
    CORESCAPE_TEST_CPU_EXECUTION=<execution> defined: its device-copies
    backends (model::NewDeviceCopiesForTest, runtime/model/
    cpu_execution_for_test.h) queue their kernels as a GPU's stream does
    (model::CpuExecution), so a read before its wait fails there."""
    if not name.endswith("_test"):
        fail("cc_test_with_deferred_twins %s: the name must end in _test" % name)
    native.cc_test(name = name, local_defines = local_defines, **kwargs)
    stem = name[:-len("_test")]
    for twin, execution in twins.items():
        native.cc_test(
            name = "%s_%s_test" % (stem, twin),
            local_defines = local_defines + ["CORESCAPE_TEST_CPU_EXECUTION=" + execution],
            **kwargs
        )
