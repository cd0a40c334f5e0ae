import unittest

from pricing import add_tax, apply_discount, line_total


class PricingTest(unittest.TestCase):
    def test_line_total(self):
        self.assertEqual(line_total(2.5, 4), 10.0)

    def test_no_discount(self):
        self.assertEqual(apply_discount(80.0, 0), 80.0)

    def test_discount(self):
        self.assertEqual(apply_discount(80.0, 25), 60.0)

    def test_tax(self):
        self.assertEqual(add_tax(50.0, 20), 60.0)


if __name__ == "__main__":
    unittest.main()
