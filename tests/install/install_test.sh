#!/bin/bash
# tests/install/install_test.sh: `meson install` into a temporary DESTDIR, then check what a
# system package would hold (docs/install.md): the expected files, no build or source path in
# any installed file, an outside program built with `pkg-config --cflags --libs inca` alone,
# the installed programs and scripts run from there (the demo finds its switch and plot script
# by its own location), man pages without groff warnings, systemd units that verify.
#   usage: install_test.sh MESON BUILD-DIR SOURCE-DIR CC -- EXPECTED-PATH...
# The install directories come in INST_* environment variables (tests/install/meson.build).
set -u
meson=$1 build=$(cd "$2" && pwd) src=$(cd "$3" && pwd) cc=$4
shift 4
[ "${1:-}" = -- ] && shift

fail=0
bad() { echo "FAIL: $*"; fail=1; }
for t in pkg-config grep; do
	command -v "$t" >/dev/null || { echo "SKIP: $t missing"; exit 77; }
done

dest=$(mktemp -d "${TMPDIR:-/tmp}/inca-install.XXXXXX")
trap 'rm -rf "$dest"' EXIT
# --strip as a package build does (debug information goes to a -dbgsym package): what is left
# is what the programs carry.
if ! "$meson" install -C "$build" --destdir "$dest" --no-rebuild --quiet --strip \
	>"$dest.log" 2>&1; then
	cat "$dest.log"; rm -f "$dest.log"
	bad "meson install failed"
	exit 1
fi
rm -f "$dest.log"

# 1. The layout.
for p in "$@"; do
	[ -e "$dest$p" ] || bad "not installed: $p"
done
echo "installed $(find "$dest" -type f | wc -l) files; $# expected paths checked"

# 2. No path of this checkout or build in any installed file.
for d in "$src" "$build"; do
	hits=$(grep -rlF -- "$d/" "$dest" 2>/dev/null)
	[ -z "$hits" ] || bad "installed files name $d: $(echo $hits)"
done

libdir=$dest$INST_LIBDIR
bindir=$dest$INST_BINDIR
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# 3. An outside program, compiled and linked with what pkg-config says, nothing else.
export PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_LIBDIR=
if ! flags=$(pkg-config --cflags --libs inca); then
	bad "pkg-config --cflags --libs inca"
else
	echo "pkg-config --cflags --libs inca: $flags"
	v=$(pkg-config --modversion inca)
	[ "$v" = "$INST_VERSION" ] || bad "inca.pc version '$v', expected $INST_VERSION"
	san=()
	[ -n "${INST_SANITIZE:-}" ] && [ "$INST_SANITIZE" != none ] && san=(-fsanitize="$INST_SANITIZE")
	# shellcheck disable=SC2086 # $cc may be "ccache cc", $flags is a word list
	if $cc -std=c11 -Wall -Werror "${san[@]}" "$src/tests/install/hello_inca.c" $flags \
		-o "$dest/hello_inca"; then
		"$dest/hello_inca" || bad "hello_inca against the installed libinca"
	else
		bad "hello_inca does not build with pkg-config's flags"
	fi
fi

# 4. The installed programs run from the DESTDIR.
for p in "$bindir"/*; do
	out=$("$p" --version 2>&1) || bad "$(basename "$p") --version: $out"
	case $out in *"$INST_VERSION"*) ;; *) bad "$(basename "$p") --version: '$out'" ;; esac
done
if [ -x "$bindir/inca-mpirun" ]; then
	out=$("$bindir/inca-mpirun" --dry-run -np 2 ./prog 2>&1) ||
		bad "installed inca-mpirun --dry-run: $out"
fi
# The demo finds inca-switch beside itself and its plot script in <datadir>/inca of the same
# install: a missing script would be reported as "plot: skipped (... missing)".
if [ -x "$bindir/inca-demo" ] && [ -x "$bindir/inca-switch" ]; then
	out=$(env -u INCA_SWITCH -u INCA_DATA_DIR "$bindir/inca-demo" --addr-index 120 \
		--ranks 2 -b 4 -e 64 -f 16 -n 1 -w 0 --budget 0 --types int32:sum --no-ring \
		--json "$dest/demo.jsonl" --plot "$dest/demo.png" 2>&1)
	rc=$?
	[ $rc -eq 0 ] || bad "installed inca-demo exit $rc: $out"
	if [ -x /usr/bin/python3 ]; then
		case $out in *"plot: skipped"*) bad "installed inca-demo: $(echo "$out" | grep plot:)" ;; esac
	fi
fi

# 5. The Python package imports from the install and finds the installed libinca by the
# system's library search (LD_LIBRARY_PATH here), as it would in /usr. Not in a sanitizer
# build: its libinca cannot be loaded into an uninstrumented interpreter.
if [ -n "${INST_PYDIR:-}" ] && [ -x /usr/bin/python3 ] && [ "${INST_SANITIZE:-none}" = none ]; then
	out=$(env -u INCA_LIB PYTHONPATH="$dest$INST_PYDIR" PYTHONDONTWRITEBYTECODE=1 \
		/usr/bin/python3 -c '
import sys, inca
dest = sys.argv[1]
assert inca.__file__.startswith(dest), "imported " + inca.__file__
inca._lib.load()
maps = [l.split()[-1] for l in open("/proc/self/maps") if "libinca.so" in l]
assert maps and all(m.startswith(dest) for m in maps), "loaded " + " ".join(set(maps))
' "$dest" 2>&1) || bad "python3 -c 'import inca' from the install: $out"
fi

# 6. Man pages render without warnings.
if command -v groff >/dev/null; then
	for m in "$dest$INST_MANDIR"/man*/*; do
		w=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$m" 2>&1)
		[ -z "$w" ] || bad "$(basename "$m"): $w"
	done
fi

# 7. systemd units: `systemd-analyze verify` on copies pointing into the DESTDIR (it checks
# that ExecStart is executable and the man pages of Documentation= exist); any message fails.
if [ "$INST_UNITDIR" != no ] && command -v systemd-analyze >/dev/null; then
	mkdir "$dest/units"
	for u in "$dest$INST_UNITDIR"/*.service; do
		sed "s|$INST_BINDIR/|$bindir/|g" "$u" >"$dest/units/$(basename "$u")"
	done
	w=$(MANPATH=$dest$INST_MANDIR timeout 60 systemd-analyze verify "$dest"/units/*.service 2>&1)
	[ -z "$w" ] || bad "systemd-analyze verify: $w"
fi

[ $fail -eq 0 ] && echo "install layout ok"
exit $fail
