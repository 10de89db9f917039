"""The authentication benchmark keeps working (its figures are read in docs, not here)."""

from __future__ import annotations

from tests.benchmarks.test_benchmarks_run import run_script


def test_the_auth_benchmark_times_both_algorithms_beside_the_local_principal() -> None:
    done = run_script("auth.py", "--quick", timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "JWKS fetches: 1\n" in done.stdout  # fetched once, before timing
    for row in (
        "| local principal (no authentication) |",
        "| RS256: TokenVerifier.verify |",
        "| ES256: TokenVerifier.verify |",
        "| RS256: PyJWT decode alone |",
        "| ES256: PyJWT decode alone |",
    ):
        assert row in done.stdout
