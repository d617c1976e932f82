#!/usr/bin/env bash
# demo.sh: the seed topology with mplsnode carrying TCP over MPLS.
set -euo pipefail
echo "make demo: not yet: the node (issue 5) and the topology bench (issue 6) are still being built." >&2
echo "What exists now: make test, make bench, make fuzz, make lint." >&2
