"""Spark and Delta for the tests: the session fixture, lake comparisons, the job as a
subprocess, a standalone cluster."""
