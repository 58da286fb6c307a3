"""Tracking, the Cell Tracking Challenge way: the CTC folder format and its measures (docs/metrics.md).

``ctc`` (the format: lineage tables, ``XX_GT``/``XX_RES`` folders, their checks), ``matching`` (the
per-frame detection test), ``graph`` (a tracked movie's acyclic oriented graph), ``metrics`` (SEG,
DET, TRA), ``divisions`` (division F1), ``synthetic`` (procedural movies). Nothing here imports a
peer implementation; py-ctcmetrics and traccuracy are test dependencies the values are checked
against.
"""
