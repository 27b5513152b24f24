"""Where the JVM jars live, and how to fetch them (pure stdlib; imports no Spark).

Two Maven poms under `jars/` describe them:

* `jars/pom.xml` -> `.jars/spark/`: Delta Lake and the Spark Kafka connector, the jars
  Spark needs on top of the ones the pyspark wheel ships;
* `jars/kafka/pom.xml` -> `.kafka/libs/`: an Apache Kafka broker for `kcsim kafka-local`;
* `jars/kafka-zk/pom.xml` -> `.kafka-zk/libs/`: Apache Kafka 3.7.1 and ZooKeeper 3.8.4, for
  the ZooKeeper-mode cluster of `kcsim kafka-local start --zk`;
* `jars/kraft-oracle/pom.xml` -> `.kraft-oracle/libs/`: Kafka 4.1.1's KRaft control managers
  (kafka-metadata and its dependencies) for the test suite's differential oracle, whose
  source `tests/oracle/src` is compiled into `.kraft-oracle/classes/` (test code only);
* the metadata log reader of `kcsim shadow --metadata-log`
  (`streaming/shadow/java/MetadataLogTail.java`) is compiled against `.kafka/libs` into
  `.metadata-log-tail/classes/`, beside the jars it runs with: installed once, so a
  shadow's start and the test suite compile nothing.

`python -m streaming.jars` resolves them with `mvn` when a directory is missing or was
built from another version of its pom (a stamp file holds the pom's hash), and compiles
the Java sources when they or their jars changed (a stamp holds their hash).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

STAMP = ".pom.sha256"
INSTALL_HINT = "run `bash scripts/install.sh` (or `python -m streaming.jars`) first"


class JarsMissingError(RuntimeError):
    """The jar directory has not been resolved yet, or is stale."""


@dataclass(frozen=True)
class JarSet:
    pom: Path
    target: Path

    def pom_hash(self) -> str:
        return hashlib.sha256(self.pom.read_bytes()).hexdigest()

    def jars(self) -> list[Path]:
        return sorted(self.target.glob("*.jar")) if self.target.is_dir() else []

    def is_current(self) -> bool:
        stamp = self.target / STAMP
        return (
            bool(self.jars()) and stamp.is_file() and stamp.read_text().strip() == self.pom_hash()
        )


def project_root() -> Path:
    """The checkout (the directory holding `jars/`); KCSIM_HOME overrides it."""
    override = os.environ.get("KCSIM_HOME")
    if override:
        return Path(override).resolve()
    return Path(__file__).resolve().parent.parent


def spark_jar_set(root: Path | None = None) -> JarSet:
    root = root or project_root()
    return JarSet(root / "jars" / "pom.xml", root / ".jars" / "spark")


def kafka_jar_set(root: Path | None = None) -> JarSet:
    root = root or project_root()
    return JarSet(root / "jars" / "kafka" / "pom.xml", root / ".kafka" / "libs")


def kafka_zk_jar_set(root: Path | None = None) -> JarSet:
    root = root or project_root()
    return JarSet(root / "jars" / "kafka-zk" / "pom.xml", root / ".kafka-zk" / "libs")


def kraft_oracle_jar_set(root: Path | None = None) -> JarSet:
    root = root or project_root()
    return JarSet(root / "jars" / "kraft-oracle" / "pom.xml", root / ".kraft-oracle" / "libs")


def jar_sets(root: Path | None = None) -> tuple[JarSet, ...]:
    return (
        spark_jar_set(root),
        kafka_jar_set(root),
        kafka_zk_jar_set(root),
        kraft_oracle_jar_set(root),
    )


@dataclass(frozen=True)
class OracleBuild:
    """Java sources compiled against a jar set: the KRaft oracle's (`tests/oracle/src`),
    the metadata log reader's."""

    source: Path
    classes: Path
    jar_set: JarSet
    what: str = "the KRaft oracle"

    def source_files(self) -> list[Path]:
        return sorted(self.source.rglob("*.java")) if self.source.is_dir() else []

    def source_hash(self) -> str:
        digest = hashlib.sha256(self.jar_set.pom_hash().encode())
        for path in self.source_files():
            digest.update(str(path.relative_to(self.source)).encode() + b"\0")
            digest.update(path.read_bytes())
        return digest.hexdigest()

    def is_current(self) -> bool:
        stamp = self.classes / STAMP
        return stamp.is_file() and stamp.read_text().strip() == self.source_hash()

    def classpath(self) -> str:
        """The `java -cp` value; raises JarsMissingError when not built or stale."""
        if not self.jar_set.is_current() or not self.is_current():
            raise JarsMissingError(f"{self.what} is not built in {self.classes}: {INSTALL_HINT}")
        return os.pathsep.join([str(self.classes), str(self.jar_set.target / "*")])


