"""The pipeline's stages, one module each, with typed inputs and outputs.

:func:`crase_core.pipeline.run_query` calls them in order: planning → seeding →
expansion (:func:`crase_core.pipeline.build_graph` stops here, with the budget)
→ scoring (claims, matrices) → pruning → ranking (with trails and reasons).
Model work goes through :class:`crase_core.component_cache.ComponentCache`,
which caches it and counts its cost; progress goes through :mod:`.progress`.
"""
