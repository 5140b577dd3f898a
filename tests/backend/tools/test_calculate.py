"""calculate: arithmetic over `0123456789+-*/(). ` only, result `str(round(value, 2))`."""

from __future__ import annotations

import time

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import Desk

RESULTS = {
    "2 + 2": "4.0",
    "(1 + 2) * 3 / 4": "2.25",
    "1 / 3": "0.33",
    "2.675 * 1": "2.67",  # Python float rounding, as upstream
    "10 - 12.5": "-2.5",
    "199.99 + 50.01 - 0.5": "249.5",
    "-(3)": "-3.0",
    "1234567.891 * 3": "3703703.67",
}


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize(("expression", "expected"), list(RESULTS.items()))
async def test_results(store_conn: AsyncConnection, compat: bool, expression: str, expected: str) -> None:
    desk = Desk(store_conn, compat=compat)
    assert await desk.text("calculate", expression=expression) == expected
    assert expected == str(round(float(eval(expression)), 2))  # the rule the tool follows


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize(("expression", "expected"), [(" 7 ", "7.0"), ("  2 + 2", "4.0")])
async def test_leading_blanks(store_conn: AsyncConnection, compat: bool, expression: str, expected: str) -> None:
    assert expected == str(round(float(eval(expression, {"__builtins__": None}, {})), 2))
    assert await Desk(store_conn, compat=compat).text("calculate", expression=expression) == expected


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("expression", ["2 ** x", "\t1 / 4", "abs(-1)", "__import__('os')", "1e3", "2,5", "1 % 2", "a"])
async def test_invalid_characters(store_conn: AsyncConnection, compat: bool, expression: str) -> None:
    desk = Desk(store_conn, compat=compat)
    await desk.refuses("Error: invalid characters in expression", "calculate", expression=expression)


@pytest.mark.parametrize("compat", [True, False])
async def test_division_by_zero(store_conn: AsyncConnection, compat: bool) -> None:
    await Desk(store_conn, compat=compat).refuses("Error: division by zero", "calculate", expression="1 / 0")


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("expression", ["2 +", "", "()", "((1)", "1 2", ". + ."])
async def test_malformed_expressions_are_errors(store_conn: AsyncConnection, compat: bool, expression: str) -> None:
    await Desk(store_conn, compat=compat).refuses(None, "calculate", expression=expression)


async def test_malformed_expression_text_matches_upstream(store_conn: AsyncConnection) -> None:
    desk = Desk(store_conn, compat=True)
    assert await desk.text("calculate", expression="2 +") == "Error: invalid syntax (<string>, line 1)"


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("expression", ["9**9**9**9", "99999999**99999999", "(" * 5000 + "1" + ")" * 5000,
                                        "1" * 20000, "10**400"])
async def test_hostile_expressions_return_quickly(store_conn: AsyncConnection, compat: bool, expression: str) -> None:
    desk = Desk(store_conn, compat=compat)
    start = time.perf_counter()
    out = await desk.text("calculate", expression=expression)
    assert time.perf_counter() - start < 2.0
    assert out.startswith("Error: "), out[:200]
