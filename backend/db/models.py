"""ORM models of the store: customers, payment methods, products and variants, orders with
their items, fulfillments and payment transactions.

Money is NUMERIC (exact decimals). Prices and gift-card balances are cents-exact
(`NUMERIC(14, 2)`); payment-transaction amounts are unconstrained NUMERIC so that the
upstream-compatible mode can record tau-bench's unrounded float differences exactly.
`seq` columns keep the order of records as the source data had them, so an export is the
same document that was loaded. Service tables (conversations, audit log) live in
`backend.db.service_models`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    Numeric,
    String,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

MONEY = Numeric(14, 2)


class Base(DeclarativeBase):
    """Declarative base for every muarl table."""


class Customer(Base):
    __tablename__ = "customers"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    first_name: Mapped[str] = mapped_column(Text, nullable=False)
    last_name: Mapped[str] = mapped_column(Text, nullable=False)
    email: Mapped[str] = mapped_column(Text, nullable=False)
    address1: Mapped[str] = mapped_column(Text, nullable=False)
    address2: Mapped[str] = mapped_column(Text, nullable=False)
    city: Mapped[str] = mapped_column(Text, nullable=False)
    country: Mapped[str] = mapped_column(Text, nullable=False)
    state: Mapped[str] = mapped_column(Text, nullable=False)
    zip: Mapped[str] = mapped_column(Text, nullable=False)

    __table_args__ = (
        Index("ix_customers_email_lower", text("lower(email)")),
        Index("ix_customers_name_zip", text("lower(first_name)"), text("lower(last_name)"), "zip"),
    )


class PaymentMethod(Base):
    __tablename__ = "payment_methods"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    customer_id: Mapped[str] = mapped_column(
        ForeignKey("customers.id", ondelete="CASCADE"), nullable=False, index=True
    )
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    source: Mapped[str] = mapped_column(String(32), nullable=False)
    brand: Mapped[str | None] = mapped_column(Text)
    last_four: Mapped[str | None] = mapped_column(String(8))
    balance: Mapped[Decimal | None] = mapped_column(MONEY)
    # Keys in the source record beyond the known ones (kept for a faithful export).
    extra: Mapped[dict[str, Any] | None] = mapped_column(JSONB)

    __table_args__ = (
        CheckConstraint("source IN ('credit_card', 'paypal', 'gift_card')", name="ck_payment_source"),
        CheckConstraint("balance IS NULL OR balance >= 0", name="ck_gift_card_balance_not_negative"),
        CheckConstraint("source <> 'gift_card' OR balance IS NOT NULL", name="ck_gift_card_has_balance"),
    )


class Product(Base):
    __tablename__ = "products"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    name: Mapped[str] = mapped_column(Text, nullable=False)


class Variant(Base):
    __tablename__ = "variants"

    item_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    product_id: Mapped[str] = mapped_column(
        ForeignKey("products.id", ondelete="CASCADE"), nullable=False, index=True
    )
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    options: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    available: Mapped[bool] = mapped_column(Boolean, nullable=False)
    price: Mapped[Decimal] = mapped_column(MONEY, nullable=False)

    __table_args__ = (CheckConstraint("price >= 0", name="ck_variant_price_not_negative"),)


class Order(Base):
    __tablename__ = "orders"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    customer_id: Mapped[str] = mapped_column(
        ForeignKey("customers.id", ondelete="CASCADE"), nullable=False, index=True
    )
    # Position of this order in the customer's `orders` list.
    customer_seq: Mapped[int] = mapped_column(Integer, nullable=False)
    address1: Mapped[str] = mapped_column(Text, nullable=False)
    address2: Mapped[str] = mapped_column(Text, nullable=False)
    city: Mapped[str] = mapped_column(Text, nullable=False)
    country: Mapped[str] = mapped_column(Text, nullable=False)
    state: Mapped[str] = mapped_column(Text, nullable=False)
    zip: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    # Request fields set by cancel / return / exchange.
    cancel_reason: Mapped[str | None] = mapped_column(Text)
    return_items: Mapped[list[str] | None] = mapped_column(JSONB)
    return_payment_method_id: Mapped[str | None] = mapped_column(String(128))
    exchange_items: Mapped[list[str] | None] = mapped_column(JSONB)
    exchange_new_items: Mapped[list[str] | None] = mapped_column(JSONB)
    exchange_payment_method_id: Mapped[str | None] = mapped_column(String(128))
    exchange_price_difference: Mapped[Decimal | None] = mapped_column(Numeric)


class OrderItem(Base):
    __tablename__ = "order_items"

    order_id: Mapped[str] = mapped_column(ForeignKey("orders.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    product_id: Mapped[str] = mapped_column(String(64), nullable=False)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    options: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    price: Mapped[Decimal] = mapped_column(MONEY, nullable=False)


class Fulfillment(Base):
    __tablename__ = "fulfillments"

    order_id: Mapped[str] = mapped_column(ForeignKey("orders.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    tracking_ids: Mapped[list[str]] = mapped_column(JSONB, nullable=False)
    item_ids: Mapped[list[str]] = mapped_column(JSONB, nullable=False)


class PaymentTransaction(Base):
    __tablename__ = "payment_transactions"

    order_id: Mapped[str] = mapped_column(ForeignKey("orders.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    transaction_type: Mapped[str] = mapped_column(String(16), nullable=False)
    amount: Mapped[Decimal] = mapped_column(Numeric, nullable=False)
    payment_method_id: Mapped[str] = mapped_column(String(128), nullable=False)

    __table_args__ = (
        CheckConstraint("transaction_type IN ('payment', 'refund')", name="ck_transaction_type"),
        CheckConstraint("amount >= 0", name="ck_transaction_amount_not_negative"),
    )


STORE_TABLES = (
    Customer.__table__,
    PaymentMethod.__table__,
    Product.__table__,
    Variant.__table__,
    Order.__table__,
    OrderItem.__table__,
    Fulfillment.__table__,
    PaymentTransaction.__table__,
)
