"""How much is still missing: every run's calibrated estimate of its own recall@k.

:mod:`.features` (what a trace knows about its completeness), :mod:`.model` (the fitted estimator and its
conformal intervals), :mod:`.calibration` (the JSON file a corpus is calibrated with, and where a run finds
it), :mod:`.estimate` (the record a trace carries and its words); ``crase bench calibrate`` fits a calibration
(:mod:`crase_core.evaluation.recall_calibration`).
"""
