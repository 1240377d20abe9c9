"""What the two web-API sources (Semantic Scholar, OpenAlex) share: the HTTP client's bookkeeping, the filter
check, references and citations as one paged neighbour fetch, and the words a cut list is recorded with."""

from __future__ import annotations

from typing import Literal

from crase_core.paper_source import NeighborList, SourceFilter
from crase_core.records import Paper
from crase_core.sources.s2_http import S2Client, S2Stats

Relation = Literal["references", "citations"]


class RemoteSource:
    """Base of :class:`~crase_core.sources.semantic_scholar.SemanticScholarSource` and
    :class:`~crase_core.sources.openalex.OpenAlexSource`; a subclass sets ``client`` and ``filter`` and
    implements ``_neighbors``."""

    client: S2Client
    filter: SourceFilter

    @property
    def external_calls(self) -> int:
        """HTTP requests sent so far by this source and its restricted views (cache hits excluded)."""
        return self.client.stats.requests

    @property
    def stats(self) -> S2Stats:
        return self.client.stats

    def close(self) -> None:
        self.client.close()

    def _visible(self, paper: Paper | None) -> bool:
        return paper is not None and not self.filter.hides(paper)

    def _neighbors(self, paper_id: str, relation: Relation) -> NeighborList:
        raise NotImplementedError

    def references(self, paper_id: str) -> NeighborList:
        """Papers ``paper_id`` cites (paged; see the subclass's module docstring)."""
        return self._neighbors(paper_id, "references")

    def citations(self, paper_id: str) -> NeighborList:
        """Papers citing ``paper_id`` (paged; see the subclass's module docstring)."""
        return self._neighbors(paper_id, "citations")

    def _truncation_rule(self, skipped: bool) -> str:
        """Why a neighbour list is cut: skipped after retries, or the page limit."""
        if skipped:
            return "the list could not be fetched after retries and was skipped (on_neighbor_error='skip')"
        s = self.client.settings
        return (f"the first {s.max_neighbor_pages} page(s) of {s.page_size} in the API's own order "
                "(max_neighbor_pages × page_size)")
