"""How a customer's answer to an agent's proposal is read: a yes anywhere in it.

One test for every reader: the cold-start filter keeps only writes whose customer said yes just before
(rl/coldstart/data.py), and a cancellation answered without one is a refused reason
(rl/chat/refused_reasons.py). It leans towards a yes ("sure" in "I'm not sure" reads as one), so what
it calls a refusal is one.
"""

from __future__ import annotations

import re

AFFIRMATIVE = re.compile(r"\b(yes|yeah|yep|confirm|confirmed|go ahead|please do|sure|correct|proceed|ok|okay)\b",
                         re.I)
