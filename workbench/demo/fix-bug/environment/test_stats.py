"""Run with: python3 /app/test_stats.py"""

from stats import mean, total

assert total([1, 2, 3]) == 6
assert mean([2, 4, 6]) == 4, mean([2, 4, 6])
assert mean([5]) == 5, mean([5])
print("all tests passed")
