"""ORM models of the service side: conversations, their messages and the tool-call audit
log. (Filled by the agent-service work; kept separate from the store tables.)"""

from __future__ import annotations
