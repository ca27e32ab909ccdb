# Sourced by the integration shell tests: `expect` runs a command into "$out" (a file the test
# made) and checks its exit status and output.
# expect RC PATTERN WHAT CMD...: CMD must exit RC with a line matching PATTERN in its output
# ("!RE": with no line matching RE); otherwise print the output and fail with WHAT.
expect() {
	want=$1 pat=$2 what=$3
	shift 3
	"$@" >"$out" 2>&1
	rc=$?
	case "$pat" in
	!*) if grep -q -- "${pat#!}" "$out"; then found=1; else found=0; fi; want_found=0 ;;
	*) if grep -q -- "$pat" "$out"; then found=1; else found=0; fi; want_found=1 ;;
	esac
	if [ $rc -ne "$want" ] || [ $found -ne $want_found ]; then
		cat "$out"
		echo "FAIL: $what (exit $rc)"
		exit 1
	fi
}