def kraft_oracle_build(root: Path | None = None) -> OracleBuild:
    root = root or project_root()
    return OracleBuild(
        root / "tests" / "oracle" / "src",
        root / ".kraft-oracle" / "classes",
        kraft_oracle_jar_set(root),
    )


def metadata_log_tail_build(root: Path | None = None) -> OracleBuild:
    """`kcsim shadow --metadata-log`'s reader, compiled against the Kafka broker's jars."""
    root = root or project_root()
    return OracleBuild(
        root / "streaming" / "shadow" / "java",
        root / ".metadata-log-tail" / "classes",
        kafka_jar_set(root),
        "the metadata log reader",
    )


def compile_oracle(build: OracleBuild) -> None:
    """javac the sources into a fresh directory, then swap it in (never half-built)."""
    javac = shutil.which("javac")
    if javac is None:
        raise JarsMissingError("`javac` (JDK 17+) is not on PATH; install it first")
    staging = build.classes.with_name(build.classes.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    cmd = [
        javac,
        "-nowarn",
        "-encoding",
        "UTF-8",
        "-d",
        str(staging),
        "-cp",
        str(build.jar_set.target / "*"),
        *[str(p) for p in build.source_files()],
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise JarsMissingError(f"javac of {build.what} failed:\n{done.stdout}{done.stderr}")
    (staging / STAMP).write_text(build.source_hash() + "\n")
    shutil.rmtree(build.classes, ignore_errors=True)
    staging.rename(build.classes)


def spark_jars(root: Path | None = None) -> list[str]:
    """Absolute paths of the extra Spark jars (Delta, Kafka connector)."""
    found = spark_jar_set(root).jars()
    if not any(p.name.startswith("delta-spark_") for p in found) or not any(
        p.name.startswith("spark-sql-kafka-") for p in found
    ):
        raise JarsMissingError(
            f"Delta/Kafka jars for Spark not found in {spark_jar_set(root).target}: {INSTALL_HINT}"
        )
    return [str(p) for p in found]


def kafka_libs_dir(root: Path | None = None) -> Path:
    """The directory whose `*` is the classpath of the local Kafka broker."""
    jar_set = kafka_jar_set(root)
    if not any(p.name.startswith("kafka_2.13-") for p in jar_set.jars()):
        raise JarsMissingError(f"Apache Kafka jars not found in {jar_set.target}: {INSTALL_HINT}")
    return jar_set.target


def kafka_zk_libs_dir(root: Path | None = None) -> Path:
    """The classpath directory of the ZooKeeper-mode cluster (Kafka 3.7.1, ZooKeeper)."""
    jar_set = kafka_zk_jar_set(root)
    names = [p.name for p in jar_set.jars()]
    if not any(n.startswith("kafka_2.13-3.") for n in names) or not any(
        n.startswith("zookeeper-3.") for n in names
    ):
        raise JarsMissingError(
            f"Apache Kafka 3.7.1 / ZooKeeper jars not found in {jar_set.target}: {INSTALL_HINT}"
        )
    return jar_set.target


def resolve(jar_set: JarSet, *, repo_local: Path | None = None) -> None:
    """Run Maven to fill `jar_set.target` with exactly the pom's runtime jars."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsMissingError("`mvn` (Apache Maven 3.8+) is not on PATH; install it first")
    # Resolve into a fresh sibling directory, then swap, so a failed run never leaves
    # a half-filled or mixed-version directory behind.
    staging = jar_set.target.with_name(jar_set.target.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        mvn,
        "-B",
        "--no-transfer-progress",
        "-f",
        str(jar_set.pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    if repo_local is not None:
        cmd.append(f"-Dmaven.repo.local={repo_local}")
    # Output is kept for failures only (Maven 3.8's -q still prints colour codes).
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise JarsMissingError(
            f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-6000:]}{done.stderr}"
        )
    (staging / STAMP).write_text(jar_set.pom_hash() + "\n")
    shutil.rmtree(jar_set.target, ignore_errors=True)
    staging.rename(jar_set.target)


def ensure(
    root: Path | None = None,
    *,
    force: bool = False,
    repo_local: Path | None = None,
    only: str | None = None,
) -> list[Path]:
    """Resolve every jar set that is missing or stale, then compile the KRaft oracle and
    the metadata log reader if their sources or jars changed; returns the directories
    touched. `only` names one directory (`spark`, `kafka`, `kafka-zk`, `kraft-oracle`) to
    do alone (`kafka` with the metadata log reader)."""
    touched = []
    for jar_set in jar_sets(root):
        if only is not None and jar_set_name(jar_set) != only:
            continue
        if force or not jar_set.is_current():
            resolve(jar_set, repo_local=repo_local)
            touched.append(jar_set.target)
    build = kraft_oracle_build(root)
    if only in (None, "kraft-oracle") and (force or not build.is_current()):
        compile_oracle(build)
        touched.append(build.classes)
    tail = metadata_log_tail_build(root)
    # no source: a Docker layer that copied this module alone, before the package
    wanted = only in (None, "kafka") and tail.source_files()
    if wanted and (force or not tail.is_current()):
        compile_oracle(tail)
        touched.append(tail.classes)
    return touched


def jar_set_name(jar_set: JarSet) -> str:
    """`spark`, `kafka`, `kafka-zk` or `kraft-oracle`: the pom's directory under `jars/`."""
    return "spark" if jar_set.pom.parent.name == "jars" else jar_set.pom.parent.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streaming.jars", description="Fetch the JVM jars with Maven."
    )
    parser.add_argument("--force", action="store_true", help="re-resolve even if current")
    parser.add_argument("--repo-local", type=Path, help="Maven local repository to use")
    parser.add_argument(
        "--only",
        choices=["spark", "kafka", "kafka-zk", "kraft-oracle"],
        help="resolve (and for kraft-oracle, compile) one directory only",
    )
    args = parser.parse_args(argv)
    try:
        touched = ensure(force=args.force, repo_local=args.repo_local, only=args.only)
    except JarsMissingError as error:
        print(f"streaming.jars: {error}", file=sys.stderr)
        return 1
    for jar_set in jar_sets():
        if args.only is not None and jar_set_name(jar_set) != args.only:
            continue
        state = "resolved" if jar_set.target in touched else "up to date"
        print(f"{jar_set.target}: {len(jar_set.jars())} jars, {state}")
    build = kraft_oracle_build()
    if args.only in (None, "kraft-oracle"):
        state = "compiled" if build.classes in touched else "up to date"
        print(f"{build.classes}: {len(build.source_files())} sources, {state}")
    tail = metadata_log_tail_build()
    if args.only in (None, "kafka") and tail.source_files():
        state = "compiled" if tail.classes in touched else "up to date"
        print(f"{tail.classes}: {len(tail.source_files())} sources, {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
