#!/usr/bin/env bash
# Commit subjects: one line of at most 72 characters, the why in the body (issue 27 item 9).
# Checked from the first commit that kept the rule (SINCE) to HEAD; older subjects are history
# that cannot be rewritten on a shared main. No git, or no such commit (a shallow or exported
# tree): nothing to check, said so.
set -uo pipefail
cd "$(dirname "$0")/.."
SINCE=${1:-124ef38}
if ! git rev-parse -q --verify "$SINCE^{commit}" >/dev/null 2>&1; then
  echo "commit subjects: $SINCE is not in this checkout; not checked"
  exit 0
fi
long=$(git log --format='%h %s' "$SINCE..HEAD" | awk '{ s = $0; sub(/^[^ ]+ /, "", s); if (length(s) > 72) print }')
if [ -n "$long" ]; then
  echo "commit subjects over 72 characters since $SINCE:" >&2
  echo "$long" >&2
  exit 1
fi
echo "commit subjects: $(git rev-list --count "$SINCE..HEAD") since $SINCE, all at most 72 characters"
