"""Test doubles shared by the tests and the benchmarks (importable, so neither reaches into the other).

* :mod:`.fake_model` — :class:`~.fake_model.FakeModel`, a deterministic in-process stand-in for a paid
  model that disagrees with the offline scorer near θ (planner, extractor and per-edge scorer in one), and
  :func:`~.fake_model.fake_backend`, a model backend on it;
* :mod:`.fake_group_model` — :class:`~.fake_group_model.FakeGroupModel`, the same model answering the
  grouped entailment prompt;
* :mod:`.fake_openai` — :class:`~.fake_openai.FakeOpenAI`, a fake OpenAI-compatible HTTP endpoint on
  127.0.0.1 (chat completions for Crase's prompts, embeddings, and every fault kind the client must
  survive); ``python -m crase_core.testing.fake_openai`` runs it in its own process.

Nothing in the rest of ``crase_core`` imports this package.
"""
