#!/usr/bin/env bash
# GPU call "A" of 2026-12-03: ../2026-12-02-runs/ro.sh, written by the fourth 2026-12-02
# session for the next one (it had no device time left), run as it is with this folder's
# prelude (JSON dated 2026-12-03) and its files named -a.
TAG=a; source "$(dirname "$0")/../2026-12-02-runs/ro.sh"
