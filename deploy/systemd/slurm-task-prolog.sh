#!/bin/sh
# Slurm TaskProlog (slurm.conf: TaskProlog=/etc/slurm/cuflight-task-prolog.sh): records every
# task of every job with cuflight. Slurm reads "export NAME=value" lines from a TaskProlog's
# standard output into the task's environment (slurm.conf(5), TaskProlog). Only a job of a user
# in the collector's socket group gets them: for others the library would find the socket
# closed to them, so it is not loaded at all.
env_file=${CUFLIGHT_INJECT_ENV:-/etc/cuflight/inject.env}
group=${CUFLIGHT_GROUP:-cuflight}
[ -r "$env_file" ] || exit 0
id -Gn 2>/dev/null | tr ' ' '\n' | grep -qx "$group" || exit 0
sed -n 's/^\([A-Z_][A-Z0-9_]*=.*\)$/export \1/p' "$env_file"
