# kcsim: the simulator, its Spark job and the chaos producer, in one image.
# bookworm pinned: it is the Debian release that still packages OpenJDK 17.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

# procps: Spark's launcher scripts call `ps`. Maven only fetches the jars at build time;
# the JDK's javac compiles the metadata log reader (and the test oracle) at install.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        openjdk-17-jdk-headless maven procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# Dependencies and jars first, so code edits do not redo the slow layers.
COPY pyproject.toml README.md* ./
COPY jars/ jars/
COPY streaming/jars.py streaming/jars.py
COPY scripts/install.sh scripts/install.sh
RUN mkdir -p controller schemas && touch controller/__init__.py schemas/__init__.py streaming/__init__.py \
    && KCSIM_EXTRAS= bash scripts/install.sh \
    && rm -rf /root/.m2
COPY . .
RUN KCSIM_EXTRAS= bash scripts/install.sh

VOLUME /data
ENTRYPOINT ["kcsim"]
CMD ["--help"]
