"""The RL environment's store side: snapshots (frozen template databases), sandboxes (private
copies for one episode, from a background-refilled pool), change tracking, gold replay and the
reward. Episodes use `backend.tools` and `backend.db` exactly as production does; a sandbox is
only a different database."""

from rl.env.changes import Changes, changed_records, diff_stores, install_change_tracking
from rl.env.gold import GoldSpec, GoldStateCache, replay_actions, replay_gold
from rl.env.reward import RewardBreakdown, canonical, compare_changes, outputs_found, reward_from, score
from rl.env.sandbox import Sandbox, SandboxPool, create_sandbox, temporary_sandbox
from rl.env.snapshot import Snapshot, create_snapshot, drop_snapshot, snapshot_from_database

__all__ = [
    "Changes",
    "GoldSpec",
    "GoldStateCache",
    "RewardBreakdown",
    "Sandbox",
    "SandboxPool",
    "Snapshot",
    "canonical",
    "changed_records",
    "compare_changes",
    "create_sandbox",
    "create_snapshot",
    "diff_stores",
    "drop_snapshot",
    "install_change_tracking",
    "outputs_found",
    "replay_actions",
    "replay_gold",
    "reward_from",
    "score",
    "snapshot_from_database",
    "temporary_sandbox",
]
