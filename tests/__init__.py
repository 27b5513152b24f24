"""kcsim's tests: one folder per source package, shared helpers in `tests.support`."""
