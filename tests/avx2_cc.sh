#!/bin/sh
# A C compiler for the tests: the system's cc building kernels for AVX2 (Haswell) instead of this
# machine's own instruction set, so an AVX-512 machine also runs the AVX2 code paths.
for a in "$@"; do
  shift
  [ "$a" = "-march=native" ] && a="-march=haswell"
  set -- "$@" "$a"
done
exec cc "$@"
