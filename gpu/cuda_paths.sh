#!/bin/sh
# cuda_paths.sh NVCC — prints the CUDA toolkit's header directory (line 1)
# and library directory (line 2) as NVCC itself uses them, both absolute.
#
# NVCC's own location says little: it may be a wrapper script or a symlink
# somewhere on PATH (e.g. /usr/local/bin/nvcc running the toolkit's nvcc),
# and toolkits lay out include/ and lib64/ or targets/<arch>/{include,lib}.
# So ask NVCC: `--dryrun` prints its settings (INCLUDES="-I...", LIBRARIES=
# "-L.../stubs" "-L..."), read from its nvcc.profile. The directory
# next to NVCC's resolved path is the fallback.
# Exit status: 0 with both lines; 1 when no directory with cuda_runtime_api.h
# and the CUDA runtime library (libcudart_static.a or libcudart.so) is found.
set -u
nvcc=${1:?usage: cuda_paths.sh NVCC}
inc=""
lib=""
settings=$("$nvcc" --dryrun -c -x cu /dev/null -o /dev/null 2>&1) || settings=""
for word in $(printf '%s\n' "$settings" | sed -n 's/^#\$ *\(INCLUDES\|LIBRARIES\) *= *//p' | tr -d '"'); do
    case $word in
        -I*) [ -z "$inc" ] && [ -f "${word#-I}/cuda_runtime_api.h" ] && inc=${word#-I} ;;
        -L*/stubs) ;;
        -L*) d=${word#-L}
             [ -z "$lib" ] && { [ -f "$d/libcudart_static.a" ] || [ -f "$d/libcudart.so" ]; } && lib=$d ;;
    esac
done
root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
for d in "$root/include" "$root/targets/x86_64-linux/include"; do
    [ -z "$inc" ] && [ -f "$d/cuda_runtime_api.h" ] && inc=$d
done
for d in "$root/lib64" "$root/lib" "$root/targets/x86_64-linux/lib"; do
    [ -z "$lib" ] && { [ -f "$d/libcudart_static.a" ] || [ -f "$d/libcudart.so" ]; } && lib=$d
done
if [ -z "$inc" ] || [ -z "$lib" ]; then
    echo "cuda_paths.sh: $nvcc: no CUDA runtime headers and library found" \
         "(headers: ${inc:-none}, library: ${lib:-none})" >&2
    exit 1
fi
readlink -f "$inc"
readlink -f "$lib"
