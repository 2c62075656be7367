"""python_test: a multi-process test written in Python (NAME.py beside its
BUILD file), run by //tests:run_python_test.sh with Debian's interpreter."""

def python_test(name, size, data = [], tags = []):
    native.sh_test(
        name = name,
        size = size,
        tags = tags,
        srcs = ["//tests:run_python_test.sh"],
        args = [name + ".py"],
        data = [name + ".py"] + data,
    )
