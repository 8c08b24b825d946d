"""`python -m simhash_redis.cli`: the ``simhash-redis`` command, for environments without its script."""

from .app import run

if __name__ == "__main__":
    run()
