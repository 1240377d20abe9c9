"""``python -m crase_core.cli``: the same as the ``crase`` command."""

from crase_core.cli import command

command()
