#!/bin/sh
# An exec step for the pipeline crash test: records each run (idempotency
# key and attempt) in the file named by $1, works for two seconds, then
# passes {"n": N} through as its standard output.
echo "$SWITCHBOARD_IDEMPOTENCY_KEY $SWITCHBOARD_ATTEMPT" >> "$1"
sleep 2
n=$(sed -n 's/.*"n": *\([0-9][0-9]*\).*/\1/p')
printf '{"success": true, "data": {"n": %d}}\n' "$n"
