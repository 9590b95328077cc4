#!/bin/sh
# An exec step: reads {"n": N, "source": S} on stdin and prints the
# standard output with the items N and N+1 on stdout.
input=$(cat)
n=$(printf '%s' "$input" | sed -n 's/.*"n": *\([0-9][0-9]*\).*/\1/p')
source=$(printf '%s' "$input" | sed -n 's/.*"source": *"\([^"]*\)".*/\1/p')
printf '{"success": true, "data": {"items": [%d, %d], "source": "%s"}, "metadata": {"records_count": 2}, "errors": []}\n' "$n" "$((n + 1))" "$source"
