#!/usr/bin/env bash
# mutate.sh plants each bug of the planted-bug list (scripts/mutants.tsv) one
# at a time in a scratch copy of the work tree, runs the tests the list
# names for it, and reports the mutant KILLED (a test failed, naming which),
# SURVIVED (every test passed: a test is missing), INVALID (the mutant does
# not build) or STALE (the file or the string to replace is gone, or the
# string is no longer unique: the list needs updating). The work tree is
# never modified.
#
# Usage: scripts/mutate.sh [ID...]     (all mutants when no ID is given)
# Environment: MUTANTS (the list, default scripts/mutants.tsv),
# MUTATE_TIMEOUT (seconds per mutant, default 600; a timeout counts as
# killed, but say so: a test that hangs is a test to fix), GO (default go),
# MUTATE_KEEP=1 keeps the scratch copy and the logs.
# Tests run with -short. Exit status 0 only when every mutant was killed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
list=${MUTANTS:-$root/scripts/mutants.tsv}
timeout_s=${MUTATE_TIMEOUT:-600}
GO=${GO:-go}
want=" $* "

scratch=$(mktemp -d /tmp/mutate.XXXXXX)
cleanup() {
	if [[ ${MUTATE_KEEP:-} == 1 ]]; then
		echo "scratch copy and logs kept in $scratch"
	else
		rm -rf "$scratch"
	fi
}
trap cleanup EXIT

# The scratch copy: the work tree as it is (uncommitted edits included),
# without .git and build output, with ../shared beside it as in CI.
mkdir -p "$scratch/repo" "$scratch/logs"
tar -C "$root" --exclude=./.git --exclude=./bin -cf - . | tar -C "$scratch/repo" -xf -
if [[ -e $root/../shared ]]; then
	ln -s "$(cd "$root/../shared" && pwd)" "$scratch/shared"
fi
cd "$scratch/repo"

killed=0 survived=0 stale=0 invalid=0 total=0
printf '%-4s %-9s %-34s %s\n' ID RESULT FILE "WHAT (KILLED BY)"
while IFS= read -r line || [[ -n $line ]]; do
	[[ -z $line || $line == \#* ]] && continue
	# Split on TABs keeping empty fields (a TAB in IFS would merge them).
	IFS=$'\x1f' read -r id file old new pkg run what <<<"${line//$'\t'/$'\x1f'}"
	if [[ $want != "  " && $want != *" $id "* ]]; then
		continue
	fi
	total=$((total + 1))
	if [[ ! -f $file ]]; then
		printf '%-4s %-9s %-34s %s\n' "$id" STALE "$file" "$what (file gone)"
		stale=$((stale + 1))
		continue
	fi
	n=$(OLD=$old perl -0ne '$n = () = /\Q$ENV{OLD}\E/g; print $n' "$file")
	if [[ $n != 1 ]]; then
		printf '%-4s %-9s %-34s %s\n' "$id" STALE "$file" "$what (string found $n times, want 1)"
		stale=$((stale + 1))
		continue
	fi
	cp "$file" "$scratch/orig"
	OLD=$old NEW=$new perl -0pi -e 's/\Q$ENV{OLD}\E/$ENV{NEW}/' "$file"
	log=$scratch/logs/$id.log
	rc=0
	timeout "$timeout_s" "$GO" test -short -count=1 -run "$run" "$pkg" >"$log" 2>&1 || rc=$?
	cp "$scratch/orig" "$file"
	if [[ $rc == 0 ]]; then
		printf '%-4s %-9s %-34s %s\n' "$id" SURVIVED "$file" "$what (go test -run '$run' $pkg passed)"
		survived=$((survived + 1))
	elif grep -q -e '\[build failed\]' -e '\[setup failed\]' "$log"; then
		printf '%-4s %-9s %-34s %s\n' "$id" INVALID "$file" "$what (does not build: $(grep -m1 -E '\.go:[0-9]+' "$log" || true))"
		invalid=$((invalid + 1))
	else
		by=$(grep -oE -e '^--- FAIL: [^ ]+' "$log" | sed 's/^--- FAIL: //' | sort -u | paste -sd, - || true)
		[[ $rc == 124 ]] && by="timeout after ${timeout_s}s${by:+; $by}"
		[[ -z $by ]] && by=$(grep -m1 -E 'panic:|FAIL' "$log" || echo "exit $rc")
		printf '%-4s %-9s %-34s %s\n' "$id" KILLED "$file" "$what ($by)"
		killed=$((killed + 1))
	fi
done <"$list"
echo "$killed killed, $survived survived, $invalid invalid, $stale stale of $total mutants"
[[ $killed == "$total" ]]
