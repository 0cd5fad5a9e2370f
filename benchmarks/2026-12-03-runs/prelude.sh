# prelude.sh — the 2026-12-03 session's device calls start as the 2026-12-02 ones did
# (../2026-12-02-runs/prelude.sh: the packed build in place, the library path, the helpers
# say / left / bench / tests), their JSON files dated today.
source "$(dirname "${BASH_SOURCE[0]}")/../2026-12-02-runs/prelude.sh"
d=2026-12-03
