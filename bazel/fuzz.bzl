"""cc_fuzz_target: a libFuzzer target and the CI test that runs its seeds.

Under --config=fuzz (clang, libFuzzer, ASan + UBSan; scripts/fuzz.sh) `name`
is a libFuzzer binary. In every other build it links //fuzz:seed_driver
instead, and `name + "_test"` runs its seed corpus and deterministic
mutations of it, failing on a crash or when a seed no longer parses.
`regressions`: input files the fuzzer once crashed on, run by the test too
(under --config=asan they fail again if the fix is undone).
"""

def cc_fuzz_target(name, srcs, deps = [], regressions = [], **kwargs):
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        deps = deps + ["//fuzz:fuzz_target"] + select({
            "//bazel:fuzzing": ["//fuzz:libfuzzer_hooks"],
            "//conditions:default": ["//fuzz:seed_driver"],
        }),
        linkopts = select({
            "//bazel:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        **kwargs
    )
    native.sh_test(
        name = name + "_test",
        size = "small",
        srcs = ["//fuzz:run_seeds.sh"],
        args = ["$(location :%s)" % name] + ["$(location %s)" % f for f in regressions],
        data = [":" + name] + regressions,
        tags = ["fuzz_seeds"],
    )
