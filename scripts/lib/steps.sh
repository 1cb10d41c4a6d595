# Steps with a summary, for scripts/test.sh and .ci/run (source it from bash).
#
#   steps_begin            # once, at the top; the outermost script owns the summary
#   step NAME CMD [ARG…]   # runs CMD, records NAME, pass/fail and seconds
#   step_detail TEXT       # adds lines under the summary's failures
#   steps_end              # prints the summary (owner only); exits non-zero if a step failed
#
# A script run by another that already began steps (FLAKEID_TEST_STEPS_DIR is set)
# records its steps into the same summary and leaves the printing to it, so
# the summary is always the last thing CI prints: each step with pass/fail
# and seconds, the failed tests with their first error lines, the
# verifier's violations and seed, and a closing "tests: N passed, N failed,
# N skipped" line.

steps_begin() {
  if [ -n "${FLAKEID_TEST_STEPS_DIR:-}" ] && [ -d "$FLAKEID_TEST_STEPS_DIR" ]; then
    STEPS_OWNER=""
  else
    FLAKEID_TEST_STEPS_DIR="$(mktemp -d "${TMPDIR:-/tmp}/flakeid-steps.XXXXXX")"
    export FLAKEID_TEST_STEPS_DIR
    STEPS_OWNER=1
    STEPS_START=$SECONDS
    : >"$FLAKEID_TEST_STEPS_DIR/steps" >"$FLAKEID_TEST_STEPS_DIR/details" >"$FLAKEID_TEST_STEPS_DIR/counts"
    # The summary comes out however the script ends (an unexpected error, a signal).
    trap 'steps_summary' EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
  fi
}

# step NAME CMD [ARG…]: runs CMD and records how it went; returns its status.
step() {
  local name="$1" t0=$SECONDS rc=0
  shift
  echo "== $name"
  "$@" || rc=$?
  printf '%s\t%s\t%s\n' "$rc" "$((SECONDS - t0))" "$name" >>"$FLAKEID_TEST_STEPS_DIR/steps"
  [ "$rc" = 0 ] || echo "== $name: FAILED (exit $rc)"
  return "$rc"
}

# step_detail TEXT: lines for the summary's list of what failed.
step_detail() { printf '%s\n' "$*" >>"$FLAKEID_TEST_STEPS_DIR/details"; }

# steps_failed: how many steps failed so far.
steps_failed() { awk -F'\t' '$1 != 0' "$FLAKEID_TEST_STEPS_DIR/steps" | wc -l; }

steps_summary() {
  [ -n "${STEPS_OWNER:-}" ] || return 0
  STEPS_OWNER="" # once
  local dir="$FLAKEID_TEST_STEPS_DIR" failed total
  failed=$(steps_failed)
  total=$(wc -l <"$dir/steps")
  {
    echo
    echo "== summary"
    awk -F'\t' '{ printf "  %-4s %5ss  %s\n", ($1 == 0 ? "pass" : "FAIL"), $2, $3 }' "$dir/steps"
    if [ -s "$dir/details" ]; then
      echo "what failed:"
      cat "$dir/details"
    fi
    if [ "$failed" = 0 ]; then
      echo "RESULT: PASS ($total steps in $((SECONDS - STEPS_START))s)"
    else
      echo "RESULT: FAIL ($failed of $total steps failed, in $((SECONDS - STEPS_START))s)"
    fi
    awk '{ p += $1; f += $2; s += $3 } END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$dir/counts"
  }
  rm -rf "$dir"
}

# steps_end: the summary, and the exit status for the whole run.
steps_end() {
  local failed
  failed=$(steps_failed)
  if [ -n "${STEPS_OWNER:-}" ]; then
    steps_summary
    trap - EXIT
  fi
  [ "$failed" = 0 ]
}

# go_test NAME DIR [go test args…]: go test -json in DIR through
# scripts/testreport, which prints the usual output and records the failed
# tests and the counts for the summary.
go_test() {
  local name="$1" dir="$2" root
  shift 2
  root="$(pwd)"
  step "$name" _go_test "$root" "$dir" "$@"
}

_go_test() {
  local root="$1" dir="$2" failures rc
  shift 2
  failures="$(mktemp "$FLAKEID_TEST_STEPS_DIR/failures.XXXXXX")"
  (cd "$dir" && go test -json "$@" 2>&1) |
    "$root/bin/testreport" -failures "$failures" -counts "$FLAKEID_TEST_STEPS_DIR/counts"
  rc=${PIPESTATUS[0]}
  if [ "$rc" != 0 ]; then
    step_detail "  go test ($dir) failed, exit $rc:"
    if [ -s "$failures" ]; then cat "$failures" >>"$FLAKEID_TEST_STEPS_DIR/details"; fi
  fi
  return "$rc"
}
