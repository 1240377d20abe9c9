"""The settings hand-checked tests on the tiny corpora pin their exact numbers to, named in one place.

Their expected graphs, decisions and rankings were worked out with round 3's default
(:data:`~crase_core.trace.ROUND3_DEFAULTS`): up to 5 sub-queries, the word-overlap scorer's edges pruned
where no citing claim shares 15% of its words (``theta_lexical`` 0.15, ``tau_lexical`` 0: the bar the logistic scale
of that time read as θ 0.75, like a model's), the seeds of the plan alone (``query_seeds`` 0), no term proximity, no
anchor text in the restart and a fixed search-rank weight μ 0.4 (κ = η = 0): the defaults before issue 14
switched them.
:func:`pinned` gives those values explicitly, so a later change of a default does not move these tests.
"""

from __future__ import annotations

from typing import Any

from crase_core.settings.pipeline import PipelineSettings
from crase_core.trace import ROUND3_DEFAULTS

PINNED: dict[str, Any] = {**ROUND3_DEFAULTS, "text_matches": 0}  # and no top text match kept without an edge


def pinned(**changes: Any) -> PipelineSettings:
    """:class:`PipelineSettings` with :data:`PINNED`, then ``changes`` on top."""
    return PipelineSettings(**{**PINNED, **changes})
