"""The distribution's version, in one place.

``pyproject.toml`` reads it from here when it builds (``[tool.setuptools.dynamic]``), and every
package of the distribution (``jobwire``, ``beanstalk_client``, ``gearman_client``,
``workq_client``, ``qless_client``) re-exports it as ``__version__``. A release changes this line
and ``CHANGELOG.md`` (tests/test_packaging.py checks that the two agree).
"""

__version__ = "0.1.0"
