"""What the tests share, never collected by pytest; test modules import from here, never
from each other.

* `clusters/`: real Kafka and ZooKeeper clusters (session fixtures, secured and faulty
  variants);
* `spark/`: the Spark session fixture, lake comparisons, `kcsim run` as a subprocess, a
  Spark standalone cluster;
* `differential/`: kcsim beside real controllers (shadows, chaos drivers, plan checks);
* `kraft/`: the KRaft engine's scenarios and its differential oracle;
* here: the corpora, scenario drivers, event generators and reference computations of
  the pure core's tests.
"""
