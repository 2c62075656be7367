"""C++ (and Python) code generation with Debian's protoc and grpc_cpp_plugin."""

def _stem(src):
    return src[:-len(".proto")]

def cc_grpc_proto_library(name, srcs, proto_root, deps = [], visibility = None):
    """Generates .pb and .grpc.pb C++ for srcs (paths under proto_root) and
    wraps them in one cc_library whose includes make
    `#include "<path>.grpc.pb.h"` work."""
    outs = []
    for src in srcs:
        stem = _stem(src)
        outs += [stem + ".pb.h", stem + ".pb.cc", stem + ".grpc.pb.h", stem + ".grpc.pb.cc"]
    native.genrule(
        name = name + "_codegen",
        srcs = srcs,
        outs = outs,
        cmd = " ".join([
            "/usr/bin/protoc",
            "-I" + proto_root,
            "--cpp_out=$(GENDIR)/" + proto_root,
            "--grpc_out=$(GENDIR)/" + proto_root,
            "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin",
        ] + ["$(location " + s + ")" for s in srcs]),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["//third_party:grpc", "//third_party:protobuf"],
        visibility = visibility,
    )

def py_proto_files(name, srcs, proto_root, visibility = None):
    """Generates Python message modules (<path>_pb2.py) for srcs."""
    outs = [_stem(s) + "_pb2.py" for s in srcs]
    native.genrule(
        name = name,
        srcs = srcs,
        outs = outs,
        cmd = "/usr/bin/protoc -I" + proto_root + " --python_out=$(GENDIR)/" + proto_root + " " +
              " ".join(["$(location " + s + ")" for s in srcs]),
        visibility = visibility,
    )
