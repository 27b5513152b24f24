"""kcsim beside real controllers: shadows, chaos drivers, and what kcsim and the real
cluster disagree on."""
