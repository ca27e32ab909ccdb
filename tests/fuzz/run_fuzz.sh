#!/bin/sh
# Build one libFuzzer harness with clang (ASan + UBSan + libFuzzer) and run it for a bounded time.
# Fails (exit 1) on any crash, leak, sanitizer report or FUZZ_ASSERT; exits 77 (meson SKIP) when
# clang or libFuzzer is missing. Meson's compiler is gcc, so this script compiles by itself.
#
# usage: run_fuzz.sh [-t SECONDS] [-c SEED_DIR] <harness.c> [more .c sources...]
#   Relative paths are taken from the repository root. The harness may write its own seeds in
#   LLVMFuzzerInitialize when INCA_FUZZ_SEED_DIR is set (see fuzz_wire_seeds.h); -c adds seed
#   files from a directory. Extra compile flags: FUZZ_CFLAGS (e.g. -I for generated headers);
#   extra link flags: FUZZ_LDFLAGS (default -lz -lcrypto). FUZZ_SECONDS overrides -t (`make fuzz` uses it
#   for long runs). Crashing inputs are kept
#   in ${FUZZ_ARTIFACTS:-${TMPDIR:-/tmp}/inca-fuzz-artifacts}/<harness>/.
# example (switch config parser):
#   tests/fuzz/run_fuzz.sh -t 20 tests/fuzz/fuzz_sw_config.c daemons/switch/config.c lib/util/util.c
set -eu

secs=20
seeds=""
while getopts "t:c:" o; do
	case $o in
	t) secs=$OPTARG ;;
	c) seeds=$OPTARG ;;
	*) echo "usage: $0 [-t SECONDS] [-c SEED_DIR] harness.c [sources...]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
secs=${FUZZ_SECONDS:-$secs}
[ $# -ge 1 ] || { echo "usage: $0 [-t SECONDS] [-c SEED_DIR] harness.c [sources...]" >&2; exit 2; }

root=$(cd "$(dirname "$0")/../.." && pwd)
CC=${FUZZ_CC:-clang}
command -v "$CC" >/dev/null 2>&1 || { echo "SKIP: $CC not installed"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/inca-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

# libFuzzer present? (Debian: libclang-rt-NN-dev)
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}\n' \
	>"$work/probe.c"
if ! "$CC" -fsanitize=fuzzer,address,undefined "$work/probe.c" -o "$work/probe" >/dev/null 2>&1; then
	echo "SKIP: $CC cannot link -fsanitize=fuzzer (libFuzzer runtime missing)"
	exit 77
fi

srcs=""
for s in "$@"; do
	case $s in
	/*) srcs="$srcs $s" ;;
	*) srcs="$srcs $root/$s" ;;
	esac
done
name=$(basename "$1" .c)
bin="$work/$name"
# shellcheck disable=SC2086
"$CC" -g -O1 -std=gnu11 -D_GNU_SOURCE -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-Wall -Wextra -Werror -Wno-unused-parameter \
	-I"$root/include" -I"$root/lib" -I"$(dirname "$(echo $srcs | cut -d' ' -f1)")" \
	${FUZZ_CFLAGS:-} $srcs -o "$bin" ${FUZZ_LDFLAGS:--lz -lcrypto}

corpus="$work/corpus"
mkdir -p "$corpus"
[ -n "$seeds" ] && cp "$seeds"/* "$corpus"/ 2>/dev/null || true
art=${FUZZ_ARTIFACTS:-${TMPDIR:-/tmp}/inca-fuzz-artifacts}/$name
mkdir -p "$art"

echo "fuzz: $name for ${secs}s"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
set +e
INCA_FUZZ_SEED_DIR="$corpus" "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	-max_len=8192 -print_final_stats=1 -artifact_prefix="$art/" "$corpus" >"$work/log" 2>&1
rc=$?
set -e
if [ $rc -ne 0 ]; then
	grep -m 5 -E "property failed|ERROR: |runtime error" "$work/log" || true
	tail -n 40 "$work/log"
	echo "fuzz: $name FAILED (exit $rc); reproducer(s) in $art/:"
	ls -l "$art"
	exit 1
fi
tail -n 6 "$work/log"
echo "fuzz: $name ok ($(ls "$corpus" | wc -l) corpus entries)"
