#!/usr/bin/env bash
# Runs every side-by-side workload (phuxcoord, etcd, NATS) in one
# invocation and prints the Markdown table. Under 10 minutes on 2 cores.
# Pass -quick for a smoke run, -only writes1,fanout to pick workloads.
set -euo pipefail
cd "$(dirname "$0")"
exec go run . "$@"
