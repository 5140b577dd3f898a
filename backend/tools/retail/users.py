"""Identity and profile tools: find a customer by email or by name and zip, read a
customer's profile, change their default address. A successful lookup authenticates a
customer conversation (see `ToolContext.bind_customer`)."""

from __future__ import annotations

from sqlalchemy import text

from backend.store.records import ADDRESS_KEYS, dumps, fetch_user, save_user_address
from backend.tools.context import ToolContext, ToolError
from backend.tools.registry import ToolKind, tool


@tool(ToolKind.READ, identifies_customer=True)
async def find_user_id_by_email(ctx: ToolContext, email: str) -> str:
    """Find a customer's user id from their email address (case-insensitive). Returns an error
    if no customer has that email.

    Args:
        email: The customer's email address, such as 'something@example.com'.
    """
    user_id = await ctx.conn.scalar(
        text("SELECT id FROM customers WHERE lower(email) = lower(:e) ORDER BY seq LIMIT 1"), {"e": email}
    )
    if user_id is None:
        raise ToolError("user not found")
    ctx.bind_customer(user_id)
    return user_id


@tool(ToolKind.READ, identifies_customer=True)
async def find_user_id_by_name_zip(ctx: ToolContext, first_name: str, last_name: str, zip: str) -> str:
    """Find a customer's user id from their first name, last name and zip code. Names are
    case-insensitive. Look customers up by email first; use this only when the customer cannot
    give an email or the email is not found.

    Args:
        first_name: The customer's first name, such as 'John'.
        last_name: The customer's last name, such as 'Doe'.
        zip: The customer's zip code, such as '12345'.
    """
    user_id = await ctx.conn.scalar(
        text(
            """SELECT id FROM customers WHERE lower(first_name) = lower(:f) AND lower(last_name) = lower(:l)
               AND zip = :z ORDER BY seq LIMIT 1"""
        ),
        {"f": first_name, "l": last_name, "z": zip},
    )
    if user_id is None:
        raise ToolError("user not found")
    ctx.bind_customer(user_id)
    return user_id


@tool(ToolKind.READ)
async def get_user_details(ctx: ToolContext, user_id: str) -> str:
    """Get a customer's profile: name, default address, email, payment methods and order ids.

    Args:
        user_id: The user id, such as 'sara_doe_496'.
    """
    ctx.check_owner(user_id, f"user {user_id}", "user not found")
    user = await fetch_user(ctx.conn, user_id)
    if user is None:
        raise ToolError("user not found")
    return dumps(user)


@tool(ToolKind.WRITE)
async def modify_user_address(
    ctx: ToolContext, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    """Change a customer's default address. Explain the change to the customer and get an
    explicit yes before calling. Returns the updated profile.

    Args:
        user_id: The user id, such as 'sara_doe_496'.
        address1: The first line of the address, such as '123 Main St'.
        address2: The second line of the address, such as 'Apt 1' or ''.
        city: The city, such as 'San Francisco'.
        state: The state, such as 'CA'.
        country: The country, such as 'USA'.
        zip: The zip code, such as '12345'.
    """
    ctx.check_owner(user_id, f"user {user_id}", "user not found")
    locked = await ctx.conn.scalar(text("SELECT id FROM customers WHERE id = :id FOR UPDATE"), {"id": user_id})
    if locked is None:
        raise ToolError("user not found")
    address = {"address1": address1, "address2": address2, "city": city, "state": state,
               "country": country, "zip": zip}
    await save_user_address(ctx.conn, user_id, {k: address[k] for k in ADDRESS_KEYS})
    user = await fetch_user(ctx.conn, user_id)
    assert user is not None
    user["address"] = address  # keys in the order tau-bench writes them
    return dumps(user)
