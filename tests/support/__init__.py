"""What the tests share: fixtures of real clusters and sessions (imported by
tests/conftest.py or by the tests that need them), scenario builders and reference
computations. Nothing here is a test module, so pytest never collects from it; test
modules import from here, never from each other.
"""
