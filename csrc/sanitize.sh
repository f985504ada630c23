#!/bin/sh
# Build the C core with AddressSanitizer + UndefinedBehaviorSanitizer as standalone binaries
# and run the C test driver and the parser fuzz. Any sanitizer report or failed check exits
# non-zero. FUZZ_ITERATIONS (default 200000) sets the fuzz size. Runs in well under 60 s.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/cgcore-sanitize-XXXXXX")
trap 'rm -rf "$out"' EXIT INT TERM
cc=${CC:-gcc}
flags="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
 -Wall -Wextra -Werror -pthread -I$here"

# shellcheck disable=SC2086  # flags is a word list on purpose
$cc $flags "$here/cgcore.c" "$here/apply_batch.c" "$here/test_cgcore.c" -o "$out/test_cgcore"
# shellcheck disable=SC2086
$cc $flags "$here/cgcore.c" "$here/fuzz_parsers.c" -o "$out/fuzz_parsers"

ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1:detect_stack_use_after_return=1
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS UBSAN_OPTIONS
"$out/test_cgcore"
"$out/fuzz_parsers" "${FUZZ_ITERATIONS:-200000}"
echo "sanitize: ok"
