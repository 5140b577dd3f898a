"""Tasks of every generated kind on two synthetic stores, for the customer tests that probe them."""

import pytest

from rl.tasks.generator import SCHEDULE, generate_tasks
from rl.tasks.stores import resolve_store, synthetic_ref


@pytest.fixture(scope="module")
def tasks():
    ref = synthetic_ref(0, 200)
    out = generate_tasks(resolve_store(ref), 6 * len(SCHEDULE), 41, snapshot=ref)
    return out + generate_tasks(resolve_store(synthetic_ref(1, 100)), 3 * len(SCHEDULE), 42,
                                snapshot=synthetic_ref(1, 100))
