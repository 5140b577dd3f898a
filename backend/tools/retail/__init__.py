"""The 16 tau-bench retail tools on the Postgres store, registered on
`backend.tools.registry.RETAIL` by importing this package.

One module per area: `users` (identity and profile), `orders` (pending-order changes and
lookups), `delivered` (returns and exchanges), `catalog` (products) and `generic`
(calculate, think, transfer). Behaviour and error texts follow tau-bench; where upstream
gets money wrong the default is corrected and `ToolContext.upstream_compat` restores
upstream (docs/DEVIATIONS.md lists every difference).
"""

from backend.tools.registry import RETAIL
from backend.tools.retail import catalog, delivered, generic, orders, users  # noqa: F401

__all__ = ["RETAIL"]
