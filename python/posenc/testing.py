"""pytest-friendly assertions for engine test suites: an engine's RoPE held to posenc's reference.

Example::

    from posenc.testing import assert_rope_matches
    def test_my_rope():
        q = np.random.randn(16, 8, 128).astype(np.float32)
        assert_rope_matches("config.json", np.arange(16), q, my_engine_rope(q))

On a mismatch the AssertionError's message is `posenc check`'s report: the worst element and the
diagnosis, best cause first (docs/CHECKING.md).
"""
from __future__ import annotations

from typing import Any

from ._check import CheckReport, check


def assert_rope_matches(model: Any, positions: Any, before: Any, after: Any, **options: Any) -> CheckReport:
    """Asserts that `after` is `before` rotated as `model` rotates it at `positions` (posenc.check's
    rotated form; `options` are check's: order, dtype, layer, layer_type, site, seq_len,
    assume_layout). Returns the report when it passes; raises AssertionError with the report's text
    (the diagnosis) when it does not, and ValueError for bad input."""
    __tracebackhide__ = True  # pytest: show the caller's line
    report = check(model, before=before, after=after, positions=positions, **options)
    if not report.passed:
        raise AssertionError(report.text.rstrip("\n"))
    return report
