"""A printed receipt for a basket of (name, unit price, quantity) lines."""

from pricing import add_tax, apply_discount, line_total


def receipt(lines, discount_percent=0, tax_percent=20):
    """The receipt's text: one row per line, then the total after discount and tax."""
    rows = []
    subtotal = 0
    for name, unit_price, quantity in lines:
        total = line_total(unit_price, quantity)
        subtotal += total
        rows.append(f"{name:<12}{quantity:>3} x {unit_price:>7.2f} = {total:>8.2f}")
    discounted = apply_discount(subtotal, discount_percent)
    rows.append(f"{'total':<27}{add_tax(discounted, tax_percent):>9.2f}")
    return "\n".join(rows)
