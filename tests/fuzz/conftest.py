"""The ``jobwire-fuzz`` hypothesis profile, registered here and applied test by test through
:func:`tests.fuzz.strategies.fuzz_settings`: the global profile is left alone.

* ``deadline=None``: byte-by-byte feeding of a few KiB takes longer than the default 200 ms on a
  loaded CI machine, and a deadline is not what these tests are about.
* ``print_blob=True``: a failure prints ``@reproduce_failure(...)`` with the failing input, so it
  can be replayed exactly (the falsifying example is printed too, with the bytes).
* each test's count is its share of the loaded profile's (``dev`` or ``ci``, tests/conftest.py):
  the numbers in the tests are the ``ci`` counts, sized so that ``tests/fuzz`` runs in well under
  a minute; ``JOBWIRE_FUZZ_SCALE=10`` multiplies every one of them for a longer local run.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from .strategies import PROFILE

settings.register_profile(
    PROFILE,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

