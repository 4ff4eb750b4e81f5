#!/usr/bin/env bash
# Sums KILN_DEBUG=2's per-kernel times by kernel name and prints the largest: where a program's GPU
# (or CPU) time goes. Usage: KILN_DEBUG=2 program ... 2>&1 | tools/kernel_profile.sh [N]
awk '/^kiln:   [^ ]+ +[0-9.]+ ms/ { t[$2] += $3; n[$2]++; total += $3 }
     END { for (k in t) printf "%10.3f ms %5d x  %s\n", t[k], n[k], k; printf "%10.3f ms total\n", total }' |
  sort -rn | head -"${1:-20}"
