#!/usr/bin/env bash
# Builds the corescape OCI image offline: the three daemons and the CLI on an
# empty base (`buildah from scratch`), with exactly the shared libraries they
# link (ldd), the UCX transport modules they load at run time, and the
# files under deploy/image/ (the corescape user, name service config).
# Everything in it comes from this build and Debian's packages (the CUDA
# image adds the CUDA runtime library from /usr/local/cuda).
#
#   scripts/build_image.sh [--config cuda] [--binaries DIR] [--archive FILE] [--tag TAG]
#
#   --config cuda   build the binaries with `bazel build --config=cuda` (the
#                   GPU image: the CUDA runtime library comes from
#                   /usr/local/cuda, the driver from the node at run time),
#                   named localhost/corescape-cuda
#   --binaries DIR  take the four binaries from DIR instead of building them
#                   with Bazel (DIR holds corescape-scheduler, corescape-worker,
#                   corescape-attention-server and corescape, at any depth)
#   --archive FILE  also write the image to FILE as an OCI archive
#   --tag TAG       image tag (default: the contents of VERSION)
#
# The last line printed is the image reference, e.g. localhost/corescape:0.1.0.
# Storage is buildah's default; set CONTAINERS_STORAGE_CONF to use another.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly BINARIES=(corescape-scheduler corescape-worker corescape-attention-server corescape)
readonly TARGETS=(//scheduler:corescape-scheduler //worker:corescape-worker
                  //attention_server:corescape-attention-server //client:corescape)
readonly UCX_MODULE_DIR=/usr/lib/x86_64-linux-gnu/ucx

binaries_dir=""
archive=""
config=""
tag=""
while (($#)); do
  case "$1" in
    --config) config="$2"; shift 2 ;;
    --binaries) binaries_dir="$2"; shift 2 ;;
    --archive) archive="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    *) echo "build_image.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ -z $tag ]]; then
  tag="$(tr -d '[:space:]' < VERSION)"
fi
bazel_flags=(${config:+--config=$config})
command -v buildah > /dev/null || { echo "build_image.sh: buildah missing (run scripts/setup.sh)" >&2; exit 1; }

# The binaries: built here, or found under the given directory.
declare -A binary_path
if [[ -z $binaries_dir ]]; then
  bazel build "${bazel_flags[@]}" "${TARGETS[@]}" >&2
  bazel_bin="$(bazel info "${bazel_flags[@]}" bazel-bin 2> /dev/null)"
  for target in "${TARGETS[@]}"; do
    package="${target#//}"
    binary_path[${target#*:}]="$bazel_bin/${package%%:*}/${target#*:}"
  done
else
  for name in "${BINARIES[@]}"; do
    found="$(find -L "$binaries_dir" -type f -name "$name" -perm -u+x -print -quit)"
    [[ -n $found ]] || { echo "build_image.sh: no $name under $binaries_dir" >&2; exit 1; }
    binary_path[$name]="$found"
  done
fi

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
# Debian's merged-/usr layout, so library paths from ldd land where the
# dynamic loader looks for them.
mkdir -p "$stage"/usr/{lib/x86_64-linux-gnu,lib64,local/bin} "$stage"/etc \
         "$stage"/{proc,sys,dev} \
         "$stage"/tmp "$stage"/var/lib/corescape
ln -s usr/lib "$stage/lib"
ln -s usr/lib64 "$stage/lib64"
chmod 1777 "$stage/tmp"

# Copies each shared library ELF file $1.. needs (ldd), dereferenced, to the
# same path in the image; fails on a library ldd cannot find.
copy_libraries() {
  local line lib
  while read -r line; do
    case "$line" in
      *"not found"*) echo "build_image.sh: $1: $line" >&2; return 1 ;;
      *"=> /"*) lib="${line#*=> }"; lib="${lib%% (*}" ;;
      /*) lib="${line%% (*}" ;;   # the dynamic loader itself
      *) continue ;;             # linux-vdso
    esac
    if [[ ! -e $stage$lib ]]; then
      mkdir -p "$(dirname "$stage$lib")"
      cp -L "$lib" "$stage$lib"
    fi
  done < <(ldd "$1")
}

for name in "${BINARIES[@]}"; do
  install -m 0755 "${binary_path[$name]}" "$stage/usr/local/bin/$name"
  copy_libraries "${binary_path[$name]}"
done
# UCX opens its transport modules with dlopen, so ldd does not list them:
# take each one whose own libraries are all present on this machine.
if [[ -d $UCX_MODULE_DIR ]]; then
  mkdir -p "$stage$UCX_MODULE_DIR"
  for module in "$UCX_MODULE_DIR"/*.so.0; do
    if ldd "$module" | grep -q "not found"; then continue; fi
    cp -L "$module" "$stage$module"
    copy_libraries "$module"
  done
fi
install -m 0644 deploy/image/passwd deploy/image/group deploy/image/nsswitch.conf \
        deploy/image/hosts "$stage/etc/"
# The daemons' user, as deploy/image/passwd defines it.
uid="$(awk -F: '$1 == "corescape" { print $3 }' deploy/image/passwd)"
gid="$(awk -F: '$1 == "corescape" { print $3 }' deploy/image/group)"
chown -R "$uid:$gid" "$stage/var/lib/corescape"

image="localhost/corescape${config:+-$config}:$tag"
container="$(buildah from scratch)"
cleanup() { buildah rm "$container" > /dev/null 2>&1 || true; rm -rf "$stage"; }
trap cleanup EXIT
buildah copy --quiet "$container" "$stage" / > /dev/null
buildah config \
  --user "$uid:$gid" \
  --workingdir /var/lib/corescape \
  --env PATH=/usr/local/bin \
  --env TMPDIR=/tmp \
  --label org.opencontainers.image.title=corescape \
  --label org.opencontainers.image.version="$tag" \
  --cmd /usr/local/bin/corescape \
  "$container"
buildah commit --quiet --rm "$container" "$image" > /dev/null
if [[ -n $archive ]]; then
  rm -f "$archive"
  buildah push --quiet "$image" "oci-archive:$archive:$image" > /dev/null
fi
echo "$image"
