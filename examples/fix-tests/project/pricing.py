"""Prices in euros, rounded to the cent."""


def line_total(unit_price, quantity):
    """The price of `quantity` items at `unit_price` each."""
    return round(unit_price * quantity, 2)


def apply_discount(amount, percent):
    """`amount` less `percent` per cent of it."""
    return round(amount - amount * percent / 10, 2)


def add_tax(amount, rate_percent):
    """`amount` plus `rate_percent` per cent of tax."""
    return round(amount * (1 + rate_percent / 100), 2)
