#!/bin/sh
# Drill RD9 (tests/cli/rd9_drill_test.cc): the `command` script run by remote
# workers (worker:start). It performs ONE countable effect named "notice"
# through the HTTP effect verbs of worker:start:
#   reserve -> on `proceed`, append "<execution id>" to $1/notice.txt -> commit.
# Usage: rd9_remote_effect.sh DRILL_DIR   (payload JSON on stdin, ignored)
#
# The server may be SIGKILLed and restarted at any moment, so an effect call
# that cannot reach the server (worker:effect exit 3 unavailable or 5 other)
# is retried every 0.2 s for up to 20 s; a stale claim is never retried.
# Records, one line each (for the drill's D and F checks):
#   $1/answers.txt  "notice <id> <claim version> <answer> <exit code>" per reservation
#   $1/commits.txt  "<id> <claim version> <exit code>" per commit attempt sequence
#   $1/retries.txt  "<id> <claim version> <op> <exit code>" per call the server missed
# Exit: 0 done (performed now or already_done), 76 on `ambiguous` (the handler's
# Ambiguous: quarantine, never a blind repeat), 75 (retryable) otherwise.
dir=$1
cat > /dev/null
id=$TASKENGINE_EXECUTION_ID
v=$TASKENGINE_CLAIM_VERSION

# effect OP NAME [ARGS]: runs `worker:effect`, retrying while the server is
# away. Leaves the printed answer in $out and returns the exit code.
effect() {
  tries=0
  while :; do
    out=$("$TASKENGINE_BIN" worker:effect "$@" 2>/dev/null)
    rc=$?
    case $rc in
      3|5) ;;
      *) return $rc ;;
    esac
    echo "$id $v $1 $rc" >> "$dir/retries.txt"
    tries=$((tries + 1))
    if [ $tries -ge 100 ]; then return $rc; fi
    sleep 0.2
  done
}

effect reserve notice
rc=$?
echo "notice $id $v ${out:-error} $rc" >> "$dir/answers.txt"
case $rc in
  0)
    echo "$id" >> "$dir/notice.txt"
    effect commit notice --detail "$id-notice"
    crc=$?
    echo "$id $v $crc" >> "$dir/commits.txt"
    [ $crc -eq 0 ] || exit 75
    ;;
  10) ;;
  11) exit 76 ;;
  *) exit 75 ;;
esac
exit 0
