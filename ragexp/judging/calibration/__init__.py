"""A judge against human labels: the labels CSV and agreement (:mod:`~.labels`), the threshold fit
with grouped cross-validation (:mod:`~.threshold`), and the calibration file a judge and a run use
(:mod:`~.record`)."""
