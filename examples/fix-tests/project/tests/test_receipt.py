import unittest

from receipt import receipt


class ReceiptTest(unittest.TestCase):
    def test_total_after_discount_and_tax(self):
        text = receipt([("tea", 4.0, 5), ("biscuits", 2.5, 4)], discount_percent=10)
        self.assertEqual(text.splitlines()[-1].split(), ["total", "32.40"])


if __name__ == "__main__":
    unittest.main()
