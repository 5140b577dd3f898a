"""Generic tools that touch no store data: arithmetic, a scratchpad, and the hand-off to a
human agent (a terminal tool: it ends the episode)."""

from __future__ import annotations

import ast
import operator
from typing import Any

from backend.tools.context import ToolContext, ToolError
from backend.tools.registry import ToolKind, tool

_ALLOWED = set("0123456789+-*/(). ")
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_MAX_EXPONENT = 4096
_MAX_INT_BITS = 1 << 16


@tool(ToolKind.GENERIC)
async def calculate(ctx: ToolContext, expression: str) -> str:
    """Calculate the result of an arithmetic expression, rounded to 2 decimals.

    Args:
        expression: The expression to calculate, such as '2 + 2'. It may contain numbers,
            the operators +, -, *, /, parentheses and spaces.
    """
    if not all(ch in _ALLOWED for ch in expression):
        raise ToolError("invalid characters in expression")
    try:
        # like eval(), ignore leading blanks (compile() alone calls them an indent)
        tree = compile(expression.lstrip(" \t"), "<string>", "eval", ast.PyCF_ONLY_AST)
        value = _evaluate(tree.body)
        return str(round(float(value), 2))
    except ToolError:
        raise
    except Exception as e:  # same texts as Python's own evaluation (SyntaxError, ZeroDivisionError, ...)
        raise ToolError(str(e)) from None


def _evaluate(node: ast.AST) -> Any:
    """Evaluate the arithmetic subset of Python safely (no names, bounded powers)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        result = _BINARY[type(node.op)](left, right)
        if isinstance(result, int) and result.bit_length() > _MAX_INT_BITS:
            raise ToolError("expression result is too large")
        return result
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(e) for e in node.elts)
    if isinstance(node, ast.Call):
        func = _evaluate(node.func)
        raise TypeError(f"'{type(func).__name__}' object is not callable")
    raise ToolError("unsupported expression")


def _check_power(base: Any, exponent: Any) -> None:
    if isinstance(exponent, int | float) and abs(exponent) > _MAX_EXPONENT and abs(base) not in (0, 1):
        raise ToolError("exponent too large")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:
        if max(abs(base), 1).bit_length() * exponent > _MAX_INT_BITS:
            raise ToolError("expression result is too large")


@tool(ToolKind.GENERIC)
async def think(ctx: ToolContext, thought: str) -> str:
    """Think about something without getting new information or changing anything. Use it for
    complex reasoning or to keep notes.

    Args:
        thought: The thought.
    """
    return ""


@tool(ToolKind.TERMINAL)
async def transfer_to_human_agents(ctx: ToolContext, summary: str) -> str:
    """Hand the customer over to a human agent with a summary of their issue. Only when the
    customer explicitly asks for a human, or the request cannot be handled within the policy
    and the available tools.

    Args:
        summary: A summary of the customer's issue.
    """
    return "Transfer successful"
