"""The bundled servers (beanstalk, Gearman, Workq) against abusive clients: one suite,
parametrised over the three (``conftest.py`` describes each protocol, ``test_abuse.py`` holds the
tests)."""
