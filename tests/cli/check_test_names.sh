#!/usr/bin/env bash
# Every Catch2 test case must be runnable by its ctest entry: catch_discover_tests splits a name at
# ';' (a CMake list separator), ctest then passes half a name as the filter, Catch2 matches nothing
# and the entry passes without running the test. Fails naming each such test case.
# Usage: check_test_names.sh CATCH_BINARY...
set -euo pipefail
status=0
for binary in "$@"; do
    # (Catch2 v2 exits with the number of test cases listed)
    names=$("$binary" --list-test-names-only) || true
    count=$(grep -c . <<<"$names" || true)
    if [ "$count" -eq 0 ]; then
        echo "$binary lists no test cases" >&2
        status=1
    fi
    while IFS= read -r name; do
        case "$name" in
            *';'*) echo "$(basename "$binary"): test case name contains ';' (ctest would not run it): $name" >&2; status=1 ;;
        esac
    done <<<"$names"
    echo "$(basename "$binary"): $count test cases"
done
exit $status
