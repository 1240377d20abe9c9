"""One exception family: every error a user can act on is a :class:`CraseError`.

Front ends (CLI, Streamlit) print ``str(error)`` and never a traceback. Messages
must name what failed and what to do, and must never contain secrets.
"""

from __future__ import annotations


class CraseError(Exception):
    """Base class: a failure with a message meant for the user."""


class InputError(CraseError):
    """The query, a setting or an id given by the user is not usable."""


class CorpusError(CraseError):
    """A corpus file is missing or malformed."""


class SourceError(CraseError):
    """The paper source (local index or remote API) could not answer."""


class ModelError(CraseError):
    """A model endpoint could not be reached or answered unusably."""


class BudgetExceeded(CraseError):
    """The run would make more model calls than the configured cap."""


class TraceError(CraseError):
    """A trace file could not be read."""
