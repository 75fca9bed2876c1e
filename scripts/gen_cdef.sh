#!/usr/bin/env bash
# gen_cdef.sh HEADER OUT - makes the LuaJIT cdef text from include/idxlab.h: the preprocessor
# runs with IXL_CDEF defined (so no system headers are pulled in), and the status enum is
# expanded from the header's own X-macro list, so nothing is kept by hand. IXL_API (the export
# marker) is defined empty.
set -euo pipefail
hdr=$1 out=$2
cc=${CC:-cc}
# The status enum, from IXL_STATUS_LIST.
enum=$(printf '#include "%s"\nIXL_STATUS_LIST(IXL_GEN_)\n' "$(realpath "$hdr")" |
  $cc -E -P -x c -D'IXL_GEN_(n,v,m)=n = v,' - | grep -E '^ *IXL_OK' | tr -s ' ')
tmp=$(mktemp)
{
  echo "typedef long int ptrdiff_t; typedef unsigned long size_t;"
  sed -e '/^#include/d' "$hdr"
} >"$tmp"
status_enum="typedef enum ixl_status { $enum IXL_STATUS_COUNT_ } ixl_status;"
$cc -E -P -x c -DIXL_CDEF -D"IXL_CDEF_STATUS_ENUM=$status_enum" \
  -D'IXL_API=' -D'__attribute__(x)=' "$tmp" |
  grep -v '^typedef long int ptrdiff_t; typedef unsigned long size_t;$' |
  sed -e 's/^ \([^ ]\)/\1/' >"$out.tmp" # the space an empty IXL_API leaves
rm -f "$tmp"
mv "$out.tmp" "$out"
