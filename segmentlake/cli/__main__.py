"""``python -m segmentlake.cli``: the same as the ``segmentlake`` command."""

from segmentlake.cli.main import run

run()
